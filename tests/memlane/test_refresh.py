"""Incremental refresh and cold banks (memlane/derived.py, memlane/revlog.py) on real Milvus
Lite (and the local Milvus server) and the real models: a reader engine holding a bank warm
applies each write of another engine by its delta (no reload), and its state then equals a fresh
full load of the bank, unit for unit, link for link, hit for hit; a log it cannot follow means a
full reload; the writer's own deletes update its state in place and equal a fresh load too. A
recall on a bank an engine does not hold answers from the store, marked cold, and leaves the
bank loaded."""

from __future__ import annotations

import pytest

from memlane import revlog
from memlane.engine import Memory
from memlane.records import FactType, Link, LinkType, MemoryUnit, now_utc

# the server prefix it shares with the other modules of engines on 384-dim models (tests/conftest.py)
SERVER_COLLECTIONS = "engine-384"

QUERIES = ["Mochi the cat", "kayak on the lake", "garden mouse", "Lisbon trip in May", "violin"]


def _item(text: str, doc: str, day: int) -> dict:
    return {
        "content": text,
        "speaker": "Ana",
        "document_id": doc,
        "session_id": f"{doc}-s",
        "timestamp": f"2025-01-{day:02d}T10:00:00Z",
    }


SEED = [
    _item("My cat is called Mochi.", "pets", 2),
    _item("Mochi sleeps on the radiator all afternoon.", "pets", 2),
    _item("I bought a kayak for the lake near Lisbon.", "boat", 4),
    _item("Mochi caught a mouse in the garden.", "mouse", 5),
    _item("I am practising the violin for a recital in May.", "music", 6),
    _item("My sister Rita visited me in Lisbon.", "family", 7),
]


class _Score(float):
    """A hit's score, equal to another within float32 noise: an index built by appends and one
    loaded from the store hold the same vectors in another row order, and the dot products
    may differ in their last bits (0.170445 rounded to 0.17044 in one, 0.17045 in the other,
    seen once in a full CI run)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and abs(self - other) <= 1e-5

    __hash__ = float.__hash__


def _state(memory: Memory, bank: str = "ana") -> dict:
    """Everything a bank's derived state answers, without refreshing it."""
    derived = memory.derived
    index = derived._indexes[bank]
    ids = sorted(index.unit_ids())
    vectors = memory.embedder.embed(QUERIES)
    return {
        "ids": ids,
        "graph_ids": sorted(memory.graph.unit_ids(bank)),
        "edges": sorted((a, b, t, round(w, 6)) for a, b, t, w in memory.graph.edges(bank)),
        "fields": index.candidates(ids, None),
        "dense": [[(h.id, _Score(h.score)) for h in index.search_dense(v, 10, None)] for v in vectors],
        "lexical": [[(h.id, _Score(h.score)) for h in index.search_lexical(q, 10, None)] for q in QUERIES],
        "spread": [
            memory.graph.spread(bank, {i: 1.0 for i in ids[:3]}, hops=2, decay=0.5, limit=20) for _ in [0]
        ],
    }


@pytest.fixture
def settings(backend_settings, backend):
    """Every test here on Milvus Lite and on the local Milvus server (tests/conftest.py)."""
    return backend_settings()


@pytest.fixture
def engines(settings, embedder, extractor):
    """A writer, a reader holding the bank warm, and a factory of fresh engines (full loads)."""
    opened: list[Memory] = []

    def fresh(**recall) -> Memory:
        s = settings.model_copy(update={"recall": settings.recall.model_copy(update=recall)})
        m = Memory(s, embedder=embedder, extractor=extractor)
        opened.append(m)
        return m

    writer, reader = fresh(), fresh()
    writer.retain_items("ana", SEED)
    reader.derived.ensure("ana")
    yield writer, reader, fresh
    for m in opened:
        m.close()


def _loaded(fresh) -> dict:
    other = fresh()
    other.derived.ensure("ana")
    assert other.derived.last_refresh["ana"] == "load"
    return _state(other)


def _refreshed(reader: Memory, how: str) -> dict:
    reader.derived.last_refresh.pop("ana", None)
    reader.derived.ensure("ana")
    assert reader.derived.last_refresh.get("ana") == how
    return _state(reader)


def test_a_retain_applies_as_a_delta_and_equals_a_full_load(engines):
    writer, reader, fresh = engines
    before = set(reader.derived._indexes["ana"].unit_ids())
    writer.retain_items("ana", [_item("I sold the kayak and bought a canoe.", "boat2", 8)])
    state = _refreshed(reader, "delta")
    assert set(state["ids"]) - before  # the new memory arrived
    assert state == _loaded(fresh)
    assert state == _state(writer)  # and the writer's in-place state is the same


def test_re_retaining_a_document_replaces_its_units(engines):
    writer, reader, fresh = engines
    old = {u.id for u in writer.browse.list_memories("ana", document_id="pets")[0]}
    writer.retain_items("ana", [_item("My dog is called Pepper.", "pets", 9)])
    state = _refreshed(reader, "delta")
    new = {u.id for u in writer.browse.list_memories("ana", document_id="pets")[0]}
    assert new and (old - new) and not (old - new) & set(state["ids"])
    assert state == _loaded(fresh)


def test_delete_document_and_delete_memory_apply_as_deltas(engines):
    writer, reader, fresh = engines
    writer.forget.delete_document("ana", "mouse")
    state = _refreshed(reader, "delta")
    assert not any(f["document_id"] == "mouse" for f in state["fields"].values())
    assert state == _loaded(fresh) == _state(writer)

    # a unit other units link to: their stored links are pruned, and the reader reads them
    # again, a link the graph draws no edge for (temporal type, zero weight) included
    [victim] = [u.id for u in writer.browse.list_memories("ana", document_id="boat")[0]][:1]
    a, b = [u.id for u in writer.browse.list_memories("ana", document_id="family")[0]][:1] + [
        u.id for u in writer.browse.list_memories("ana", document_id="music")[0]
    ][:1]
    linking = writer.store.get_units("ana", [a, b], with_embedding=True)
    linking[0].links = [Link(target_id=victim, type=LinkType.semantic, weight=0.8)]
    linking[1].links = [Link(target_id=victim, type=LinkType.temporal, weight=0.0)]
    with writer.writer.write("ana") as w:
        w.units(linking)
    reader.derived.ensure("ana")
    writer.forget.delete_memory("ana", victim)
    state = _refreshed(reader, "delta")
    assert victim not in state["ids"]
    assert state["fields"][a]["links"] == [] and state["fields"][b]["links"] == []
    assert state == _loaded(fresh) == _state(writer)


def test_a_delete_hook_s_changes_are_part_of_the_delta(engines):
    """Deleting a fact rewrites the observation it supports (the prune hook): the reader gets
    the rewritten observation by the delta."""
    from memlane.reflect.observations import observation_id

    writer, reader, fresh = engines
    facts = [u.id for u in writer.browse.list_memories("ana", document_id="pets")[0]]
    now = now_utc()
    obs = MemoryUnit(
        id=observation_id("ana", "mochi"),
        bank_id="ana",
        text="Mochi summary",
        fact_type=FactType.observation,
        embedding=writer.embedder.embed(["Mochi is a sleepy cat."])[0].tolist(),
        mentioned_at=now,
        valid_from=now,
        proof_count=len(facts),
        source_fact_ids=facts,
    )
    with writer.writer.write("ana") as w:
        w.units([obs])
    reader.derived.ensure("ana")
    writer.forget.delete_memory("ana", facts[0])
    state = _refreshed(reader, "delta")
    assert state["fields"][obs.id]["source_fact_ids"] == facts[1:]
    assert state == _loaded(fresh) == _state(writer)


def test_an_invalidation_applies_as_a_delta(engines):
    writer, reader, fresh = engines
    [unit] = writer.browse.list_memories("ana", document_id="boat")[0][:1]
    writer.forget.invalidate("ana", unit.id)
    state = _refreshed(reader, "delta")
    assert state["fields"][unit.id]["invalid_at"] is not None
    assert state == _loaded(fresh)
    assert unit.id not in {m.unit.id for m in reader.recall("ana", "kayak").memories}


def test_a_reader_several_writes_behind_walks_the_log(engines):
    writer, reader, fresh = engines
    writer.retain_items("ana", [_item("Rita moved to Porto.", "family2", 10)])
    writer.forget.delete_document("ana", "music")
    writer.retain_items("ana", [_item("I am practising the cello now.", "music", 11)])
    assert _refreshed(reader, "delta") == _loaded(fresh)


def test_a_log_that_overflowed_or_a_bare_bump_means_a_full_reload(engines, monkeypatch):
    writer, reader, fresh = engines
    monkeypatch.setattr(revlog, "MAX_STEPS", 2)  # the log keeps the last two writes only
    for day in (12, 13, 14):
        writer.retain_items("ana", [_item(f"Day {day}: I swam in the lake.", f"swim{day}", day)])
    _, steps = writer.store.revision_log("ana")
    assert len(steps) == 2
    assert _refreshed(reader, "load") == _loaded(fresh)  # its token fell off the log

    writer.retain_items("ana", [_item("I swam again.", "swim15", 15)])
    writer.store.bump_revision("ana")  # a bulk load's bump: it says nothing of what changed
    assert _refreshed(reader, "load") == _loaded(fresh)

    writer.retain_items("ana", [_item("And once more.", "swim16", 16)])  # a new chain starts
    assert _refreshed(reader, "delta") == _loaded(fresh)


def test_a_deleted_bank_reloads_empty(engines):
    writer, reader, _ = engines
    writer.banks.delete("ana")
    assert writer.store.revision_log("ana") == ("", [])
    assert len(reader.derived.ensure("ana")) == 0
    assert reader.derived.last_refresh["ana"] == "load"


def test_a_cold_bank_is_answered_by_the_store_and_loads_in_the_background(engines):
    writer, _, fresh = engines
    cold = fresh(cold_bank="store")  # holds nothing (the service's default; the engine waits)
    assert not cold.derived.held("ana")
    first = cold.recall("ana", "kayak on the lake", trace=True)
    assert first.cold
    texts = [m.unit.text for m in first.memories]
    assert "Ana: I bought a kayak for the lake near Lisbon." in texts[:3]
    # the store's own searches answered: its hit lists, not the index's (which has none yet);
    # a Milvus without BM25 (2.3) answers without the lexical channel and says so
    store = writer.store
    if store.has_lexical:
        store_hits = {h.id for h in store.search_lexical("ana", "kayak on the lake", 10)}
        assert first.channels_missing == []
    else:
        store_hits = {
            h.id
            for h in store.search_dense("ana", writer.embedder.embed_queries(["kayak on the lake"]), 10)[0]
        }
        assert first.channels_missing == ["lexical"]
    assert {m.unit.id for m in first.memories[:3]} & store_hits
    cold.derived.wait_warm()
    assert cold.derived.held("ana") and cold.derived.last_refresh["ana"] == "load"
    second = cold.recall("ana", "kayak on the lake")
    assert not second.cold and second.memories[0].unit.text == first.memories[0].unit.text
    assert _state(cold) == _state(writer)

    waiting = fresh()  # the engine's default: "wait"
    result = waiting.recall("ana", "kayak on the lake")
    assert not result.cold and waiting.derived.held("ana")


def test_a_bank_evicted_while_it_loads_is_not_kept(engines, monkeypatch):
    writer, _, fresh = engines
    cold = fresh(cold_bank="store")
    inner = cold.store.iter_units
    started = []

    def slow(*args, **kwargs):
        started.append(1)
        cold.derived.evict("ana")  # the caller let go of the bank meanwhile
        yield from inner(*args, **kwargs)

    monkeypatch.setattr(cold.store, "iter_units", slow)
    assert cold.recall("ana", "Mochi").cold
    cold.derived.wait_warm()
    assert started and not cold.derived.held("ana") and not cold.graph.has_bank("ana")
