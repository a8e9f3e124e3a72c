"""Whom a question asks about as the one who said something (memlane/query/sayer.py), and the
ranker features read from it (memlane/recall/features.py ``said_by``). Sentences written for
these tests."""

from __future__ import annotations

import pytest

from memlane.query.sayer import asks_said, offers, sayer
from memlane.recall.features import said_by


@pytest.mark.parametrize(
    "question, who",
    [
        ("What book did you recommend?", "assistant"),
        ("which podcast did u suggest for my commute", "assistant"),
        ("What was your recommendation for a rain jacket?", "assistant"),
        ("What did the assistant suggest for the party?", "assistant"),
        ("Which café did Jonas suggest?", "Jonas"),
        ("What was Ilse's pick for the hike?", "Ilse"),
        ("What did I tell you about my brother's new flat?", "user"),
        ("Where does Ilse work now?", None),
        ("When is the housewarming?", None),
    ],
)
def test_the_sayer_a_question_names(question: str, who: str | None) -> None:
    assert sayer(question) == who


def test_asking_about_something_said_and_turns_that_offer_something() -> None:
    assert asks_said("Which café did Jonas suggest?") and not asks_said("Where does Ilse work now?")
    assert offers("Try 'The Salt Path' - it's a walking memoir.")
    assert offers("I'd go with the 14-inch, the battery is better.")
    assert not offers("I went to the market this morning.")


def test_said_by_matches_the_speaker_asked_about() -> None:
    assert said_by("Assistant", "assistant") and not said_by("Ilse", "assistant")
    assert said_by("Ilse", "user") and not said_by("Assistant", "user")
    assert said_by("Jonas Berg", "Jonas") and not said_by("Ilse", "Jonas")


def test_the_sayers_memories_come_first_each_in_its_own_order() -> None:
    from memlane.recall.exchanges import sayer_first

    fields = {
        "ask": {"metadata": {"speaker": "Odile"}},
        "rec": {"metadata": {"speaker": "Assistant"}},
        "ok": {"metadata": {"speaker": "Odile"}},
        "rec2": {"metadata": {"speaker": "Assistant"}},
    }
    ids = ["ask", "ok", "rec", "rec2"]
    assert sayer_first(ids, fields, "What book did you recommend?") == ["rec", "rec2", "ask", "ok"]
    assert sayer_first(ids, fields, "What did I tell you about the book?") == ["ask", "ok", "rec", "rec2"]
    assert sayer_first(ids, fields, "Which book is Odile reading?") == ids  # no sayer named
    assert sayer_first(ids, fields, "What did Jonas suggest?") == ids  # none of them is his


def test_a_small_bank_answers_what_the_assistant_recommended_with_its_turn(memory) -> None:
    from datetime import UTC, datetime, timedelta

    from memlane.records import Turn

    t0 = datetime(2026, 2, 20, 19, 0, tzinfo=UTC)
    said = [
        ("Odile", "Can you recommend a novel for the train? Something gripping but not grim."),
        ("Assistant", "Try 'The Thursday Murder Club' by Richard Osman - cosy, funny and hard to put down."),
        ("Odile", "Perfect, ordered it."),
        ("Assistant", "Enjoy! Let me know what you think of the ending."),
    ]
    turns = [
        Turn(document_id="d", session_id="s1", turn_id=f"s1:{i}", index=i, speaker=s, text=t,
             timestamp=t0 + timedelta(minutes=i))
        for i, (s, t) in enumerate(said)
    ]  # fmt: skip
    memory.retain("odile", [("d", turns)])
    got = memory.recall("odile", "What book did you recommend?", reference_time=t0 + timedelta(days=30))
    assert got.memories[0].unit.text.startswith("Assistant: Try 'The Thursday Murder Club'")
