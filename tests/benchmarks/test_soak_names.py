"""The soak's process names (benchmarks/soak.py): what the report lists and the soak test reads
("milvus-lite" among them), whatever directory the checkout is in."""

from __future__ import annotations

import subprocess
import sys
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
        name = _name(proc.pid)  # Popen returns once the program is exec'd: its command line is set
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert name == f"{Path(sys.executable).name} milvus-lite server --port 19530"
    assert _name(2**22 + 7) == "?"  # above the kernel's largest pid (2**22): no such process
