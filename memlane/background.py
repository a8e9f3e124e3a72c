"""A bounded background worker: one thread, a bounded job queue, flush and close. Used by
reflect (opinions, observations), the temporal tree and mental models; its own module so that
none of them imports another to get it.

Why one thread: the jobs (observation refresh, opinion reinforcement) are read-modify-write
updates of a bank's opinion and observation units, and their cost is LLM latency, not CPU.
One thread serialises them (no two jobs update the same opinion at once) and overlaps the
waiting with retain on the caller's thread. The queue is bounded, so a retain that outruns
the model blocks on ``submit`` (backpressure) instead of growing memory; nothing is dropped.
A job that raises is logged and counted in ``errors``; the worker goes on.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

log = logging.getLogger(__name__)


class BackgroundWorker:
    """Runs submitted callables in order on one daemon thread."""

    def __init__(self, name: str = "memlane-background", max_pending: int = 16) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._name = name
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        self.errors: list[str] = []
        self.done = 0
        self._pending_keys: set[str] = set()
        self._keys_lock = threading.Lock()

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Queue ``job``; blocks while the queue is full."""
        if self._closed:
            raise RuntimeError("background worker is closed")
        self._ensure_thread()
        self._queue.put(job)

    def submit_once(self, key: str, job: Callable[[], None]) -> bool:
        """Queue ``job`` unless a job for ``key`` (e.g. a bank) is already queued and not yet
        started: a burst of writes to one bank queues one refresh, which reads what they all
        wrote. True when queued."""
        with self._keys_lock:
            if key in self._pending_keys:
                return False
            self._pending_keys.add(key)

        def once() -> None:
            with self._keys_lock:
                self._pending_keys.discard(key)
            job()

        self.submit(once)
        return True

    def flush(self) -> None:
        """Wait until every job submitted so far has run."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        """Run what is queued, then stop the thread."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                job()
                self.done += 1
            except Exception as exc:  # noqa: BLE001 - a failed job must not stop the worker
                msg = f"{type(exc).__name__}: {exc}"
                log.warning("background job failed: %s", msg)
                self.errors.append(msg)
            finally:
                self._queue.task_done()
