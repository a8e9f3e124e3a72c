"""cluster/processes.py: a process sent SIGTERM runs its ``finally`` blocks once it asked to."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from cluster.processes import exit_on_sigterm
if {install}:
    exit_on_sigterm()
marker = Path({marker!r})
try:
    print("ready", flush=True)
    time.sleep(60)
finally:
    marker.write_text("stopped the servers")
"""


def _terminated(tmp_path: Path, install: bool) -> tuple[int, Path]:
    marker = tmp_path / f"finally-{install}"
    code = CHILD.format(root=str(ROOT), install=install, marker=str(marker))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    return child.wait(timeout=30), marker  # a child still sleeping raises TimeoutExpired


def test_sigterm_runs_the_finally_blocks_and_exits_143(tmp_path):
    rc, marker = _terminated(tmp_path, install=True)
    assert rc == 143
    assert marker.read_text() == "stopped the servers"


def test_without_it_sigterm_skips_them(tmp_path):
    # Python's default, which left a benchmark's Milvus server running
    rc, marker = _terminated(tmp_path, install=False)
    assert rc == -signal.SIGTERM
    assert not marker.exists()
