"""Stopping a detached server process (the local model server, the local Milvus server): the one
home of the SIGTERM-then-SIGKILL wait both use."""

from __future__ import annotations

import os
import signal
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
