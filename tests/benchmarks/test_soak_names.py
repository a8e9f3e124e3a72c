"""The soak's process names (benchmarks/soak.py): what the report lists and the soak test reads
("milvus-lite" among them), whatever directory the checkout is in."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from benchmarks.soak import _name


def test_a_process_is_named_by_its_programs_not_their_directories(tmp_path) -> None:
    # a script under a directory long enough to push its own name past 80 characters
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    script = deep / "milvus-lite"
    script.write_text("import time\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, str(script), "server", "--port", "19530"])
    try:
        time.sleep(0.5)
        name = _name(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert name == f"{Path(sys.executable).name} milvus-lite server --port 19530"
    assert _name(2**22 + 7) == "?"  # above pid_max's default: no such process
