"""Flushing Milvus Lite's collections when their writer pauses, off the write's path.

Lite answers a write once its rows are in the memtable, and they are durable then: a process
killed with ``os._exit`` right after 300 unflushed inserts and 3 deletes reopened with all of
them (Nov 2026). A flush only moves rows out of the memtable, where a Milvus search
rebuilds a brute-force index per query (13k rows: 0.4-1.2 s a search, against 18 ms once
flushed). Recall searches the in-process index by default (``store.search_backend = "memory"``),
which does not read Lite's search path at all, so a flush per write bought nothing on the
request: it was 1.62 s of the 9.67 s the Hindsight peer's 38 retains took through the service
(``benchmarks/retain_profile.py --modes service``), 43 ms a request.

So the collections a write touched are flushed by one background thread once no write has
touched any of them for ``idle_s``, or ``max_age_s`` after the first unflushed write while
writes keep coming (a backfill), which bounds the memtable; and at close.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable

log = logging.getLogger(__name__)


class IdleFlusher:
    """Collects the names of collections to flush and flushes them on its thread when the
    writes pause (see the module). ``flush`` is called with the names, never concurrently
    with itself; the caller serialises it with its writes."""

    def __init__(self, flush: Callable[[list[str]], None], idle_s: float, max_age_s: float) -> None:
        self._flush = flush
        self.idle_s = idle_s
        self.max_age_s = max_age_s
        self._cv = threading.Condition()
        self._pending: dict[str, None] = {}
        self._first = self._last = 0.0
        self._thread: threading.Thread | None = None
        self._stopped = False

    def mark(self, names: Iterable[str]) -> None:
        """Note that ``names`` were written (flushed later, on the thread)."""
        with self._cv:
            if self._stopped:
                return
            now = time.monotonic()
            if not self._pending:
                self._first = now
            self._pending.update(dict.fromkeys(names))
            self._last = now
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memlane-lite-flush", daemon=True)
                self._thread.start()
            self._cv.notify()

    def take(self) -> list[str]:
        """The names not flushed yet, forgotten here (a caller flushing them itself: close)."""
        with self._cv:
            names, self._pending = list(self._pending), {}
            return names

    def stop(self) -> None:
        """Stop the thread (what is pending stays pending: :meth:`take` it first)."""
        with self._cv:
            self._stopped = True
            self._cv.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _due(self) -> list[str] | None:
        """Wait (holding the condition) until something is due; None once stopped."""
        while True:
            if self._stopped:
                return None
            if not self._pending:
                self._cv.wait()
                continue
            due = min(self._last + self.idle_s, self._first + self.max_age_s)
            wait = due - time.monotonic()
            if wait <= 0:
                names, self._pending = list(self._pending), {}
                return names
            self._cv.wait(wait)

    def _run(self) -> None:
        while True:
            with self._cv:
                names = self._due()
            if names is None:
                return
            try:
                self._flush(names)
            except Exception as exc:  # noqa: BLE001 - the rows are durable; only search speed waits
                log.warning(
                    "flushing %s failed (%s: %s); left in the memtable", names, type(exc).__name__, exc
                )
