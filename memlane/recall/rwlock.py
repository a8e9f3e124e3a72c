"""A reader-writer lock: the searches of one bank index run side by side, its writes alone.

Why: with one lock for everything a bank index's lexical search waited for its dense search
(they run on the recall's thread pool side by side, and the dense one holds the lock for the
whole product): at 1M units that wait was most of the whole recall's distance from a small
bank's (issue 38, item 4).

Rules:

- readers share the lock; a writer holds it alone;
- a waiting writer stops new readers from coming in (a stream of searches cannot starve a
  write), while a thread that already reads may read again (re-entrant reads never wait, so
  they cannot deadlock behind that writer);
- the writer thread may take the lock again, to write or to read (both re-entrant);
- a reader may not become a writer: :meth:`RWLock.write` raises ``RuntimeError`` in a thread
  that holds a read (two readers upgrading would wait for each other forever). Release the
  read, write, and read again.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class RWLock:
    """Shared reads, exclusive writes, writers preferred, no read -> write upgrade."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0  # threads holding a read (each counted once, however deep)
        self._writer: int | None = None  # the ident of the thread holding the write
        self._write_depth = 0
        self._writers_waiting = 0
        self._local = threading.local()  # this thread's read depth

    def _read_depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @contextmanager
    def read(self) -> Iterator[None]:
        """Hold the lock shared (with other readers) for the block."""
        if self._writer == threading.get_ident():
            # The writer reads under its own write (only this thread sets or clears it).
            yield
            return
        depth = self._read_depth()
        if depth == 0:
            with self._cond:
                while self._writer is not None or self._writers_waiting:
                    self._cond.wait()
                self._readers += 1
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if depth == 0:
                with self._cond:
                    self._readers -= 1
                    if self._readers == 0:
                        self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        """Hold the lock alone for the block (re-entrant for the thread that holds it)."""
        me = threading.get_ident()
        if self._writer == me:
            self._write_depth += 1
            try:
                yield
            finally:
                self._write_depth -= 1
            return
        if self._read_depth():
            raise RuntimeError("RWLock: a thread holding a read cannot take the write (no upgrade)")
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer is not None or self._readers:
                    self._cond.wait()
            except BaseException:
                self._writers_waiting -= 1
                self._cond.notify_all()  # readers held back by this writer go on
                raise
            self._writers_waiting -= 1
            self._writer, self._write_depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._writer, self._write_depth = None, 0
                self._cond.notify_all()

    @property
    def readers(self) -> int:
        """Threads holding a read right now (for tests)."""
        return self._readers

    @property
    def writing(self) -> bool:
        """Whether some thread holds the write (for tests)."""
        return self._writer is not None
