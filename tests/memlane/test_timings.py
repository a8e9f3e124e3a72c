"""Stage timings (memlane/timings.py): what a retain report says about where its time went."""

from __future__ import annotations

import threading
import time

from memlane.records import RetainItem
from memlane.timings import current, recording, stage


def test_stages_sum_per_name_and_record_nothing_outside_a_recording():
    with stage("outside"):
        time.sleep(0.01)
    assert current() is None
    with recording() as timings:
        for _ in range(2):
            with stage("nap"):
                time.sleep(0.02)
        with recording() as inner:  # a nested call records into the outer call's report
            with stage("inner"):
                pass
    assert inner is timings
    assert set(timings) == {"nap", "inner"}
    assert 0.04 <= timings["nap"] < 0.5
    assert current() is None


def test_two_threads_never_mix_their_recordings():
    seen: dict[str, dict[str, float]] = {}
    barrier = threading.Barrier(2)

    def work(name: str) -> None:
        with recording() as timings:
            barrier.wait()
            with stage(name):
                time.sleep(0.01)
            barrier.wait()
        seen[name] = timings

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen["a"]) == {"a"} and set(seen["b"]) == {"b"}


def test_a_retain_report_names_its_stages_within_its_wall_time(memory):
    items = [
        RetainItem(content=f"Ada moved to Lisbon in {2000 + i} and took up sailing.", speaker="Ada")
        for i in range(6)
    ]
    report = memory.retain_items("stages", items, document_id="d1")
    stages = report.timings_s
    for name in ("validate", "bank", "lease", "state", "delete", "embed", "store_write", "finish", "queue"):
        assert name in stages, name
    # the extraction thread's own time is overlapped; every other stage runs on the caller's
    # thread one after another, so together they fit in the call's wall time
    serial = sum(v for k, v in stages.items() if k != "extract (overlapped)")
    assert 0 < serial <= report.seconds + 0.01
    assert report.units >= 6
