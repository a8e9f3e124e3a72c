"""The hot path never waits on an LLM (memlane/retain/deferred.py), against a slow fake server:
the episode is recallable when retain returns, the model's facts replace it afterwards."""

from __future__ import annotations

import threading
import time

import pytest
from llm_fake import FakeLLMServer, extraction_reply

from memlane.engine import Memory
from memlane.llm import build_llm
from memlane.retain.extract_llm import LLMExtractor

DELAY_S = 1.5


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


def _engine(settings, embedder, extractor, server, *, defer=True):
    s = settings.model_copy(
        update={
            "llm": {"base_url": server.base_url, "model": "fake", "max_retries": 0},
            "background": {"reflect": False},
            "retain": settings.retain.model_copy(update={"extractor": "llm", "defer_llm": defer}),
        }
    )
    return Memory(s, embedder=embedder, extractor=LLMExtractor(build_llm(s, "retain"), extractor))


def _item(text, minute=0):
    return {"content": text, "speaker": "Ana", "timestamp": f"2025-03-01T09:{minute:02d}:00Z"}


def _units(m, bank="ana"):
    return [u for batch in m.store.iter_units(bank) for u in batch]


def test_retain_returns_before_the_model_and_its_facts_replace_the_episode(
    server, settings, embedder, extractor
):
    gate = threading.Event()

    def slow(body):
        gate.wait(30)  # the model answers only when the test lets it
        return extraction_reply(body["messages"][1]["content"])

    server.responder = slow
    with _engine(settings, embedder, extractor, server) as m:
        t0 = time.perf_counter()
        report = m.retain_items(
            "ana", [_item("Adopted a tortoise called Dumpling today.")], document_id="chat"
        )
        took = time.perf_counter() - t0
        assert report.deferred == 1 and report.units == 1
        assert took < 10  # returned while the model was held (it answers after gate.set, or 30 s)
        hits = m.recall("ana", "What is the tortoise called?")
        assert hits.memories and "Dumpling" in hits.memories[0].unit.text  # the episode, at once
        assert {u.metadata.get("extractor") for u in _units(m)} == {None}  # rules facts so far
        gate.set()
        m.wait_background()
        units = _units(m)
        assert {u.metadata.get("extractor") for u in units} == {"llm"}
        assert len(server.requests) == 1
        assert "Dumpling" in m.recall("ana", "What is the tortoise called?").memories[0].unit.text


def test_a_document_sent_again_is_extracted_once_from_its_latest_turns(server, settings, embedder, extractor):
    gate = threading.Event()
    seen: list[str] = []

    def slow(body):
        gate.wait(30)
        seen.append(body["messages"][1]["content"])
        return extraction_reply(body["messages"][1]["content"])

    server.responder = slow
    with _engine(settings, embedder, extractor, server) as m:
        m.retain_items("ana", [_item("First message.")], document_id="other")  # occupies the worker
        m.retain_items("ana", [_item("Hello there.")], document_id="chat")
        m.retain_items("ana", [_item("Hello there."), _item("I moved to Leeds.", 1)], document_id="chat")
        gate.set()
        m.wait_background()
        chat = [p for p in seen if "Hello there" in p]
        assert len(chat) == 1 and "Leeds" in chat[0]
        texts = " ".join(u.text for u in _units(m) if u.document_id == "chat")
        assert "Leeds" in texts


def test_a_document_deleted_before_its_extraction_stays_deleted(server, settings, embedder, extractor):
    gate = threading.Event()
    server.responder = lambda body: (gate.wait(30), extraction_reply(body["messages"][1]["content"]))[1]
    with _engine(settings, embedder, extractor, server) as m:
        m.retain_items("ana", [_item("A secret I regret sharing.")], document_id="oops")
        m.forget.delete_document("ana", "oops")
        gate.set()
        m.wait_background()
        assert m.store.count_units("ana") == 0


def test_without_deferral_retain_waits_for_the_model(server, settings, embedder, extractor):
    server.responder = lambda body: {
        "content": extraction_reply(body["messages"][1]["content"]),
        "delay": DELAY_S,
    }
    with _engine(settings, embedder, extractor, server, defer=False) as m:
        t0 = time.perf_counter()
        report = m.retain_items("ana", [_item("Adopted a tortoise called Dumpling today.")])
        assert time.perf_counter() - t0 >= DELAY_S and report.deferred == 0
        assert {u.metadata.get("extractor") for u in _units(m)} == {"llm"}


def test_a_document_sent_again_unchanged_after_its_extraction_writes_nothing(
    server, settings, embedder, extractor
):
    """The model's facts count as current for the same turns: sending the document again
    writes no episode over them, queues no extraction and bumps no revision."""
    server.responder = lambda body: extraction_reply(body["messages"][1]["content"])
    items = [_item("Adopted a tortoise called Dumpling today."), _item("She eats dandelions.", 1)]
    with _engine(settings, embedder, extractor, server) as m:
        m.retain_items("ana", items, document_id="chat")
        m.wait_background()
        units = {u.id: u for u in _units(m)}
        assert {u.metadata.get("extractor") for u in units.values()} == {"llm"}
        steps = len(m.store.revision_log("ana")[1])
        again = m.retain_items("ana", items, document_id="chat")
        m.wait_background()
        assert (again.units, again.unchanged, again.removed, again.deferred) == (0, len(units), 0, 0)
        assert len(server.requests) == 1  # no second extraction
        assert len(m.store.revision_log("ana")[1]) == steps
        assert {u.id: u for u in _units(m)} == units
