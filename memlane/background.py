"""The engine's one background scheduler: every job that follows a write (deferred LLM
extraction, fact resolution and the temporal tree, CARA's opinions and observations, mental
model refresh) runs here, one scheduler per :class:`memlane.engine.Memory`.

Why one thread: the jobs are read-modify-write updates of a bank (opinions, observations, tree
nodes, model answers) whose cost is LLM latency, not CPU. One thread serialises them (no two
jobs update the same record at once) and overlaps the waiting with retain on the caller's
thread.

Why priorities: a job of a higher kind produces the input of the lower ones (an extraction
writes the facts the tree, CARA and the models then read), so the queue runs by :class:`Kind`
first and submission order second. Close runs what is queued in that same order, which is
therefore the one shutdown order.

Why coalescing: a job is keyed by (kind, key), the key usually a bank. A burst of writes to one
bank queues one job per kind, which reads what they all wrote; a job already running does not
count (what was written after it started gets its own job).

Why a delay: a job submitted with ``delay_s`` waits until its key has been quiet that long (each
coalesced submission pushes it back, up to ``max_delay_s`` after the first), so work that
follows a write runs behind a stream of writes, not between them: the service's tree job ran
after every retain request of the peer workload and the next retain waited for it and shared
the cores with it (benchmarks/retain_profile.py). ``flush`` and ``close`` run delayed jobs at
once.

The queue is bounded, so a retain that outruns the model blocks on ``submit`` (backpressure)
instead of growing memory; nothing is dropped. A job submitted from the scheduler's own thread
(an extraction queueing the tree) never waits, since only that thread could free the room. A
job that raises is logged and counted in ``errors``; the scheduler goes on.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from enum import IntEnum
from typing import Callable, Literal

from memlane.leases import background_writes

log = logging.getLogger(__name__)

Mode = Literal["thread", "sync", "off"]


class Kind(IntEnum):
    """A job's kind; a lower value runs first."""

    extract = 0  # deferred LLM extraction: writes the facts every other kind reads
    facts = 1  # fact resolution (supersessions): what a recall waits for (``settle``)
    tree = 2  # the temporal tree (it resolves first too: a no-op after a facts job)
    reflect = 3  # CARA: opinions and observations
    models = 4  # mental models that new facts touch


class Scheduler:
    """Runs keyed jobs by priority on one daemon thread (``mode="thread"``), inline on the
    submitting thread (``"sync"``: errors reach the caller), or never (``"off"``)."""

    def __init__(
        self, mode: Mode = "thread", *, max_pending: int = 1024, name: str = "memlane-background"
    ) -> None:
        self.mode = mode
        self._max_pending = max_pending
        self._name = name
        self._heap: list[tuple[int, int, tuple[Kind, str], Callable[[], None]]] = []
        self._keys: set[tuple[Kind, str]] = set()
        # delayed keys: (due, latest due) in time.monotonic() seconds; absent = runnable
        self._due: dict[tuple[Kind, str], tuple[float, float]] = {}
        self._seq = itertools.count()
        self._running = 0
        self._active: set[tuple[Kind, str]] = set()  # keys whose job is running now
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.errors: list[str] = []
        self.done = 0

    def submit(
        self, kind: Kind, key: str, job: Callable[[], None], *, delay_s: float = 0.0, max_delay_s: float = 0.0
    ) -> bool:
        """Queue ``job`` unless a job of ``kind`` for ``key`` is queued and not yet started;
        True when queued (or run, in sync mode). Blocks while the queue is full. With
        ``delay_s`` the job starts once ``key`` saw no submission of ``kind`` for that long,
        and at the latest ``max_delay_s`` after the submission that queued it."""
        if self.mode == "off":
            return False
        if self.mode == "sync":
            job()
            self.done += 1
            return True
        with self._cond:
            own = threading.current_thread() is self._thread
            if self._closed and not own:
                raise RuntimeError("background scheduler is closed")
            if (kind, key) in self._keys:
                if (kind, key) in self._due:
                    _, latest = self._due[(kind, key)]
                    self._due[(kind, key)] = (min(time.monotonic() + delay_s, latest), latest)
                return False
            if delay_s > 0:
                now = time.monotonic()
                self._due[(kind, key)] = (now + delay_s, now + max(delay_s, max_delay_s))
            while not own and len(self._heap) >= self._max_pending:
                self._cond.wait()
            self._keys.add((kind, key))
            heapq.heappush(self._heap, (int(kind), next(self._seq), (kind, key), job))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return True

    def flush(self) -> None:
        """Wait until every job submitted so far, and every job those queued, has run."""
        with self._cond:
            self._due.clear()  # delayed jobs run now
            self._cond.notify_all()
            while self._heap or self._running:
                self._cond.wait()

    def settle(self, kind: Kind, key: str, timeout_s: float) -> float:
        """Run the job of ``kind`` for ``key`` now if one is queued (its delay waived), and wait
        until none is queued or running, at most ``timeout_s``. Returns the seconds waited (0
        when there was nothing to wait for). Read-your-writes: a recall settles its bank's
        fact job so that a retain that returned before it is resolved. From the scheduler's
        own thread it never waits (only that thread could run the job)."""
        pending = (kind, key)
        with self._cond:
            if timeout_s <= 0 or threading.current_thread() is self._thread:
                return 0.0  # a zero bound: read-your-writes off, the job keeps its delay
            if pending not in self._keys and pending not in self._active:
                return 0.0
            start = time.monotonic()
            if pending in self._due:
                self._due.pop(pending)
                self._cond.notify_all()
            deadline = start + timeout_s
            while pending in self._keys or pending in self._active:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return time.monotonic() - start

    def close(self) -> None:
        """Run what is queued (by priority: the shutdown order), then stop the thread. Jobs
        queued by running jobs still run; a submission from elsewhere afterwards raises."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._due.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._heap and self._closed:
                        return  # closed and drained
                    pick, wait = self._next()
                    if pick is not None:
                        break
                    self._cond.wait(wait)
                _, _, key, job = self._heap.pop(pick)
                heapq.heapify(self._heap)
                self._keys.discard(key)  # from now on a new write queues a new job
                self._due.pop(key, None)
                self._running += 1
                self._active.add(key)
                self._cond.notify_all()  # room for a blocked submit
            try:
                with background_writes():  # a waiting retain writes first (memlane/leases.py)
                    job()
                self.done += 1
            except Exception as exc:  # noqa: BLE001 - a failed job must not stop the others
                msg = f"{key[0].name} {key[1]}: {type(exc).__name__}: {exc}"
                log.warning("background job failed: %s", msg)
                self.errors.append(msg)
            finally:
                with self._cond:
                    self._running -= 1
                    self._active.discard(key)
                    self._cond.notify_all()

    def _next(self) -> tuple[int | None, float | None]:
        """(index in the heap of the job to run now: the first by kind and submission among
        those due, or None; seconds until the next delayed one is due, None: nothing queued).
        Called with the condition held."""
        now = time.monotonic()
        best: int | None = None
        soonest: float | None = None
        for i, (rank, seq, key, _) in enumerate(self._heap):
            due = self._due.get(key)
            if due is not None and due[0] > now:
                soonest = due[0] - now if soonest is None else min(soonest, due[0] - now)
                continue
            if best is None or (rank, seq) < self._heap[best][:2]:
                best = i
        return best, soonest
