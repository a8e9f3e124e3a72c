"""The cross-encoder stage of recall (memlane/recall/rerank.py): the pool, the budgets, the
trace and the current value first, with the real ms-marco cross-encoder where it runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Sequence

import pytest
from fixtures import write_jsonl_fixture, write_locomo_fixture
from pydantic import ValidationError

from memlane.interfaces import Hit
from memlane.recall.rerank import candidate_text, newest_among_ties, pool
from memlane.settings import Settings


class Counting:
    """The real cross-encoder, counting its calls."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        self.calls += 1
        return self.inner.rerank(query, passages, prior_ranks)


@pytest.fixture(scope="module")
def cross_encoder():
    from memlane.models.onnx_cross_encoder import OnnxCrossEncoder

    return OnnxCrossEncoder("cross-encoder", threads=2)


@pytest.fixture
def reranked(settings, embedder, extractor, cross_encoder):
    from memlane.engine import Memory

    settings.recall.rerank_high = 20  # the budgets' sizes are pinned here, not by the defaults
    counter = Counting(cross_encoder)
    m = Memory(settings, embedder=embedder, extractor=extractor, reranker=counter)
    yield m, counter
    m.close()


def _hits(channel: str, ids: list[str]) -> list[Hit]:
    return [Hit(id=i, score=1.0 - r / 10) for r, i in enumerate(ids)]


def test_pool_holds_each_channels_best_even_below_the_fused_top_n():
    fused = ["a", "b", "c", "d", "lex1", "e"]  # fusion ranked the lexical-only hit 5th
    hits = {"semantic": _hits("semantic", ["a", "b", "c"]), "lexical": _hits("lexical", ["lex1", "a"])}
    assert pool(fused, hits, 2, 1) == ["a", "b", "lex1"]
    assert pool(fused, hits, 2, 0) == ["a", "b"]
    # A channel's hit that the filter took out of the fused list stays out.
    assert pool(["a", "b", "c"], hits, 2, 1) == ["a", "b"]


def test_candidate_text_carries_date_and_speaker_and_is_bounded():
    fields = {
        "text": "I adopted a tortoise called Dumpling.",
        "mentioned_at": datetime(2024, 3, 5, tzinfo=UTC).timestamp(),
        "metadata": {"speaker": "Noor"},
    }
    assert candidate_text(fields, 300) == "05 March 2024 Noor: I adopted a tortoise called Dumpling."
    assert candidate_text(fields, 20) == "05 March 2024 Noor: "
    assert candidate_text({"text": "plain"}, 300) == "plain"
    # A text that names its speaker already (LongMemEval's "user: ...") is not given it twice.
    said = {**fields, "text": "user: I bought Stubb's sauce.", "metadata": {"speaker": "user"}}
    assert candidate_text(said, 300) == "05 March 2024 user: I bought Stubb's sauce."


def test_a_short_reply_is_read_after_the_question_it_answers():
    reply = {"text": "Noor: coach", "metadata": {"speaker": "Noor"}}
    asked = {"text": "Ilse: r u driving up or getting the coach", "metadata": {"speaker": "Ilse"}}
    assert candidate_text(reply, 300, asked) == "Ilse: r u driving up or getting the coach Noor: coach"
    # the question is cut to half the length, so the reply is always read
    assert candidate_text(reply, 30, asked) == "Ilse: r u drivi Noor: coach"


def test_a_pairs_cross_encoder_score_does_not_depend_on_the_others_in_the_call(cross_encoder):
    # The int8 model quantizes a pass's activations together: in one padded pass of 16 the
    # answer's score moved by 7e-4 with its neighbours (measured). One pair a pass: none.
    query = "How long have I had my cat, Luna?"
    passages = [
        "user: I got my cat Luna nine months ago.",
        "assistant: " + " ".join(f"Tip {i}: drink some water before the trip." for i in range(20)),
        "assistant: Here are some tips for your trip to Lisbon.",
    ]
    alone = [cross_encoder.rerank(query, [p], [0])[0] for p in passages]
    assert cross_encoder.rerank(query, passages, [0, 1, 2]) == pytest.approx(alone, abs=1e-6)
    assert alone[0] > alone[2]


def test_newest_among_near_ties_goes_first_and_the_older_is_kept_as_earlier():
    t = {"old": 1.0, "new": 2.0, "far": 3.0}
    fields = {c: {"mentioned_at": v * 86400} for c, v in t.items()}
    scores = {"old": 0.9, "new": 0.88, "far": 0.2}
    ranked, earlier = newest_among_ties(["old", "new", "far"], scores, fields, 0.05, 0.5)
    assert ranked == ["new", "old", "far"]  # "far" is newest but not near the best
    assert earlier == {"old"}
    assert newest_among_ties(["old", "new"], scores, fields, 0.0, 0.5)[0] == ["old", "new"]
    # Below the floor (the cross-encoder says neither answers) nothing moves.
    low = {"old": 0.04, "new": 0.03, "far": 0.01}
    assert newest_among_ties(["old", "new", "far"], low, fields, 0.05, 0.5) == (["old", "new", "far"], set())


def test_settings_reject_negative_rerank_sizes():
    for key in ("rerank_low", "rerank_mid", "rerank_high", "rerank_channel_best"):
        with pytest.raises(ValidationError):
            Settings(recall={key: -1})
    assert Settings(recall={"rerank_mid": 7}).recall.rerank_size("mid") == 7


def test_only_budgets_with_a_pool_call_the_cross_encoder_and_the_trace_shows_it(reranked, tmp_path):
    memory, counter = reranked
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    for budget in ("low", "mid"):
        res = memory.recall("fx", "Dumpling the tortoise", budget=budget, trace=True)
        assert counter.calls == 0
        assert res.memories[0].trace["rerank"]["model"] == "rrf-fallback"
    res = memory.recall("fx", "Dumpling the tortoise", budget="high", trace=True)
    assert counter.calls == 1
    traced = [m.trace["rerank"] for m in res.memories if m.trace["rerank"]["model"] == counter.name]
    assert traced, "the cross-encoder's memories carry its model"
    assert sorted(t["rank"] for t in traced) == list(range(1, len(traced) + 1))
    assert all(0.0 < t["score"] < 1.0 and t["fused_rank"] >= 1 for t in traced)
    assert "Dumpling" in res.memories[0].unit.text


def test_a_question_about_now_gets_the_new_value_first_and_an_as_of_one_the_old(reranked, tmp_path):
    memory, _ = reranked
    rows = [
        {
            "speaker": "Ana",
            "text": "My favourite coffee is a flat white.",
            "timestamp": "2025-01-02T10:00:00Z",
            "session_id": "s1",
        },
        {
            "speaker": "Ana",
            "text": "I went hiking in the hills today.",
            "timestamp": "2025-02-02T10:00:00Z",
            "session_id": "s2",
        },
        {
            "speaker": "Ana",
            "text": "My favourite coffee is a cortado.",
            "timestamp": "2025-06-01T10:00:00Z",
            "session_id": "s3",
        },
    ]
    memory.retain_file("ana", write_jsonl_fixture(tmp_path / "a.jsonl", rows))
    now = memory.recall("ana", "What is Ana's favourite coffee?", budget="high", trace=True).memories
    assert "cortado" in now[0].unit.text
    old = next(m for m in now if "flat white" in m.unit.text)  # kept, marked earlier
    assert old.trace["rerank"]["earlier"] is True
    then = memory.recall(
        "ana", "What is Ana's favourite coffee?", budget="high", as_of=datetime(2025, 3, 1, tzinfo=UTC)
    ).memories
    assert "flat white" in then[0].unit.text
