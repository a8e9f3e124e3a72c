"""retry_startup: Ray's startup timeouts are retried after a cleanup; anything else is not."""

from __future__ import annotations

import os

import pytest

from cluster.local import retry_startup


class _Flaky:
    def __init__(self, errors: list[Exception]) -> None:
        self.errors = list(errors)
        self.starts = 0
        self.cleanups = 0

    def start(self) -> str:
        self.starts += 1
        if self.errors:
            raise self.errors.pop(0)
        return f"started on attempt {self.starts}"

    def cleanup(self) -> None:
        self.cleanups += 1


def test_timeouts_are_retried_after_cleanup():
    flaky = _Flaky(
        [
            Exception("The current node timed out during startup. This could ..."),
            TimeoutError("Timed out waiting for file /tmp/ray/s/gcs_server_port_x"),
        ]
    )
    assert retry_startup(flaky.start, flaky.cleanup, pause_s=0) == "started on attempt 3"
    assert (flaky.starts, flaky.cleanups) == (3, 2)


def test_gives_up_after_the_last_attempt():
    flaky = _Flaky([Exception("The current node timed out during startup.")] * 3)
    with pytest.raises(Exception, match="timed out during startup"):
        retry_startup(flaky.start, flaky.cleanup, attempts=3, pause_s=0)
    assert (flaky.starts, flaky.cleanups) == (3, 2)


def test_other_errors_are_not_retried():
    flaky = _Flaky([ValueError("num_cpus must be positive")])
    with pytest.raises(ValueError, match="num_cpus"):
        retry_startup(flaky.start, flaky.cleanup, pause_s=0)
    assert (flaky.starts, flaky.cleanups) == (1, 0)


def test_a_failed_attempt_leaves_no_process_behind(tmp_path):
    """What a timed-out start spawned is killed before the retry; what ran before is kept."""
    import subprocess
    import sys

    from cluster.local import descendants

    kept = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    spawned: list[subprocess.Popen] = []

    def start():
        if not spawned:  # the first attempt leaves a process running, as Ray's Node() does
            spawned.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
            raise Exception("The current node timed out during startup.")
        return "up"

    try:
        assert retry_startup(start, lambda: None, pause_s=0) == "up"
        assert spawned[0].wait(timeout=10) == -9  # SIGKILLed
        assert kept.poll() is None and kept.pid in descendants(os.getpid())
    finally:
        for proc in (kept, *spawned):
            proc.kill()
            proc.wait()
