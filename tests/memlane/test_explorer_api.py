"""The engine calls the memory explorer reads: memories filtered by tag, mention time and
entity (the rules of memlane/units.py), an entity with its facts and neighbours, and the
sessions timeline. Real Milvus Lite, igraph, MiniLM, spaCy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane.errors import InvalidInput, NotFound

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def _retain(memory):
    memory.create_bank("a")
    # Tags belong to a document: a session a week later under another tag, then a third
    # document a month later.
    memory.retain_items(
        "a",
        [
            {
                "content": "Bob and I hiked near Lisbon.",
                "speaker": "Alice",
                "session_id": "s1",
                "timestamp": T0,
            },
            {
                "content": "Bob cooked dinner for Carla.",
                "speaker": "Alice",
                "session_id": "s1",
                "timestamp": T0 + timedelta(minutes=5),
            },
        ],
        document_id="chat-1",
        tags=["chat"],
    )
    memory.retain_items(
        "a",
        [
            {
                "content": "Carla moved to Berlin.",
                "speaker": "Alice",
                "session_id": "s2",
                "timestamp": T0 + timedelta(days=7),
            }
        ],
        document_id="chat-move",
        tags=["chat", "move"],
    )
    memory.retain_items(
        "a",
        [
            {
                "content": "I started learning the cello.",
                "speaker": "Alice",
                "timestamp": T0 + timedelta(days=30),
            }
        ],
        document_id="chat-2",
    )


def _texts(units):
    return sorted(u.text.split(": ", 1)[1] for u in units)


def test_memories_filter_by_tag_time_and_entity(memory):
    _retain(memory)
    units, total = memory.browse.list_memories("a", tags=["move"])
    assert total == 1 and _texts(units) == ["Carla moved to Berlin."]
    units, total = memory.browse.list_memories("a", tags=["chat", "move"], tags_match="all")
    assert _texts(units) == ["Carla moved to Berlin."]
    assert memory.browse.list_memories("a", tags=["chat"])[1] == 3
    # the window is since <= mentioned_at < until
    units, _ = memory.browse.list_memories("a", since=T0 + timedelta(minutes=5), until=T0 + timedelta(days=7))
    assert _texts(units) == ["Bob cooked dinner for Carla."]
    units, _ = memory.browse.list_memories("a", since=T0 + timedelta(days=7))
    assert _texts(units) == ["Carla moved to Berlin.", "I started learning the cello."]
    bob = {e.name: e for e in memory.browse.list_entities("a")}["Bob"]
    units, total = memory.browse.list_memories("a", entity_id=bob.entity_id)
    assert _texts(units) == ["Bob and I hiked near Lisbon.", "Bob cooked dinner for Carla."]
    # filters combine
    units, _ = memory.browse.list_memories("a", entity_id=bob.entity_id, since=T0 + timedelta(minutes=1))
    assert _texts(units) == ["Bob cooked dinner for Carla."]


def test_bad_filters_name_their_field(memory):
    _retain(memory)
    with pytest.raises(InvalidInput, match="^until: "):
        memory.browse.list_memories("a", since=T0, until=T0)
    with pytest.raises(InvalidInput, match="^tags_match: "):
        memory.browse.list_memories("a", tags=["x"], tags_match="most")


def test_entity_with_its_facts_and_neighbours(memory):
    _retain(memory)
    names = {e.name: e for e in memory.browse.list_entities("a")}
    out = memory.browse.entity("a", names["Carla"].entity_id)
    assert out["entity"].name == "Carla" and out["total"] == 2
    # by mention time, earliest first
    assert [u.text.split(": ", 1)[1] for u in out["memories"]] == [
        "Bob cooked dinner for Carla.",
        "Carla moved to Berlin.",
    ]
    shared = {n["entity"].name: n["shared"] for n in out["neighbours"]}
    assert shared["Bob"] == 1 and shared["Berlin"] == 1
    assert "Carla" not in shared and "Lisbon" not in shared
    page = memory.browse.entity("a", names["Carla"].entity_id, limit=1)
    assert len(page["memories"]) == 1 and page["total"] == 2 and page["neighbours"] == out["neighbours"]
    with pytest.raises(NotFound, match="entity"):
        memory.browse.entity("a", "no-such-entity")
    with pytest.raises(InvalidInput, match="^limit: "):
        memory.browse.entity("a", names["Carla"].entity_id, limit=0)


def test_timeline_lists_sessions_by_start(memory):
    _retain(memory)
    sessions = memory.browse.timeline("a")
    assert [(s["document_id"], s["start"]) for s in sessions] == [
        ("chat-1", T0),
        ("chat-move", T0 + timedelta(days=7)),
        ("chat-2", T0 + timedelta(days=30)),
    ]
    assert [s["turns"] for s in sessions] == [2, 1, 1]
    # a session ends at its last turn, though both turns of chat-1 are in one chunk
    assert [s["end"] for s in sessions] == [
        T0 + timedelta(minutes=5),
        T0 + timedelta(days=7),
        T0 + timedelta(days=30),
    ]
    assert sessions[0]["session_id"] == "s1" and sessions[1]["session_id"] == "s2"
    memory.forget.delete_document("a", "chat-1")
    assert [s["document_id"] for s in memory.browse.timeline("a")] == ["chat-move", "chat-2"]
