"""The form a question's answer takes (memlane/recall/answer_form.py): a turn that names
something answers a name question; a bare yes or no answers no wh-question. Sentences written
for these tests, from no dev set."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane.recall.answer_form import answer_form_first, asks_name, asks_wh, bare_reply, names_something
from memlane.records import Turn


@pytest.mark.parametrize(
    ("question", "wh", "name"),
    [
        ("What is the name of Lena's tortoise?", True, True),
        ("What's the boat called?", True, True),
        ("so what did they name the baby", True, True),
        ("Who did Arjun go hiking with?", True, False),
        ("How many lessons has Ola booked?", True, False),
        ("Where does Ola keep the spare key?", True, False),
        ("Did Ola get the tortoise a new tank?", False, False),
        ("Is the boat still called Heron?", False, False),
    ],
)
def test_what_the_question_asks_for(question: str, wh: bool, name: bool) -> None:
    assert asks_wh(question) is wh
    assert asks_name(question) is name


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("We got a tortoise last week, he's called Pebble.", True),
        ("they named her Juno after the probe", True),
        ("Her name is Maud and she is ancient", True),
        ("the boat's called heron", True),
        ("I called my landlord about the boiler", False),
        ("He called back yesterday with the quote", False),
        ("No name on the parcel at all", False),
    ],
)
def test_a_turn_that_names_something(text: str, names: bool) -> None:
    assert names_something(text) is names


@pytest.mark.parametrize(
    ("text", "bare"),
    [
        ("No.", True),
        ("yep!!", True),
        ("ok thanks", True),
        ("not yet", True),
        ("No, the green one", False),
        ("Nope, I sold it in May", False),
        ("okay I'll take the 9am train", False),
    ],
)
def test_a_bare_yes_or_no(text: str, bare: bool) -> None:
    assert bare_reply(text) is bare


def _fields(speaker: str, said: str) -> dict[str, object]:
    return {"text": f"{speaker}: {said}", "metadata": {"speaker": speaker}}


FIELDS = {
    "asks": _fields("Assistant", "Lovely. Have you picked a tank yet?"),
    "no": _fields("Lena", "No."),
    "tank": _fields("Lena", "Bought the 120 litre tank in the end."),
    "sleeps": _fields("Lena", "He sleeps under the heat lamp most of the day."),
    "named": _fields("Lena", "We got a tortoise last week, he's called Pebble."),
    "other": _fields("Lena", "The vet is on Carr Lane."),
}


def test_a_name_question_puts_the_naming_turn_within_the_first_three_first() -> None:
    q = "What is the name of Lena's tortoise?"
    assert answer_form_first(["sleeps", "named", "tank"], FIELDS, q) == ["named", "sleeps", "tank"]
    # already first, or further down than the first three: the order stands
    assert answer_form_first(["named", "sleeps"], FIELDS, q) == ["named", "sleeps"]
    far = ["sleeps", "tank", "other", "named"]
    assert answer_form_first(far, FIELDS, q) == far
    # another kind of question: a naming turn is not moved
    assert answer_form_first(["sleeps", "named"], FIELDS, "Where does Lena's tortoise sleep?") == [
        "sleeps",
        "named",
    ]


def test_a_bare_no_goes_after_every_turn_that_says_something_unless_asked_yes_or_no() -> None:
    q = "What size tank did Lena buy?"
    assert answer_form_first(["no", "asks", "tank"], FIELDS, q) == ["asks", "tank", "no"]
    assert answer_form_first(["no", "asks"], FIELDS, "Had Lena picked a tank in May?") == ["no", "asks"]
    # nothing else to put first: the order stands
    assert answer_form_first(["no"], FIELDS, q) == ["no"]


def test_a_name_question_on_a_small_bank_gets_the_naming_turn(memory) -> None:
    t0 = datetime(2026, 3, 9, 19, 0, tzinfo=UTC)
    said = [
        ("Lena", "Big news, we adopted a tortoise from the rescue on Saturday."),
        ("Assistant", "How exciting! What did you name him?"),
        ("Lena", "The kids picked it, he's called Pebble."),
        ("Assistant", "Pebble is perfect. Have you got a tank for him yet?"),
        ("Lena", "No."),
        ("Lena", "He sleeps under the heat lamp most of the day, the tortoise is very lazy."),
    ]
    turns = [
        Turn(document_id="d", session_id="s1", turn_id=f"s1:{i}", index=i, speaker=s, text=t,
             timestamp=t0 + timedelta(minutes=i))
        for i, (s, t) in enumerate(said)
    ]  # fmt: skip
    memory.retain("lena", [("d", turns)])
    at = t0 + timedelta(days=2)
    got = memory.recall("lena", "What is the name of Lena's tortoise?", reference_time=at)
    assert got.memories[0].unit.text == "Lena: The kids picked it, he's called Pebble."
    got = memory.recall("lena", "What kind of tank does the tortoise have?", reference_time=at)
    assert [m.unit.text for m in got.memories][-1] == "Lena: No."
