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
