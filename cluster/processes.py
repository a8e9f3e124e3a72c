"""Stopping a detached server process (the local model server, the local Milvus server): the one
home of the SIGTERM-then-SIGKILL wait both use, and of what a process that started servers does
when it is sent SIGTERM itself."""

from __future__ import annotations

import os
import signal
import sys
import time


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (reaping it when this process started it)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def terminate(pid: int, timeout_s: float) -> None:
    """SIGTERM, up to ``timeout_s`` for it to exit, then SIGKILL and 5 s more."""
    if pid <= 0:
        return
    for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pid):
                return
            time.sleep(0.2)


def exit_on_sigterm() -> None:
    """Make SIGTERM end this process through ``SystemExit`` (status 143), so its ``finally``
    blocks stop the servers it started. Python's default for SIGTERM ends the process at once:
    a benchmark stopped with ``kill`` left its Milvus server running (seen 28 Nov 2026 with
    benchmarks/big_bank.py). Call it from a main thread's entry point only."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
