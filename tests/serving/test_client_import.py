"""The HTTP SDK stays light: importing it pulls in no engine, torch or matplotlib (issue 10,
item 4), so an application talking to a running service does not pay for the models."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_memlane_client_imports_without_engine_torch_or_matplotlib():
    code = (
        "import sys, memlane_client\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'torch', 'matplotlib', 'memlane', 'ray', 'pymilvus', 'sentence_transformers'})\n"
        "print(','.join(heavy))\n"
        "assert memlane_client.MemlaneClient and memlane_client.AsyncMemlaneClient\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == ""
