"""memlane.integrations.langgraph.MemlaneStore on a real engine (Milvus Lite in the test's
directory, MiniLM, spaCy, the rules extractor): what LangGraph's own store tests ask of a
BaseStore (put/get round trip, replace, delete, search by prefix with a query and filters,
pagination, list_namespaces with prefixes, suffixes, wildcards and depth, ops of one batch in
order, the async twins), and how namespaces map to banks and tags."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra: pip install -e '.[langgraph]'")

from langgraph.store.base import (  # noqa: E402
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from memlane.integrations.langgraph import MemlaneStore  # noqa: E402

FACTS = ("alice", "facts")
DOG = {"text": "Alice's dog is called Biscuit, a brown beagle", "kind": "pet", "n": 1}
JOB = {"text": "Alice works as a nurse at the city hospital", "kind": "work", "n": 2}
TRIP = {"text": "Alice flew to Lisbon for a week of surfing in May", "kind": "travel", "n": 3}


def _browse(memory):
    """The engine's reading part (memory.browse; the facade before it had the methods itself)."""
    return getattr(memory, "browse", memory)


def _banks(memory):
    return memory.banks.list_all()


@pytest.fixture
def store(memory):
    return MemlaneStore(memory)


def _fill(store: MemlaneStore) -> None:
    store.put(FACTS, "dog", DOG)
    store.put(FACTS, "job", JOB)
    store.put(FACTS, "trip", TRIP)
    store.put(("alice", "notes"), "todo", {"text": "Buy dog food and a new leash"})
    store.put(("bob", "facts"), "dog", {"text": "Bob's dog is called Rex"})


def test_put_get_round_trip_replace_and_delete(store, memory):
    value = {
        "text": "Café Ümlaut opens at 9 — «quoted»",
        "nested": {"list": [1, 2.5, None, True, "x"], "empty": {}},
        "zero": 0,
        "neg": -3.25,
    }
    store.put(FACTS, "k/1 ?#", value)  # a key with characters no URL path segment may hold
    item = store.get(FACTS, "k/1 ?#")
    assert isinstance(item, Item)
    assert item.value == value and list(item.value) == list(value)  # exact, key order kept
    assert item.namespace == FACTS and item.key == "k/1 ?#"
    assert item.created_at == item.updated_at and item.created_at.tzinfo is not None

    # one key, one document in bank "alice": a put of the same key replaces it
    store.put(FACTS, "k/1 ?#", {"text": "replaced"})
    assert store.get(FACTS, "k/1 ?#").value == {"text": "replaced"}
    units, total = _browse(memory).list_memories("alice")
    assert total == 1 and units[0].tags[:1] == ["lg:key=k/1 ?#"]
    assert "lg:ns=alice.facts" in units[0].tags and "lg:store" in units[0].tags

    # the same key in another namespace is another item
    store.put(("alice", "other"), "k/1 ?#", {"text": "other"})
    assert store.get(FACTS, "k/1 ?#").value == {"text": "replaced"}
    assert store.get(("alice", "other"), "k/1 ?#").value == {"text": "other"}

    store.delete(FACTS, "k/1 ?#")
    assert store.get(FACTS, "k/1 ?#") is None
    assert store.get(("alice", "other"), "k/1 ?#") is not None
    store.put(("alice", "other"), "k/1 ?#", None)  # put(None) deletes too
    assert store.get(("alice", "other"), "k/1 ?#") is None
    assert _browse(memory).list_memories("alice")[1] == 0
    store.delete(FACTS, "never-there")  # deleting what is not there is not an error
    store.delete(("nobank", "x"), "k")
    assert store.get(("nobank",), "k") is None  # an unknown bank holds nothing


def test_search_recalls_under_the_prefix_best_first(store, memory):
    _fill(store)
    # a memory of the bank that the store did not write never answers a store search
    memory.retain_items("alice", [{"content": "My dog Biscuit loves the beach", "speaker": "alice"}])

    hits = store.search(("alice",), query="What is the name of Alice's dog?", limit=3)
    assert hits[0].key == "dog" and hits[0].namespace == FACTS and hits[0].value == DOG
    assert all(h.namespace[0] == "alice" for h in hits) and len(hits) == 3
    assert hits[0].score is not None and hits[0].score >= hits[-1].score

    hits = store.search(FACTS, query="Where does Alice work?")
    assert hits[0].key == "job" and {h.namespace for h in hits} == {FACTS}
    assert [h.key for h in store.search(("bob",), query="dog")] == ["dog"]

    # without a query: every item under the prefix, newest first, paged
    listed = store.search(("alice",), limit=10)
    assert {(h.namespace, h.key) for h in listed} == {
        (FACTS, "dog"),
        (FACTS, "job"),
        (FACTS, "trip"),
        (("alice", "notes"), "todo"),
    }
    assert all(h.score is None for h in listed)
    assert [h.updated_at for h in listed] == sorted((h.updated_at for h in listed), reverse=True)
    assert store.search(("alice",), limit=2) + store.search(("alice",), limit=10, offset=2) == listed
    assert store.search(("alice", "nothing")) == []
    assert len(store.search(())) == 5  # the whole store: every bank


def test_search_filters_on_value_fields(store):
    _fill(store)
    assert [h.key for h in store.search(FACTS, filter={"kind": "pet"})] == ["dog"]
    assert {h.key for h in store.search(FACTS, filter={"n": {"$gte": 2}})} == {"job", "trip"}
    assert {h.key for h in store.search(FACTS, filter={"n": {"$gt": 1, "$lt": 3}})} == {"job"}
    assert {h.key for h in store.search(FACTS, filter={"kind": {"$ne": "pet"}})} == {"job", "trip"}
    hits = store.search(("alice",), query="a trip abroad", filter={"kind": "travel"})
    assert [h.key for h in hits] == ["trip"]
    with pytest.raises(ValueError, match=r"operator '\$in' is not supported"):
        store.search(FACTS, filter={"kind": {"$in": ["pet"]}})
    with pytest.raises(ValueError, match="operators go under a field"):
        store.search(FACTS, filter={"$or": [{"kind": "pet"}]})


def test_namespaces_that_cannot_be_banks_and_unsupported_options_are_errors(store):
    with pytest.raises(InvalidNamespaceError, match="first label is the Memlane bank id"):
        store.put(("Not a bank!", "x"), "k", {"text": "t"})
    with pytest.raises(InvalidNamespaceError, match="first label is the Memlane bank id"):
        store.search(("_hidden",), query="q")
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"text": "t"})  # LangGraph's own rule: no '.' in a label
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("alice", ""), "k", {"text": "t"})])  # checked on batch too
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp((), "k")])
    with pytest.raises(ValueError, match="index=False is not supported"):
        store.put(FACTS, "k", {"text": "t"}, index=False)
    with pytest.raises(ValueError, match="index=\\['text'\\] is not supported"):
        store.put(FACTS, "k", {"text": "t"}, index=["text"])
    with pytest.raises(NotImplementedError):
        store.put(FACTS, "k", {"text": "t"}, ttl=5)
    with pytest.raises(ValueError, match="must be JSON"):
        store.put(FACTS, "k", {"when": object()})
    with pytest.raises(ValueError, match="characters"):
        store.put(FACTS, "k", {"text": "x" * 70_000})
    # nothing of a rejected batch was written
    with pytest.raises(ValueError):
        store.batch([PutOp(FACTS, "ok", {"text": "t"}), PutOp(FACTS, "bad", {"text": "t"}, index=False)])
    assert store.get(FACTS, "ok") is None
    with pytest.raises(ValueError, match="bank="):
        MemlaneStore(store.backend, bank="not a bank")


def test_list_namespaces(store):
    _fill(store)
    store.put(("alice", "facts", "old"), "x", {"text": "an old fact"})
    everything = [("alice", "facts"), ("alice", "facts", "old"), ("alice", "notes"), ("bob", "facts")]
    assert store.list_namespaces() == everything
    assert store.list_namespaces(prefix=("alice",)) == everything[:3]
    assert store.list_namespaces(prefix=("*", "facts")) == [everything[0], everything[1], everything[3]]
    assert store.list_namespaces(suffix=("facts",)) == [everything[0], everything[3]]
    assert store.list_namespaces(prefix=("alice",), suffix=("old",)) == [everything[1]]
    assert store.list_namespaces(max_depth=1) == [("alice",), ("bob",)]
    assert store.list_namespaces(limit=2, offset=1) == everything[1:3]
    assert store.list_namespaces(prefix=("carol",)) == []


def test_a_batch_runs_its_ops_in_order(store):
    results = store.batch(
        [
            PutOp(FACTS, "dog", DOG),
            GetOp(FACTS, "dog"),
            PutOp(FACTS, "dog", {"text": "first"}),
            PutOp(FACTS, "dog", {"text": "second"}),  # the last put of a key wins
            PutOp(FACTS, "job", JOB),
            GetOp(FACTS, "dog"),
            SearchOp(FACTS, limit=10),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("alice",)),)),
            PutOp(FACTS, "job", None),
            GetOp(FACTS, "job"),
        ]
    )
    assert results[0] is None and results[1].value == DOG
    assert results[5].value == {"text": "second"}
    assert {h.key for h in results[6]} == {"dog", "job"}
    assert results[7] == [FACTS]
    assert results[9] is None


def test_the_async_twins(store):
    async def main():
        await store.aput(FACTS, "dog", DOG)
        await store.aput(("alice", "notes"), "todo", {"text": "Walk Biscuit at noon"})
        got = await store.aget(FACTS, "dog")
        hits = await store.asearch(("alice",), query="the dog's name", limit=1)
        spaces = await store.alist_namespaces(prefix=("alice",))
        await store.adelete(FACTS, "dog")
        gone = await store.aget(FACTS, "dog")
        both = await asyncio.gather(store.aget(FACTS, "dog"), store.aget(("alice", "notes"), "todo"))
        return got, hits, spaces, gone, both

    got, hits, spaces, gone, both = asyncio.run(main())
    assert got.value == DOG and hits[0].key == "dog"
    assert spaces == [FACTS, ("alice", "notes")]
    assert gone is None and both[0] is None and both[1].key == "todo"


def test_one_bank_for_every_namespace(memory):
    store = MemlaneStore(memory, bank="agent")
    store.put(("memories", "user-1"), "dog", DOG)  # "memories" need not be a bank
    store.put(("memories", "user-2"), "job", JOB)
    assert [b.bank_id for b in _banks(memory)] == ["agent"]
    assert store.get(("memories", "user-1"), "dog").value == DOG
    assert [h.key for h in store.search(("memories", "user-2"), query="dog")] == ["job"]
    assert store.list_namespaces() == [("memories", "user-1"), ("memories", "user-2")]


def test_the_engine_imports_no_langgraph():
    """`import memlane` and the engine run without the extra (the import contract in
    pyproject.toml says it of the code; this says it of a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys, memlane, memlane.engine, memlane.integrations; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langgraph', 'langchain_core')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_put_re_derives_its_own_item_and_nothing_else(store, memory):
    """A put is a statement at the time of the put: putting a value again moves that item's
    memory in time, so its session's tree node (and its day, week and the profile) go until
    the next consolidation; the other items' nodes stay as they were."""
    from datetime import timedelta

    from memlane.records import now_utc

    _fill(store)
    memory.consolidate("alice", now=now_utc() + timedelta(days=8))  # every window closed
    nodes = {n.key: n for n in memory.tree.nodes("alice")}
    sessions = {k for k in nodes if "|" in k}
    assert len(sessions) == 4  # one per item of bank alice
    dog = store._document_id(FACTS, "dog")
    store.put(FACTS, "dog", DOG)
    left = {n.key: n for n in memory.tree.nodes("alice")}
    assert set(left) == sessions - {f"{dog}|{dog}"}
    assert all(left[k] == nodes[k] for k in left)
