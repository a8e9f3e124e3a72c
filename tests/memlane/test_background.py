"""The engine's one background scheduler (memlane/background.py): priorities, coalescing per
(kind, key), the bound, flush and close, and the modes."""

from __future__ import annotations

import threading
import time

import pytest

from memlane.background import Kind, Scheduler


def _blocked(scheduler: Scheduler) -> threading.Event:
    """Occupy the scheduler's thread until the returned event is set, so that what is
    submitted meanwhile queues up."""
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(10)

    scheduler.submit(Kind.extract, "hold", hold)
    assert started.wait(10)
    return release


def test_higher_priority_jobs_run_first_and_each_key_is_queued_once():
    s = Scheduler("thread")
    ran: list[str] = []
    release = _blocked(s)
    assert s.submit(Kind.models, "ana", lambda: ran.append("models ana"))
    assert s.submit(Kind.reflect, "ana", lambda: ran.append("reflect ana"))
    assert s.submit(Kind.tree, "ana", lambda: ran.append("tree ana"))
    assert not s.submit(Kind.tree, "ana", lambda: ran.append("tree ana again"))  # coalesced
    assert s.submit(Kind.tree, "bob", lambda: ran.append("tree bob"))  # another key
    assert s.submit(Kind.extract, "ana", lambda: ran.append("extract ana"))
    release.set()
    s.flush()
    assert ran == ["extract ana", "tree ana", "tree bob", "reflect ana", "models ana"]
    # once started, a key is free again: a write after it queues a new job
    assert s.submit(Kind.tree, "ana", lambda: ran.append("tree ana later"))
    s.close()
    assert ran[-1] == "tree ana later"
    assert s.done == 7 and s.errors == []


def test_close_runs_queued_jobs_in_shutdown_order_including_the_jobs_they_queue():
    s = Scheduler("thread")
    ran: list[str] = []
    release = _blocked(s)

    def extract() -> None:  # an extraction queues the consolidation of what it wrote
        ran.append("extract")
        s.submit(Kind.tree, "ana", lambda: ran.append("tree"))

    s.submit(Kind.models, "ana", lambda: ran.append("models"))
    s.submit(Kind.extract, "ana", extract)
    s.submit(Kind.reflect, "ana", lambda: ran.append("reflect"))
    closing = threading.Thread(target=s.close)
    closing.start()
    release.set()
    closing.join(10)
    assert ran == ["extract", "tree", "reflect", "models"]
    with pytest.raises(RuntimeError, match="closed"):
        s.submit(Kind.tree, "ana", lambda: None)


def test_a_failed_job_is_counted_and_the_others_run():
    s = Scheduler("thread")
    ran: list[str] = []

    def boom() -> None:
        raise ValueError("model down")

    s.submit(Kind.extract, "ana", boom)
    s.submit(Kind.tree, "ana", lambda: ran.append("tree"))
    s.close()
    assert ran == ["tree"]
    assert s.errors == ["extract ana: ValueError: model down"]


def test_a_full_queue_blocks_the_submitter_until_there_is_room():
    s = Scheduler("thread", max_pending=1)
    release = _blocked(s)
    s.submit(Kind.tree, "a", lambda: None)
    second = threading.Thread(target=s.submit, args=(Kind.tree, "b", lambda: None))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # backpressure: nothing dropped, nothing grows
    release.set()
    second.join(10)
    assert not second.is_alive()
    s.close()
    assert s.done == 3


def test_sync_runs_at_submit_and_off_runs_nothing():
    ran: list[str] = []
    sync = Scheduler("sync")
    assert sync.submit(Kind.tree, "ana", lambda: ran.append("tree"))
    assert ran == ["tree"]

    def boom() -> None:
        raise ValueError("model down")

    with pytest.raises(ValueError, match="model down"):  # inline: the caller sees the failure
        sync.submit(Kind.reflect, "ana", boom)
    off = Scheduler("off")
    assert not off.submit(Kind.tree, "ana", lambda: ran.append("never"))
    off.flush()
    off.close()
    assert ran == ["tree"]


def test_a_delayed_job_waits_for_its_key_to_be_quiet_and_flush_runs_it_at_once():
    s = Scheduler("thread")
    ran: list[tuple[str, float]] = []
    t0 = time.monotonic()
    assert s.submit(
        Kind.tree, "ana", lambda: ran.append(("tree ana", time.monotonic())), delay_s=0.4, max_delay_s=5
    )
    assert s.submit(Kind.tree, "bob", lambda: ran.append(("tree bob", time.monotonic())))  # not delayed
    for _ in range(3):  # writes keep coming: each pushes the delayed job back
        time.sleep(0.2)
        assert not s.submit(Kind.tree, "ana", lambda: ran.append(("again", 0.0)), delay_s=0.4, max_delay_s=5)
    deadline = time.monotonic() + 10
    while len(ran) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [name for name, _ in ran] == ["tree bob", "tree ana"]
    # quiet for 0.4 s after the last submission at ~0.6 s
    assert ran[1][1] - t0 >= 0.95
    assert s.submit(Kind.tree, "ana", lambda: ran.append(("flushed", time.monotonic())), delay_s=60)
    f0 = time.monotonic()
    s.flush()
    assert ran[-1][0] == "flushed" and ran[-1][1] - f0 < 5
    s.close()


def test_a_delayed_job_runs_at_its_latest_time_under_a_steady_stream():
    s = Scheduler("thread")
    ran: list[float] = []
    t0 = time.monotonic()
    s.submit(Kind.tree, "ana", lambda: ran.append(time.monotonic()), delay_s=0.3, max_delay_s=0.8)
    while not ran and time.monotonic() - t0 < 5:
        s.submit(Kind.tree, "ana", lambda: ran.append(time.monotonic()), delay_s=0.3, max_delay_s=0.8)
        time.sleep(0.05)
    assert ran and 0.75 <= ran[0] - t0 < 3
    s.close()


def test_settle_runs_a_delayed_job_at_once_and_waits_for_it():
    s = Scheduler("thread")
    ran: list[str] = []
    s.submit(Kind.facts, "ana", lambda: ran.append("facts ana"), delay_s=30.0, max_delay_s=60.0)
    s.submit(Kind.facts, "bob", lambda: ran.append("facts bob"), delay_s=30.0, max_delay_s=60.0)
    waited = s.settle(Kind.facts, "ana", timeout_s=10.0)
    assert ran == ["facts ana"]  # ana's delay waived; bob's still pending
    assert 0.0 < waited < 10.0
    assert s.settle(Kind.facts, "carl", timeout_s=10.0) == 0.0  # nothing pending: no wait
    s.close()
    assert ran == ["facts ana", "facts bob"]


def test_settle_waits_for_a_running_job_and_gives_up_at_its_bound():
    s = Scheduler("thread")
    started, release = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        release.wait(10)

    s.submit(Kind.facts, "ana", slow)
    assert started.wait(10)
    waited = s.settle(Kind.facts, "ana", timeout_s=0.2)
    assert 0.2 <= waited < 5.0  # still running: the bound, not the job, ended the wait
    release.set()
    s.flush()
    assert s.settle(Kind.facts, "ana", timeout_s=5.0) == 0.0
    s.close()
