"""Bank leases: one writer per bank at a time, across threads and processes.

Two writers retaining into the same bank at once each read the bank (its entities, its index,
its graph) when they start and wrote as if alone: the second writer's semantic links missed the
first one's memories, and each writer's entity records (mention counts, first and last
sighting; aliases too) overwrote the other's. Measured: all 40 memories of the second writer
linked otherwise than in a sequential run, and "Ada" ended with 600 mentions instead of 640
(issue 16, ``tests/memlane/test_concurrent_writers.py``). A name the first writer had just
created could also resolve fuzzily in one order and not in the other. So every write
(:class:`memlane.writes.BankWriter`) holds the bank's lease: a second writer waits, then reads
what the first one wrote, and the result is the sequential one.

The store of record (Milvus) has no compare-and-swap, so the lease is Lamport's bakery
algorithm over plain records, which needs only reads and writes that later reads see (Milvus
collections here are Strong): a writer announces itself (``choosing``), takes a number one
above every number it sees, then waits until no other writer is choosing and none holds a
smaller (number, owner). A writer that dies leaves its record behind; records carry an expiry
that the holder's heartbeat pushes forward (every ``ttl_s / 3``), and an expired record is
ignored and deleted. So a crashed writer blocks its bank for at most ``ttl_s``; a live writer
stalled for longer than ``ttl_s`` (a stopped process) loses its lease, the usual price of
leases.

Within one process the lease is reentrant per thread (a write inside a write of the same bank,
on the same thread, does not wait for itself), and threads of one process queue for a bank on a
condition variable before they take the store's lease: a thread waiting behind another of its
own process is woken the moment that one releases, instead of polling the store (a retain behind
the service's background tree write waited 0.39 s per request polling, benchmarks/
retain_profile.py, 26 Nov 2026). Writes of the background scheduler (:func:`background_writes`)
give way to a foreground write of the same bank that is waiting: a retain never queues behind
background work that has not started writing.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

from memlane.errors import MemlaneError
from memlane.interfaces import VectorStore
from memlane.timings import stage

log = logging.getLogger(__name__)


_BACKGROUND: ContextVar[bool] = ContextVar("memlane_background_writes", default=False)


@contextmanager
def background_writes() -> Iterator[None]:
    """Writes in the block are background work: they wait for this process's foreground
    writers of the same bank (the background scheduler runs its jobs inside it)."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


class LeaseTimeout(MemlaneError):
    """Another writer held the bank for longer than this writer was willing to wait."""


class BankLeases:
    """Acquire and release per-bank write leases recorded in ``store``."""

    def __init__(
        self, store: VectorStore, *, ttl_s: float = 30.0, timeout_s: float = 600.0, poll_s: float = 0.05
    ) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._local = threading.local()
        self.waited_s = 0.0  # seconds this process spent waiting for leases (tests, metrics)
        # this process's queue per bank: the holding thread, and foreground writers waiting
        self._queue = threading.Condition()
        self._holder: dict[str, int] = {}
        self._foreground_waiting: dict[str, int] = {}

    def _depths(self) -> dict[str, int]:
        depths = getattr(self._local, "depths", None)
        if depths is None:
            depths = self._local.depths = {}
        return depths

    @contextmanager
    def hold(self, bank_id: str) -> Iterator[None]:
        """Hold ``bank_id``'s lease for the block (waiting for it first)."""
        depths = self._depths()
        if depths.get(bank_id):
            depths[bank_id] += 1
            try:
                yield
            finally:
                depths[bank_id] -= 1
            return
        lease = _Lease(self, bank_id)
        with stage("lease"):
            self._enter(bank_id)
            try:
                lease.acquire()
            except BaseException:
                self._leave(bank_id)
                raise
        depths[bank_id] = 1
        try:
            yield
        finally:
            depths.pop(bank_id, None)
            with stage("lease"):
                try:
                    lease.release()
                finally:
                    self._leave(bank_id)

    def _enter(self, bank_id: str) -> None:
        """Wait until no other thread of this process holds ``bank_id`` (a background writer
        also for waiting foreground writers), then hold it here."""
        me = threading.get_ident()
        background = _BACKGROUND.get()
        t0 = time.monotonic()
        deadline = t0 + self.timeout_s
        with self._queue:
            if not background:
                self._foreground_waiting[bank_id] = self._foreground_waiting.get(bank_id, 0) + 1
            try:
                while bank_id in self._holder or (background and self._foreground_waiting.get(bank_id)):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise LeaseTimeout(
                            f"bank {bank_id!r} is being written by another thread of this process "
                            f"for more than {self.timeout_s:.0f}s"
                        )
                    self._queue.wait(left)
            finally:
                if not background:
                    self._foreground_waiting[bank_id] -= 1
                    if not self._foreground_waiting[bank_id]:
                        del self._foreground_waiting[bank_id]
            self._holder[bank_id] = me
            self.waited_s += time.monotonic() - t0

    def _leave(self, bank_id: str) -> None:
        with self._queue:
            self._holder.pop(bank_id, None)
            self._queue.notify_all()


class _Lease:
    def __init__(self, leases: BankLeases, bank_id: str) -> None:
        self.leases = leases
        self.store = leases.store
        self.bank_id = bank_id
        self.owner = uuid.uuid4().hex
        self.record: dict[str, Any] = {
            "bank_id": bank_id,
            "owner": self.owner,
            "choosing": True,
            "number": 0,
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _put(self) -> None:
        with self._lock:
            self.record["expires"] = time.time() + self.leases.ttl_s
            record = dict(self.record)
        self.store.put_lease(self.bank_id, self.owner, record)

    def _others(self) -> list[dict[str, Any]]:
        """The other writers' live records; expired ones are deleted (their writer died)."""
        now = time.time()
        live = []
        for rec in self.store.list_leases(self.bank_id):
            if rec.get("owner") == self.owner:
                continue
            if float(rec.get("expires", 0)) < now:
                log.warning(
                    "bank %s: dropping the expired write lease of %s (pid %s on %s)",
                    self.bank_id,
                    rec.get("owner"),
                    rec.get("pid"),
                    rec.get("host"),
                )
                self.store.delete_lease(self.bank_id, str(rec.get("owner")))
                continue
            live.append(rec)
        return live

    def acquire(self) -> None:
        t0 = time.monotonic()
        self._put()  # choosing
        number = 1 + max((int(r.get("number", 0)) for r in self._others()), default=0)
        with self._lock:
            self.record.update(choosing=False, number=number)
        self._put()
        self._beat = threading.Thread(
            target=self._heartbeat, daemon=True, name=f"memlane-lease-{self.bank_id}"
        )
        self._beat.start()
        me = (number, self.owner)
        pause = self.leases.poll_s
        deadline = t0 + self.leases.timeout_s
        while True:
            blockers = [
                r
                for r in self._others()
                if r.get("choosing") or (0 < int(r.get("number", 0)) and (int(r["number"]), r["owner"]) < me)
            ]
            if not blockers:
                break
            if time.monotonic() > deadline:
                self.release()
                raise LeaseTimeout(
                    f"bank {self.bank_id!r} is being written by another writer (pid "
                    f"{blockers[0].get('pid')} on {blockers[0].get('host')}) for more than "
                    f"{self.leases.timeout_s:.0f}s"
                )
            time.sleep(pause)
            pause = min(0.5, pause * 1.5)
        self.leases.waited_s += time.monotonic() - t0

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.leases.ttl_s / 3):
            try:
                self._put()
            except Exception:  # noqa: BLE001 - the next beat retries; expiry is ttl_s away
                log.warning("bank %s: lease heartbeat failed", self.bank_id, exc_info=True)

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join()
        try:
            self.store.delete_lease(self.bank_id, self.owner)
        except Exception:  # noqa: BLE001 - it expires after ttl_s
            log.warning("bank %s: could not release the write lease", self.bank_id, exc_info=True)
