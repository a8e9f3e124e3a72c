"""The named-embedder dense baselines: the eval's exact cosine over a bank's unit texts
(evals/dense_baseline.py) against the store's own dense search, on the real engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from evals.dense_baseline import DenseBaseline
from evals.harness import rank_all
from memlane.records import Turn

LINES = [
    ("Ana", "My dog Biscuit chewed through the sofa cushion again this morning."),
    ("Ben", "I finally booked the train tickets to Lisbon for the conference."),
    ("Ana", "The new espresso machine makes a far better flat white than the old one."),
    ("Ben", "My sister is moving to Toronto for a nursing job next spring."),
    ("Ana", "I started learning the cello after watching a concert in Vienna."),
    ("Ben", "The roof leak in the garage got worse after last night's storm."),
]


def _bank(memory) -> str:
    t0 = datetime(2024, 5, 1, 9, tzinfo=UTC)
    turns = [
        Turn(
            document_id="d1",
            session_id="s1",
            turn_id=f"t{i}",
            index=i,
            speaker=who,
            text=text,
            timestamp=t0 + timedelta(minutes=i),
        )
        for i, (who, text) in enumerate(LINES)
    ]
    memory.retain("b", [("d1", turns)])
    return "b"


def test_dense_baseline_ranks_like_the_stores_dense_search_with_the_same_embedder(memory, embedder):
    bank = _bank(memory)
    baseline = DenseBaseline(embedder)
    for query in ("What is the name of Ana's pet?", "Where is Ben's sister going to work?", "music lessons"):
        ours = baseline.rank(memory.store, bank, query, depth=100)
        stores = rank_all(memory, bank, query, systems=["dense"])[0]["dense"]
        assert ours == stores  # exact cosine over the same unit texts, same embedder: same order
    assert baseline.rank(memory.store, bank, "What is the name of Ana's pet?", depth=1) == ["t0"]
    assert baseline.rank(memory.store, bank, "Which city is Ben travelling to by train?", depth=1) == ["t1"]


def test_dense_baseline_of_an_empty_bank_ranks_nothing(memory, embedder):
    memory.create_bank("empty")
    assert DenseBaseline(embedder).rank(memory.store, "empty", "anything", depth=10) == []
