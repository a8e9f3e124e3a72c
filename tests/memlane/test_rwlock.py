"""The bank index's reader-writer lock (memlane/recall/rwlock.py): readers share it, a writer
holds it alone and is not starved by a stream of readers, the writer thread re-enters it (to
write or read), and a reader cannot upgrade to a writer."""

from __future__ import annotations

import threading
import time

import pytest

from memlane.recall.rwlock import RWLock

WAIT = 5.0


def started(target, *args) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def test_readers_share_the_lock():
    lock = RWLock()
    inside = threading.Barrier(3, timeout=WAIT)  # all three readers inside at once

    def reader() -> None:
        with lock.read():
            inside.wait()

    threads = [started(reader) for _ in range(3)]
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    assert lock.readers == 0


def test_a_writer_excludes_readers_and_writers():
    lock = RWLock()
    log: list[str] = []
    entered = threading.Event()
    release = threading.Event()

    def writer() -> None:
        with lock.write():
            entered.set()
            release.wait(WAIT)
            log.append("writer out")

    def reader() -> None:
        with lock.read():
            log.append("reader in")

    def writer2() -> None:
        with lock.write():
            log.append("writer2 in")

    w = started(writer)
    assert entered.wait(WAIT)
    others = [started(reader), started(writer2)]
    time.sleep(0.1)
    assert log == []  # both wait for the writer
    release.set()
    for t in [w, *others]:
        t.join(WAIT)
        assert not t.is_alive()
    assert log[0] == "writer out" and sorted(log[1:]) == ["reader in", "writer2 in"]


def test_a_waiting_writer_is_not_starved_by_new_readers():
    lock = RWLock()
    first_in = threading.Event()
    release_first = threading.Event()
    log: list[str] = []

    def long_reader() -> None:
        with lock.read():
            first_in.set()
            release_first.wait(WAIT)
        log.append("first reader out")

    def writer() -> None:
        with lock.write():
            log.append("writer in")

    def late_reader() -> None:
        with lock.read():
            log.append("late reader in")

    r = started(long_reader)
    assert first_in.wait(WAIT)
    w = started(writer)
    deadline = time.monotonic() + WAIT
    while lock._writers_waiting == 0 and time.monotonic() < deadline:  # the writer queues
        time.sleep(0.005)
    late = started(late_reader)
    time.sleep(0.1)
    assert "late reader in" not in log  # held back behind the waiting writer
    release_first.set()
    for t in (r, w, late):
        t.join(WAIT)
        assert not t.is_alive()
    assert log.index("writer in") < log.index("late reader in")


def test_a_reader_reenters_while_a_writer_waits():
    """A thread already reading reads again without waiting (else it would deadlock behind
    the writer that waits for it)."""
    lock = RWLock()
    w_started = threading.Event()
    done = threading.Event()

    def writer() -> None:
        w_started.set()
        with lock.write():
            pass

    with lock.read():
        w = started(writer)
        assert w_started.wait(WAIT)
        time.sleep(0.05)
        with lock.read():  # re-entrant: does not wait for the queued writer
            done.set()
    assert done.is_set()
    w.join(WAIT)
    assert not w.is_alive()


def test_the_writer_reenters_to_write_and_to_read():
    lock = RWLock()
    with lock.write():
        with lock.write():
            with lock.read():
                assert lock.writing
        assert lock.writing
    assert not lock.writing and lock.readers == 0
    with lock.read():  # free again
        assert lock.readers == 1


def test_no_upgrade_from_read_to_write():
    lock = RWLock()
    with lock.read():
        with pytest.raises(RuntimeError, match="upgrade"):
            with lock.write():
                pass
    with lock.write():  # the failed upgrade left nothing held
        assert lock.readers == 0


def test_the_lock_is_released_when_the_block_raises():
    lock = RWLock()
    with pytest.raises(ValueError):
        with lock.write():
            raise ValueError
    with pytest.raises(ValueError):
        with lock.read():
            raise ValueError
    assert not lock.writing and lock.readers == 0
    with lock.write():
        pass
