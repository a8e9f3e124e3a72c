"""Bank write leases (memlane/leases.py) on real Milvus Lite and the local Milvus server,
without models: mutual exclusion under contention, per-bank independence, reentrancy, a dead
writer's lease expiring, and the wait bound."""

from __future__ import annotations

import threading
import time

import pytest

from memlane.leases import BankLeases, LeaseTimeout

# the server prefix it shares with the other modules of 8-dim stores (tests/conftest.py)
SERVER_COLLECTIONS = "dim-8"


@pytest.fixture
def settings(backend_settings, backend):
    """Every test here on Milvus Lite and on the local Milvus server (tests/conftest.py)."""
    return backend_settings()


@pytest.fixture
def store(settings):
    from memlane.stores.milvus import MilvusStore

    s = MilvusStore(settings, dim=8)
    yield s
    s.close()


def test_one_holder_at_a_time_under_contention(store):
    """4 threads (each with its own BankLeases, as 4 processes would have) take the same
    bank's lease 5 times each; never more than one inside, and every entry happens."""
    inside, most, entries = [0], [0], []
    guard = threading.Lock()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        leases = BankLeases(store, ttl_s=10, timeout_s=60, poll_s=0.01)
        try:
            for i in range(5):
                with leases.hold("ana"):
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    time.sleep(0.01)
                    with guard:
                        inside[0] -= 1
                        entries.append((n, i))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert most[0] == 1 and len(entries) == 20
    assert store.list_leases("ana") == []


def test_other_banks_do_not_wait_and_the_same_thread_reenters(store):
    a, b = BankLeases(store, timeout_s=0.5), BankLeases(store, timeout_s=0.5)
    with a.hold("ana"):
        with a.hold("ana"):  # reentrant on this thread
            assert len(store.list_leases("ana")) == 1
        with b.hold("bob"):  # another bank: no wait
            assert [r["bank_id"] for r in store.list_leases("bob")] == ["bob"]
        with pytest.raises(LeaseTimeout):  # another writer of "ana" gives up after 0.5 s
            with b.hold("ana"):
                pass
        assert len(store.list_leases("ana")) == 1  # the loser's record is gone
    assert store.list_leases("ana") == [] and store.list_leases("bob") == []


def test_a_dead_writers_lease_expires(store):
    """A record left by a writer that died (no heartbeat): ignored and deleted after its
    expiry, so the bank is blocked for at most ttl_s."""
    store.put_lease(
        "ana",
        "dead",
        {"bank_id": "ana", "owner": "dead", "choosing": False, "number": 1, "expires": time.time() + 1.0},
    )
    leases = BankLeases(store, timeout_s=30, poll_s=0.05)
    t0 = time.monotonic()
    with leases.hold("ana"):
        waited = time.monotonic() - t0
        assert [r["owner"] for r in store.list_leases("ana")] != ["dead"]
    assert 0.5 < waited < 10
    assert store.list_leases("ana") == []


class _CountingStore:
    """The store, counting the lease reads (the store-level wait polls with them)."""

    def __init__(self, store) -> None:
        self._store = store
        self.lists = 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def list_leases(self, bank_id):
        self.lists += 1
        return self._store.list_leases(bank_id)


def test_threads_of_one_process_queue_locally_and_background_gives_way(store):
    """One BankLeases (one process): a foreground writer waiting behind another thread is
    woken by its release without polling the store, and a background writer that arrived
    meanwhile goes after it."""
    from memlane.leases import background_writes

    counting = _CountingStore(store)
    leases = BankLeases(counting, ttl_s=10, timeout_s=30, poll_s=0.01)
    order: list[str] = []
    held, go = threading.Event(), threading.Event()

    def holder() -> None:
        with leases.hold("ana"):
            held.set()
            go.wait(10)
            order.append("holder")

    def foreground() -> None:
        with leases.hold("ana"):
            order.append("foreground")

    def background() -> None:
        with background_writes(), leases.hold("ana"):
            order.append("background")

    h = threading.Thread(target=holder)
    h.start()
    assert held.wait(10)
    lists_before = counting.lists
    b = threading.Thread(target=background)
    b.start()
    time.sleep(0.1)
    f = threading.Thread(target=foreground)
    f.start()
    time.sleep(0.3)  # both wait on the process's queue, not on the store
    assert counting.lists == lists_before
    go.set()
    for t in (h, f, b):
        t.join(30)
    assert order == ["holder", "foreground", "background"]
    assert store.list_leases("ana") == []
