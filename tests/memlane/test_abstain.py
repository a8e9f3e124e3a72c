"""Abstention (memlane/recall/abstain.py) on the real engine (Milvus Lite, MiniLM, the rules
extractor): an unknown entity and a question about the wrong person abstain, a supported
question does not, the memories are returned either way; the LLM gate against the fake
OpenAI-compatible server, with malformed replies falling back to the rules' decision; and
reflect's don't-know."""

from __future__ import annotations

import json

import pytest
from fixtures import write_jsonl_fixture
from llm_fake import FakeLLMServer

from memlane.engine import Memory
from memlane.query.words import content_stems, names_in, suffix_stem
from memlane.recall.abstain import decide, signals
from memlane.reflect.service import DONT_KNOW

ROWS = [
    ("Ana", "I adopted a beagle called Pixel last week, she is tiny and loud."),
    ("Ben", "Congrats! I ran a charity marathon in Porto last Sunday, it was exhausting."),
    ("Ana", "I started painting watercolour landscapes of the river on weekends."),
    ("Ben", "My sister Clara moved to Berlin to work as a nurse."),
    ("Ana", "Pixel chewed my running shoes, so I bought new ones in the mall."),
    ("Ben", "I play the trumpet in a jazz band every Thursday night."),
    ("Ana", "My grandmother taught me how to bake sourdough bread when I was ten."),
    ("Ben", "The marathon raised money for the children's hospital in Porto."),
]


def _rows():
    return [
        {
            "speaker": who,
            "text": text,
            "timestamp": f"2025-03-{10 + i:02d}T09:00:00Z",
            "session_id": f"s{i // 2}",
        }
        for i, (who, text) in enumerate(ROWS)
    ]


def _engine(settings, embedder, extractor, tmp_path, **facts):
    memory = Memory(settings.model_copy(update={"facts": facts}), embedder=embedder, extractor=extractor)
    from memlane.ingest import load_conversations

    path = write_jsonl_fixture(tmp_path / "chat.jsonl", _rows())
    memory.retain("chat", [("chat", c.turns) for c in load_conversations(path, format="jsonl")])
    return memory


@pytest.fixture
def bank(settings, embedder, extractor, tmp_path):
    memory = _engine(settings, embedder, extractor, tmp_path)
    yield memory
    memory.close()


def test_names_and_content_words():
    def query_names(query):
        return names_in(query, question=True)

    assert query_names("What did Caroline realize after her charity race in June?") == ["Caroline"]
    assert query_names("Caroline's dog: what breed is it?") == ["Caroline"]
    assert query_names("When did Gina and Jon meet?") == ["Gina", "Jon"]
    assert suffix_stem("painting") == suffix_stem("painted") == suffix_stem("paints") == "paint"
    assert content_stems("What did Ana paint on weekends?", {"ana"}) == {"paint", "weekend"}


def test_signals_wrong_subject_and_unknown_names():
    top = [
        {"text": "Ben: I ran a charity marathon in Porto.", "metadata": {"speaker": "Ben"}},
        {"text": "Ana: I adopted a beagle.", "metadata": {"speaker": "Ana"}},
    ]
    sig = signals("How long was the charity marathon Ana ran?", top, 0.6, lambda n: n != "Zed")
    assert sig["names"] == ["Ana"] and sig["unknown_entities"] == []
    assert sig["support_any"] == 0.75  # charity, marathon, ran of long/charity/marathon/ran
    assert sig["support_named"] == 0.0 and sig["gap"] == 0.75
    # The same content said by the named person is support, not a gap.
    sig = signals("How long was the charity marathon Ben ran?", top, 0.6, lambda n: True)
    assert sig["gap"] == 0.0
    sig = signals("What did Zed say about Porto?", top, 0.6, lambda n: n != "Zed")
    assert sig["unknown_entities"] == ["Zed"]


def test_names_that_are_not_speakers_count_by_mention():
    """A bank whose speakers are "user" and "assistant": a queried name is a pet, not a
    speaker, so the memory that mentions it supports the question (no wrong subject)."""
    top = [
        {"text": "I adopted my cat Luna three years ago.", "metadata": {"speaker": "user"}},
        {"text": "Cats like Luna enjoy routine.", "metadata": {"speaker": "assistant"}},
    ]
    sig = signals("How long have I had my cat, Luna?", top, 0.8, lambda n: True)
    assert sig["names"] == ["Luna"] and sig["support_named"] == sig["support_any"] and sig["gap"] == 0.0


def test_decide_follows_the_thresholds(settings):
    f = settings.facts
    base = {"names": ["Ana"], "unknown_entities": [], "support_any": 0.8, "top_cosine": 0.6}
    assert decide({**base, "support_named": 0.8, "gap": 0.0}, f) == (False, None)
    yes, reason = decide({**base, "support_named": 0.0, "gap": 0.8}, f)
    assert yes and "someone other than Ana" in reason
    assert (
        decide({**base, "support_named": 0.0, "gap": 0.8}, f.model_copy(update={"abstain_gap": 0.9}))[0]
        is False
    )
    low = {**base, "support_named": None, "gap": 0.0, "top_cosine": -0.5}
    assert decide(low, f.model_copy(update={"abstain_min_cosine": 0.1}))[0] is True
    assert decide(low, f.model_copy(update={"abstain_min_cosine": -0.9}))[0] is False


def test_supported_question_does_not_abstain(bank):
    res = bank.recall("chat", "What instrument does Ben play in the jazz band?")
    assert res.abstain is False and res.abstain_reason is None
    assert res.abstain_signals["support_named"] >= 0.5
    assert any("trumpet" in m.unit.text for m in res.memories)  # the supporting memory
    assert "abstain" in res.timings_ms


def test_unknown_entity_abstains_and_keeps_the_memories(bank):
    res = bank.recall("chat", "What did Zanzibarov say about the marathon?")
    assert res.abstain is True
    assert res.abstain_signals["unknown_entities"] == ["Zanzibarov"]
    assert "Zanzibarov" in res.abstain_reason
    assert any("marathon" in m.unit.text for m in res.memories)  # the flag removes nothing


def test_question_about_the_wrong_person_abstains(bank):
    res = bank.recall("chat", "Which city did Ana run the charity marathon in?")
    assert res.abstain is True, res.abstain_signals
    assert "someone other than Ana" in res.abstain_reason
    right = bank.recall("chat", "Which city did Ben run the charity marathon in?")
    assert right.abstain is False, right.abstain_signals


def test_off_computes_nothing(settings, embedder, extractor, tmp_path):
    with _engine(settings, embedder, extractor, tmp_path, abstain="off") as memory:
        res = memory.recall("chat", "What did Zanzibarov say about the marathon?")
        assert res.abstain is False and res.abstain_signals == {} and "abstain" not in res.timings_ms


# The LLM gate --------------------------------------------------------------------------------


def _gate_engine(settings, embedder, extractor, tmp_path, server):
    s = settings.model_copy(
        update={
            "llm": {"base_url": server.base_url, "model": "fake", "max_retries": 0},
            "background": {"reflect": False},
            "facts": {"abstain": "llm"},
        }
    )
    memory = Memory(s, embedder=embedder, extractor=extractor)
    from memlane.ingest import load_conversations

    path = write_jsonl_fixture(tmp_path / "chat.jsonl", _rows())
    memory.retain("chat", [("chat", c.turns) for c in load_conversations(path, format="jsonl")])
    return memory


def test_llm_gate_decides(settings, embedder, extractor, tmp_path):
    with FakeLLMServer() as server:
        with _gate_engine(settings, embedder, extractor, tmp_path, server) as memory:
            server.script = [json.dumps({"answerable": False, "reason": "the band is not named"})]
            res = memory.recall("chat", "What instrument does Ben play in the jazz band?")
            assert res.abstain is True and res.abstain_reason == "the band is not named"
            assert res.abstain_signals["gate"] == "llm"
            [req] = server.requests
            assert req["messages"][0]["content"].startswith("You check whether a question")
            assert "Question: What instrument does Ben play" in req["messages"][1]["content"]
            assert "trumpet" in req["messages"][1]["content"]  # the memories are shown

            # The gate may also overrule the rules: an unknown name the model says is answered.
            server.script = [json.dumps({"answerable": True, "reason": "ok"})]
            res = memory.recall("chat", "What did Zanzibarov say about the marathon?")
            assert res.abstain is False and res.abstain_signals["unknown_entities"] == ["Zanzibarov"]


@pytest.mark.parametrize("reply", ["I think it's answerable", json.dumps({"answerable": "maybe"})])
def test_malformed_gate_output_falls_back_to_the_rules(settings, embedder, extractor, tmp_path, reply):
    with FakeLLMServer() as server:
        with _gate_engine(settings, embedder, extractor, tmp_path, server) as memory:
            server.responder = lambda body: reply  # the first reply and the repair round
            res = memory.recall("chat", "What did Zanzibarov say about the marathon?")
            assert res.abstain is True and "Zanzibarov" in res.abstain_reason  # the rules' verdict
            assert res.abstain_signals["gate"] == "fallback"
            assert len(server.requests) == 2  # one repair round, then the rules
            res = memory.recall("chat", "What instrument does Ben play in the jazz band?")
            assert res.abstain is False and res.abstain_signals["gate"] == "fallback"


def test_gate_server_error_falls_back(settings, embedder, extractor, tmp_path):
    with FakeLLMServer() as server:
        with _gate_engine(settings, embedder, extractor, tmp_path, server) as memory:
            server.responder = lambda body: {"status": 500, "body": {"error": "down"}}
            res = memory.recall("chat", "Which city did Ana run the charity marathon in?")
            assert res.abstain is True and res.abstain_signals["gate"] == "fallback"


# Reflect's don't-know --------------------------------------------------------------------------


def test_reflect_says_it_does_not_know_without_asking_the_model(settings, embedder, extractor, tmp_path):
    with FakeLLMServer() as server:
        s = settings.model_copy(
            update={
                "llm": {"base_url": server.base_url, "model": "fake", "max_retries": 0},
                "background": {"reflect": False},
            }
        )
        server.responder = lambda body: json.dumps({"answer": "Ben plays the trumpet [M1].", "cited": ["M1"]})
        memory = Memory(s, embedder=embedder, extractor=extractor)
        try:
            from memlane.ingest import load_conversations

            path = write_jsonl_fixture(tmp_path / "chat.jsonl", _rows())
            memory.retain("chat", [("chat", c.turns) for c in load_conversations(path, format="jsonl")])
            res = memory.reflect("chat", "What did Zanzibarov say about the marathon?", form_opinions=False)
            assert res.abstain is True and res.answer.startswith(DONT_KNOW)
            assert "Zanzibarov" in res.answer and res.memory_ids == [] and res.opinions == []
            assert res.memories  # what recall found is still returned
            assert server.requests == []  # no answer was asked for
            ok = memory.reflect(
                "chat", "What instrument does Ben play in the jazz band?", form_opinions=False
            )
            assert ok.abstain is False and ok.answer == "Ben plays the trumpet [M1]."
            assert len(server.requests) == 1
        finally:
            memory.close()
