"""A small bank (a new user's first turns: fewer candidates than the learned ranker was trained
on) ranks by the same rules as a large one (memlane/recall/learned.py ``MIN_CANDIDATES``): the
assistant's question is not the answer to what the user said (with the fused order, as before,
it came first). Real engine, real models; sentences written for this test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.records import Turn


def test_a_four_turn_bank_answers_with_the_users_reply_not_the_assistants_question(memory) -> None:
    t0 = datetime(2026, 4, 11, 10, 0, tzinfo=UTC)
    said = [
        ("Tomas", "Signed up for a plot at the Eastgate allotments this weekend."),
        ("Assistant", "Lovely! How many beds do you get on the allotment?"),
        ("Tomas", "Six raised beds, two of them already full of garlic."),
        ("Assistant", "Garlic is a great start for spring."),
    ]
    turns = [
        Turn(document_id="d", session_id="s1", turn_id=f"s1:{i}", index=i, speaker=s, text=t,
             timestamp=t0 + timedelta(minutes=i))
        for i, (s, t) in enumerate(said)
    ]  # fmt: skip
    memory.retain("tomas", [("d", turns)])
    got = memory.recall(
        "tomas", "How many beds does Tomas have on the allotment?", reference_time=t0 + timedelta(days=5)
    )
    assert len(got.memories) == 4
    assert got.memories[0].unit.text.startswith("Tomas: Six raised beds")
