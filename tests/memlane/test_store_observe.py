"""Client-side observation of Milvus calls (memlane/stores/milvus/observe.py), on a real Milvus
Lite store: what the store metrics (actors/store_metrics.py) and the Milvus dashboard see."""

from __future__ import annotations

import pytest
from pymilvus.exceptions import MilvusException

from memlane.records import Bank, Chunk
from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore
from memlane.stores.milvus.observe import add_observer, remove_observer


@pytest.fixture
def observed(tmp_path):
    calls: list[tuple[str, float, bool, int]] = []

    def observer(operation: str, seconds: float, ok: bool, rows: int) -> None:
        calls.append((operation, seconds, ok, rows))

    store = MilvusStore(Settings(data_dir=tmp_path / "data"), dim=8)
    add_observer(observer)
    try:
        yield store, calls
    finally:
        remove_observer(observer)
        store.close()


def test_writes_reads_and_failures_are_reported_with_rows(observed):
    from datetime import UTC, datetime

    store, calls = observed
    store.upsert_bank(Bank(bank_id="obs"))
    chunks = [
        Chunk(
            chunk_id=f"c{i}",
            bank_id="obs",
            document_id="d",
            session_id="s",
            index=i,
            text=f"text {i}",
            started_at=datetime(2024, 1, 1, tzinfo=UTC),
        )
        for i in range(3)
    ]
    store.upsert_chunks("obs", chunks)
    assert len(store.get_chunks("obs", ["c0", "c1", "c2", "missing"])) == 3

    upserts = [c for c in calls if c[0] == "upsert"]
    assert [c[3] for c in upserts] == [1, 3]  # the bank row, then the three chunks
    assert any(c[0] == "query" and c[2] and c[3] == 3 for c in calls)
    assert all(c[1] >= 0 and c[2] for c in calls)

    with pytest.raises(MilvusException):
        store.client.query("no_such_collection", filter="", output_fields=["count(*)"])
    assert calls[-1][0] == "query" and calls[-1][2] is False and calls[-1][3] == 0


def test_a_failing_observer_fails_no_store_call(observed):
    store, calls = observed

    def broken(*_):
        raise RuntimeError("observer bug")

    add_observer(broken)
    try:
        store.upsert_bank(Bank(bank_id="obs2"))
    finally:
        remove_observer(broken)
    assert store.get_bank("obs2") is not None
    assert any(c[0] == "upsert" and c[2] for c in calls)  # the other observer still saw it
