"""Who said what and the exchange a reply belongs to (memlane/recall/exchanges.py), and the
questions people text without a "?" (memlane/recall/traits.py question_share). Sentences
written for this test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane.query.sayer import rejects
from memlane.recall.exchanges import asked_of, replies_first, sayer_first, turns_of
from memlane.recall.traits import asking_share, question_share
from memlane.records import Turn


@pytest.mark.parametrize(
    ("text", "share"),
    [
        ("Did you book the ferry?", 1.0),
        ("r u driving up or getting the coach", 1.0),
        ("which hostel for tuesday", 1.0),
        ("ok so when do u land", 1.0),
        ("how many tickets left", 1.0),
        ("is there parking near the venue", 1.0),
        ("Wren when do we head off", 1.0),
        ("jo you coming to the match", 1.0),
        ("Sarah is the new manager", 0.0),
        ("Tom did it again", 0.0),
        ("Loved the gig. Are you going again next year?", 0.5),
        ("coach", 0.0),
        ("was brilliant honestly", 0.0),
        ("what a week", 0.0),
        ("how lovely is that", 0.0),
        ("when I lived in Hull the buses were awful", 0.0),
        ("have a safe trip", 0.0),
        ("Which one? The blue one.", 0.5),
        ("", 0.0),
    ],
)
def test_a_question_without_its_mark_counts_as_one(text: str, share: float) -> None:
    assert question_share(text) == share


def test_a_sentence_asks_outright_when_it_is_a_question_that_opens_like_one() -> None:
    assert asking_share("Do you have a tent yet?") == 1.0 == asking_share("which hostel for tuesday")
    assert asking_share("So, how did the move go?") == 1.0
    assert asking_share("Hey! How did the move go?") == 0.5  # the greeting is no question
    assert asking_share("I'm moving on the 5th and the van is booked, can you help me plan the day?") == 0.0
    assert asking_share("The coach is cheaper, ya know?") == 0.0  # a tag, not a question asked
    assert asking_share("coach") == 0.0 == asking_share("")


def _turn(speaker: str, text: str, turn: str) -> dict:
    return {"text": f"{speaker}: {text}", "metadata": {"speaker": speaker}, "source_turns": [turn]}


FIELDS = {
    "ask": _turn("Noor", "r u driving up or getting the coach", "s2:3"),
    "reply": _turn("Ilse", "coach", "s2:4"),
    "later": _turn("Ilse", "Booked the 7am one.", "s2:5"),
    "half": _turn("Noor", "Nice choice. Is the festival sold out?", "s2:6"),
    "after_half": _turn("Ilse", "Nearly.", "s2:7"),
    "own": _turn("Noor", "which seat", "s3:1"),
    "own_next": _turn("Noor", "window pls", "s3:2"),
    "asked_back": _turn("Ilse", "why do u ask", "s4:2"),
    "asks": _turn("Noor", "when does it start", "s4:1"),
    "long_ask": _turn("Noor", "I land at 6 and the hostel opens at 9, what should I do in between?", "s6:1"),
    "long_reply": _turn("Ilse", "Breakfast at the market.", "s6:2"),
    "g_ask": _turn("Wren", "Pia, what time do we set up", "s7:1"),
    "g_other": _turn("Olu", "has anyone seen the van keys", "s7:2"),
    "g_reply": _turn("Pia", "11", "s7:3"),
    "what_if": _turn("Noor", "what if it rains", "s8:1"),
    "long_answer": _turn(
        "Ilse", "Then take the covered market route, it has cafes all the way along and a museum", "s8:2"
    ),
    "how_about": _turn("Noor", "How about the coach, then?", "s9:1"),
    "tagged": _turn("Noor", "I just think the coach is easier. Cheaper too, ya know?", "s9:2"),
    "turned_down": _turn("Noor", "not the night bus, it's grim", "s5:1"),
    "put_forward": _turn("Noor", "get the 7am coach, it's half the price", "s5:2"),
}


def test_a_question_that_only_asks_gives_its_place_to_the_reply() -> None:
    assert replies_first(["ask", "later", "reply"], FIELDS) == ["reply", "ask", "later"]
    # already after its question's reply, or the question below it: the order stands
    assert replies_first(["reply", "ask"], FIELDS) == ["reply", "ask"]
    assert replies_first(["later", "reply", "ask"], FIELDS) == ["later", "reply", "ask"]


def test_the_exchange_rule_leaves_what_is_no_question_and_reply_alone() -> None:
    # half of it states; the next turn is the same speaker's; the next turn asks back
    assert replies_first(["half", "after_half"], FIELDS) == ["half", "after_half"]
    assert replies_first(["own", "own_next"], FIELDS) == ["own", "own_next"]
    assert replies_first(["asks", "asked_back"], FIELDS) == ["asks", "asked_back"]
    # a question that states something of its own keeps its place
    assert replies_first(["long_ask", "long_reply"], FIELDS) == ["long_ask", "long_reply"]
    # a long answer is ranked by its own words: it is not lifted to the question's place
    assert replies_first(["what_if", "long_answer"], FIELDS) == ["what_if", "long_answer"]
    # no reply among the candidates within three turns: nothing is fetched in its place
    assert replies_first(["ask", "own"], FIELDS) == ["ask", "own"]


def test_in_a_group_chat_the_reply_may_come_a_turn_or_two_later() -> None:
    # addressed by name, another question between, then the answer
    assert replies_first(["g_ask", "g_other", "g_reply"], FIELDS) == ["g_reply", "g_ask", "g_other"]
    # the direct reply not among the candidates: the next turn by another speaker answers
    assert replies_first(["ask", "later"], FIELDS) == ["later", "ask"]


def test_the_sayers_statements_come_before_their_questions_when_asked_what_they_said() -> None:
    ids = ["half", "reply", "own_next", "later"]
    # Noor's turns first, her half-question after her statement
    assert sayer_first(ids, FIELDS, "What did Noor suggest for the trip?") == [
        "own_next",
        "half",
        "reply",
        "later",
    ]
    # a question that names no one as having said it: the order stands
    assert sayer_first(ids, FIELDS, "Where is Noor going?") == ids


def test_a_short_reply_knows_the_question_it_answers() -> None:
    ids = list(FIELDS)
    by_turn = turns_of(ids, FIELDS)
    assert asked_of(FIELDS["reply"], FIELDS, by_turn) == "ask"
    assert asked_of(FIELDS["g_reply"], FIELDS, by_turn) == "g_ask"  # another question between
    # a long answer, and a turn after the same speaker's question, answer nothing asked
    assert asked_of(FIELDS["long_answer"], FIELDS, by_turn) is None
    assert asked_of(FIELDS["own_next"], FIELDS, by_turn) is None


def test_what_the_sayer_turned_down_comes_after_what_they_put_forward() -> None:
    ids = ["turned_down", "half", "later", "put_forward"]
    assert sayer_first(ids, FIELDS, "What did Noor recommend for getting there?") == [
        "put_forward",
        "turned_down",
        "half",
        "later",
    ]
    # a question that suggests, and a statement with a tag question, are put forward too
    assert sayer_first(["how_about", "half", "tagged", "later"], FIELDS, "What did Noor suggest?") == [
        "how_about",
        "tagged",
        "half",
        "later",
    ]
    assert rejects("Don't buy the cheap one") and rejects("avoid the ring road")
    assert not rejects("No.") and not rejects("nothing planned") and not rejects("I did not go")


def test_a_one_word_reply_to_a_texted_question_answers_it(memory) -> None:
    t0 = datetime(2026, 5, 2, 18, 0, tzinfo=UTC)
    said = [
        ("Noor", "festival tickets came through!!"),
        ("Ilse", "r u driving up to the festival or getting the coach"),
        ("Noor", "coach"),
        ("Ilse", "smart, parking there is a nightmare"),
        ("Noor", "also got the tent from my cousin"),
    ]
    turns = [
        Turn(document_id="d", session_id="s1", turn_id=f"s1:{i}", index=i, speaker=s, text=t,
             timestamp=t0 + timedelta(minutes=i))
        for i, (s, t) in enumerate(said)
    ]  # fmt: skip
    memory.retain("noor", [("d", turns)])
    got = memory.recall(
        "noor", "Was Noor driving to the festival or taking the coach?", reference_time=t0 + timedelta(days=3)
    )
    assert got.memories[0].unit.text == "Noor: coach"
