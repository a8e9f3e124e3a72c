"""Milvus Lite's flushes off the write's path (memlane/stores/milvus/flusher.py): a write returns
without flushing and its rows are read at once; the collections it touched are flushed on the
flusher's thread once writes pause, or while they keep coming once the oldest unflushed write is
``flush_max_age_s`` old, and at close; rows never flushed survive their process being killed;
a store whose recall searches Lite itself still flushes every write. Real Milvus Lite files; the
flushes are seen through the store's call observers (memlane/stores/milvus/observe.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore
from memlane.stores.milvus.observe import add_observer, remove_observer


class Flushes:
    """The flush calls of this process: (thread name, monotonic time)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def __call__(self, operation: str, seconds: float, ok: bool, rows: int) -> None:
        if operation == "flush" and ok:
            self.calls.append((threading.current_thread().name, time.monotonic()))

    def on(self, thread: str) -> list[float]:
        return [t for name, t in self.calls if name == thread]

    def wait(self, thread: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.on(thread):
                return True
            time.sleep(0.05)
        return False


@pytest.fixture
def flushes():
    seen = Flushes()
    add_observer(seen)
    yield seen
    remove_observer(seen)


def _store(path: Path, **store) -> MilvusStore:
    return MilvusStore(Settings(data_dir=path, store=store), dim=8)


def test_a_write_returns_unflushed_and_is_flushed_when_writes_pause(tmp_path, flushes):
    with _store(tmp_path, flush_idle_s=0.3) as store:
        store.put_operation("op-1", {"state": "done", "n": 1})
        me = threading.current_thread().name
        assert flushes.on(me) == []
        assert store.get_operation("op-1")["n"] == 1  # read from the memtable
        assert flushes.wait("memlane-lite-flush", timeout_s=10)


def test_writes_that_keep_coming_are_flushed_once_the_oldest_is_max_age_old(tmp_path, flushes):
    with _store(tmp_path, flush_idle_s=1.0, flush_max_age_s=0.5) as store:
        start = time.monotonic()
        i = 0
        # writes 0.1 s apart, never idle for 1.0 s, for 2.5 s: the age bound flushes between them
        while time.monotonic() - start < 2.5:
            store.put_operation(f"op-{i}", {"n": i})
            i += 1
            time.sleep(0.1)
        last_write = time.monotonic()
        during = [t for t in flushes.on("memlane-lite-flush") if t < last_write]
        assert during, "no flush while the writes kept coming"
        assert store.get_operation(f"op-{i - 1}")["n"] == i - 1


def test_close_flushes_what_is_pending(tmp_path, flushes):
    store = _store(tmp_path, flush_idle_s=60.0, flush_max_age_s=60.0)
    store.put_operation("op-1", {"n": 1})
    me = threading.current_thread().name
    assert flushes.on(me) == []
    store.close()
    assert len(flushes.on(me)) == 1
    assert flushes.on("memlane-lite-flush") == []


def test_a_store_that_searches_lite_flushes_every_write(tmp_path, flushes):
    with _store(tmp_path, search_backend="milvus") as store:
        me = threading.current_thread().name
        before = len(flushes.on(me))
        store.put_operation("op-1", {"n": 1})
        assert len(flushes.on(me)) == before + 1
        assert flushes.on("memlane-lite-flush") == []


KILLED = """
import os, sys
from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore
store = MilvusStore(Settings(data_dir=sys.argv[1], store={"flush_idle_s": 600.0, "flush_max_age_s": 600.0}), dim=8)
for i in range(300):
    store.put_operation(f"op-{i}", {"n": i})
print("written", flush=True)
os._exit(9)  # no flush, no close
"""


def test_rows_never_flushed_survive_their_process_being_killed(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", KILLED, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 9 and run.stdout.strip() == "written", run.stderr[-2000:]
    with _store(tmp_path) as store:
        assert [store.get_operation(f"op-{i}")["n"] for i in (0, 150, 299)] == [0, 150, 299]
