"""The engine calls behind the HTTP API: item retain with document replacement, listing,
single-memory deletion, and the observation cascade. Real Milvus Lite, igraph, MiniLM, spaCy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.errors import BankNotFound, InvalidInput, NotFound
from memlane.records import FactType, MemoryUnit

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def _items(*texts, **extra):
    return [
        {"content": t, "speaker": "Alice", "timestamp": T0.replace(minute=i), **extra}
        for i, t in enumerate(texts)
    ]


def _texts(memory, bank, **kw):
    units, total = memory.browse.list_memories(bank, limit=1000, **kw)
    assert total == len(units)
    return sorted(u.text for u in units)


def test_items_without_document_id_never_overwrite_each_other(memory):
    memory.create_bank("a")
    memory.retain_items("a", _items("My dog is called Biscuit."))
    memory.retain_items("a", _items("I play the cello on Sundays."))
    assert _texts(memory, "a") == ["Alice: I play the cello on Sundays.", "Alice: My dog is called Biscuit."]
    # the same request again (a client retry) leaves the same state
    memory.retain_items("a", _items("My dog is called Biscuit."))
    assert len(_texts(memory, "a")) == 2
    assert len(memory.browse.list_documents("a")) == 2


def test_a_document_sent_again_replaces_its_previous_version(memory):
    memory.create_bank("a")
    memory.retain_items("a", _items("We moved to Lisbon.", "Sam joined the band."), document_id="chat")
    assert memory.browse.list_documents("a") == {"chat": {"units": 2, "chunks": 1}}
    memory.retain_items("a", _items("We moved to Porto."), document_id="chat")
    assert _texts(memory, "a") == ["Alice: We moved to Porto."]
    # Sam is mentioned by nothing any more: the entity went with the old version
    assert "Sam" not in {e.name for e in memory.browse.list_entities("a")}
    assert memory.banks.stats("a")["graph"]["units"] == 1


def test_a_document_reads_back_as_retained_and_listings_search_its_text(memory):
    memory.create_bank("a")
    items = [
        {"content": "We moved to Lisbon.\nThe flat has a view.", "speaker": "Alice", "timestamp": T0},
        {"content": "Sam joined the band.", "speaker": "Bo", "timestamp": T0.replace(minute=1)},
        {"content": "Later: a gig.", "speaker": "Alice", "timestamp": T0.replace(day=2), "session_id": "s2"},
    ]
    memory.retain_items("a", items, document_id="chat/1", tags=["band", "band"])
    memory.retain_items("a", _items("I play the cello."), document_id="other")
    doc = memory.browse.get_document("a", "chat/1")
    # session by session in the order they started, one "speaker: text" line per turn
    assert doc.text == (
        "Alice: We moved to Lisbon.\nThe flat has a view.\nBo: Sam joined the band.\nAlice: Later: a gig."
    )
    assert (doc.units, doc.chunks, doc.tags) == (3, 2, ["band"])
    assert (doc.start, doc.end) == (T0, T0.replace(day=2))
    with pytest.raises(NotFound, match="document 'nope' is not in bank 'a'"):
        memory.browse.get_document("a", "nope")
    with pytest.raises(BankNotFound):
        memory.browse.get_document("ghost", "chat/1")
    # q: in the id or the text, any case
    assert list(memory.browse.list_documents("a", q="CELLO")) == ["other"]
    assert list(memory.browse.list_documents("a", q="chat/")) == ["chat/1"]
    assert memory.browse.list_documents("a", q="lisbon") == {"chat/1": {"units": 3, "chunks": 2}}
    assert memory.browse.list_documents("a", q="tuba") == {}


def test_item_validation_names_the_item_and_writes_nothing(memory):
    memory.create_bank("a")
    with pytest.raises(InvalidInput, match=r"items\.1\.content"):
        memory.retain_items("a", [{"content": "fine"}, {"content": "   "}])
    with pytest.raises(InvalidInput, match=r"items\.1\.tags"):
        memory.retain_items(
            "a", [{"content": "x", "tags": ["t1"]}, {"content": "y", "tags": ["t2"]}], document_id="d"
        )
    with pytest.raises(InvalidInput, match="items"):
        memory.retain_items("a", [])
    with pytest.raises(BankNotFound):
        memory.retain_items("missing", _items("hello there"), create_bank=False)
    assert memory.store.count_units("a") == 0
    assert memory.banks.list_all()[0].bank_id == "a" and len(memory.banks.list_all()) == 1


def test_item_tags_and_sessions_reach_the_memories(memory):
    memory.create_bank("a")
    memory.retain_items(
        "a", _items("Booked flights to Oslo.", session_id="s1", tags=["travel"]), tags=["api"]
    )
    (unit,), _ = memory.browse.list_memories("a")
    assert unit.tags == ["api", "travel"]
    assert unit.source_turns == ["s1:1"]
    assert unit.mentioned_at == T0


def test_list_memories_pages_in_id_order_and_filters(memory):
    memory.create_bank("a")
    memory.retain_items(
        "a", _items(*[f"Fact number {i} about gardening." for i in range(7)]), document_id="d1"
    )
    memory.retain_items("a", _items("Another document entirely."), document_id="d2")
    everything, total = memory.browse.list_memories("a", limit=1000)
    assert total == 8
    ids = [u.id for u in everything]
    assert ids == sorted(ids)
    page, total = memory.browse.list_memories("a", offset=3, limit=3)
    assert total == 8 and [u.id for u in page] == ids[3:6]
    only_d2, total = memory.browse.list_memories("a", document_id="d2")
    assert total == 1 and only_d2[0].text == "Alice: Another document entirely."
    assert memory.browse.list_memories("a", types=["opinion"]) == ([], 0)
    with pytest.raises(InvalidInput, match="types"):
        memory.browse.list_memories("a", types=["gossip"])
    with pytest.raises(InvalidInput):
        memory.browse.list_memories("a", limit=0)


def test_delete_memory_and_missing_things_are_not_found(memory):
    memory.create_bank("a")
    memory.retain_items("a", _items("Alpha fact.", "Beta fact."), document_id="d")
    units, _ = memory.browse.list_memories("a")
    assert memory.browse.get_memory("a", units[0].id).text == units[0].text
    memory.forget.delete_memory("a", units[0].id)
    assert [u.id for u in memory.browse.list_memories("a")[0]] == [units[1].id]
    assert memory.banks.stats("a")["graph"]["units"] == 1
    with pytest.raises(NotFound, match="memory"):
        memory.forget.delete_memory("a", units[0].id)
    with pytest.raises(NotFound, match="memory"):
        memory.browse.get_memory("a", "nope")
    with pytest.raises(NotFound, match="document"):
        memory.forget.delete_document("a", "no-such-doc")


def test_deleting_facts_prunes_and_drops_their_observations(memory):
    memory.create_bank("a")
    memory.retain_items("a", _items("Alpha fact.", "Beta fact."), document_id="d1")
    memory.retain_items("a", _items("Gamma fact."), document_id="d2")
    facts = {u.text.split(": ")[1]: u for u in memory.browse.list_memories("a")[0]}
    base = facts["Alpha fact."]

    def observation(oid, sources):
        return MemoryUnit(
            id=oid,
            bank_id="a",
            text=f"summary {oid}",
            fact_type=FactType.observation,
            embedding=[1.0] + [0.0] * 383,
            mentioned_at=base.mentioned_at,
            source_fact_ids=[facts[s].id for s in sources],
            proof_count=len(sources),
        )

    memory.store.upsert_units(
        "a",
        [
            observation("obs-mixed", ["Alpha fact.", "Gamma fact."]),
            observation("obs-d1", ["Alpha fact.", "Beta fact."]),
        ],
    )
    memory.forget.delete_document("a", "d1")
    left = {u.id: u for u in memory.browse.list_memories("a", types=["observation"])[0]}
    assert set(left) == {"obs-mixed"}
    assert left["obs-mixed"].source_fact_ids == [facts["Gamma fact."].id]
    assert left["obs-mixed"].proof_count == 1
