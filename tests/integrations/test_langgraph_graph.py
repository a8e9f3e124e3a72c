"""A real LangGraph graph with Memlane as its store, no LLM: one node writes what the user said
with ``store.put``, the next answers from ``store.search``. Against the engine (Milvus Lite in
the test's directory) and against the running HTTP service (`memlane serve` on loopback, one
per module, through the SDK), with the same graph; then the store's basic contract through
the service (round trip, replace, delete, namespaces)."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra: pip install -e '.[langgraph]'")

from langgraph.graph import START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402

from memlane.integrations.langgraph import MemlaneStore  # noqa: E402

FACTS = [
    ("dog", {"text": "My dog is called Biscuit and he is a brown beagle", "kind": "pet"}),
    ("job", {"text": "I work as a nurse at the city hospital", "kind": "work"}),
    ("trip", {"text": "In May I flew to Lisbon for a week of surfing", "kind": "travel"}),
]


class State(TypedDict, total=False):
    user: str
    question: str
    answer: str
    keys: list[str]


def remember(state: State, *, store: BaseStore) -> dict:
    for key, value in FACTS:
        store.put((state["user"], "facts"), key, value)
    return {}


def answer(state: State, *, store: BaseStore) -> dict:
    hits = store.search((state["user"],), query=state["question"], limit=2)
    return {"answer": hits[0].value["text"], "keys": [h.key for h in hits]}


async def aremember(state: State, *, store: BaseStore) -> dict:
    await asyncio.gather(*(store.aput((state["user"], "facts"), k, v) for k, v in FACTS))
    return {}


async def aanswer(state: State, *, store: BaseStore) -> dict:
    hits = await store.asearch((state["user"],), query=state["question"], limit=2)
    return {"answer": hits[0].value["text"], "keys": [h.key for h in hits]}


def _graph(store: BaseStore, write=remember, read=answer):
    builder = StateGraph(State)
    builder.add_node("remember", write)
    builder.add_node("answer", read)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    return builder.compile(store=store)


def _browse(memory):
    """The engine's reading part (memory.browse; the facade before it had the methods itself)."""
    return getattr(memory, "browse", memory)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from live import live_service

    with live_service(tmp_path_factory.mktemp("langgraph-service")) as state:
        yield state


@pytest.fixture
def client(service):
    from memlane_client import MemlaneClient

    with MemlaneClient(service["url"]) as c:
        yield c


def test_a_graph_writes_then_searches_on_the_engine(memory):
    graph = _graph(MemlaneStore(memory))
    out = graph.invoke({"user": "alice", "question": "What is the name of my dog?"})
    assert out["answer"] == FACTS[0][1]["text"] and out["keys"][0] == "dog"
    # the graph's writes are memories of bank "alice", one document per key
    assert _browse(memory).list_memories("alice")[1] == 3


def test_an_async_graph_on_the_engine(memory):
    graph = _graph(MemlaneStore(memory), aremember, aanswer)
    out = asyncio.run(graph.ainvoke({"user": "bob", "question": "Where do I work?"}))
    assert out["keys"][0] == "job"


def test_a_graph_writes_then_searches_through_the_service(client):
    store = MemlaneStore(client)
    out = _graph(store).invoke({"user": "carol", "question": "Where did I travel in May?"})
    assert out["answer"] == FACTS[2][1]["text"] and out["keys"][0] == "trip"
    assert client.get_bank("carol")["bank_id"] == "carol"  # the first put created the bank

    # the store's contract through the service: round trip, replace, delete, namespaces
    value = {"text": "Café at 9 — «ok»", "nested": {"n": [1, 2.5, None, True]}}
    store.put(("carol", "notes"), "a/b ?", value)
    assert store.get(("carol", "notes"), "a/b ?").value == value
    store.put(("carol", "notes"), "a/b ?", {"text": "replaced"})
    assert store.get(("carol", "notes"), "a/b ?").value == {"text": "replaced"}
    assert store.list_namespaces(prefix=("carol",)) == [("carol", "facts"), ("carol", "notes")]
    assert [h.key for h in store.search(("carol", "facts"), filter={"kind": "pet"})] == ["dog"]
    store.delete(("carol", "notes"), "a/b ?")
    assert store.get(("carol", "notes"), "a/b ?") is None
    assert store.get(("nobody",), "k") is None and store.search(("nobody",), query="q") == []
    assert asyncio.run(store.aget(("carol", "facts"), "job")).value == FACTS[1][1]
