"""A quiet terminal for commands that start Ray: Memlane's progress and results on the
terminal, everything else (Ray's INFO lines and warnings, the C++ core worker's log lines,
worker output forwarded to the driver, model-loading bars) in a log file whose path is printed.

Ray writes to the terminal from places a logging config cannot reach: its core worker logs
errors in C++ straight to file descriptor 2, and the driver prints its workers' output from a
background thread. So the redirection is of the file descriptors themselves (1 and 2), for the
duration of the block, and the progress bar writes to a duplicate of the original stderr.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO


def quiet_model_loading() -> None:
    """Hide the model-loading progress bars of transformers and huggingface_hub ("Loading
    weights: 100%|...") in this process and in the Ray workers it starts (they inherit the
    environment). Must run before transformers is imported; an explicit setting wins."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@contextmanager
def output_to_log(log_path: Path, title: str) -> Iterator[TextIO]:
    """Send this process's stdout and stderr (file descriptors 1 and 2) to ``log_path``,
    appended under a header line naming ``title``, until the block ends; yield a stream to the
    original stderr for progress bars. The descriptors are restored before an exception
    leaves the block, so an error message printed by the caller reaches the terminal."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    terminal = os.fdopen(os.dup(saved[2]), "w", buffering=1)
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - closed in finally
    log.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {title} =====\n".encode())
    try:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        yield terminal
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            terminal.close()
            log.close()
