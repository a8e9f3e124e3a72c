"""MemoryWrites, the Memory deployment's operations as a plain class, run in this process on a
real engine (Milvus Lite, the models): no Serve, no Ray. The deployment itself is checked
through a live service in test_service.py."""

from __future__ import annotations

import pytest

from memlane.engine import Memory
from memlane.errors import InvalidInput, NotFound
from memlane.operations import SUCCEEDED
from memlane.settings import Settings
from serve.deployments import MemoryWrites

ITEMS = [
    {"content": "Oriel repainted her narrowboat teal in April.", "speaker": "Oriel"},
    {"content": "She moors it at Stoke Bruerne most weekends.", "speaker": "Oriel"},
]


@pytest.fixture
def writes(tmp_path, embedder, extractor):
    memory = Memory(Settings(data_dir=tmp_path / "data"), embedder=embedder, extractor=extractor)
    w = MemoryWrites(memory)
    try:
        yield w
    finally:
        w.close()
        memory.close()


def test_a_queued_retain_is_finished_by_close_and_its_memories_are_stored(writes):
    writes.memory.create_bank("b")
    op = writes.retain_async("b", {"items": ITEMS, "document_id": "boat"})
    assert op["bank_id"] == "b" and op["kind"] == "retain" and op["total"] == 2
    writes.close()  # waits for the queued retain instead of dropping it
    done = writes.operation("b", op["operation_id"])
    assert done["status"] == SUCCEEDED and done["done"] == 2
    assert writes.memory.store.count_units("b") == 2
    hits = writes.memory.recall("b", "What colour is the narrowboat?").memories
    assert any("teal" in h.unit.text for h in hits)
    # the same operation id sent again answers the operation, queues nothing
    again = writes.retain_async("b", {"items": ITEMS, "document_id": "boat"}, op["operation_id"])
    assert again["operation_id"] == op["operation_id"] and again["status"] == SUCCEEDED


def test_bad_input_is_refused_before_anything_is_queued(writes):
    writes.memory.create_bank("b")
    with pytest.raises(InvalidInput):
        writes.retain_async("b", {"items": [{"speaker": "Oriel"}]})  # no content
    with pytest.raises(NotFound):
        writes.retain_async("nobody", {"items": ITEMS})
    assert writes._pending == {}
    assert writes.memory.store.count_units("b") == 0
