"""The query analyser (memlane/query/): one table of questions and what recall's stages read
from them, expected values written by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.query.analysis import analyse
from memlane.query.words import names_in
from memlane.stores.lexical import analyze

REFERENCE = datetime(2023, 5, 8, 12, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("query", "names", "content", "time_words", "slots", "past", "change"),
    [
        ("Where does Ana live now?", ["Ana"], {"live"}, [], {"lives_in"}, False, "now"),
        (
            "Where did Ana live before Leeds?",
            ["Ana", "Leeds"],
            {"live"},
            [],
            {"lives_in"},
            True,
            "before",
        ),
        (
            "What did Caroline paint last week?",
            ["Caroline"],
            {"paint"},
            ["last week"],
            set(),
            False,
            None,
        ),
        ("Caroline's dog: what breed is it?", ["Caroline"], {"dog", "breed"}, [], {"pet"}, False, None),
        (
            "How many rescue dogs does Priya have?",
            ["Priya"],
            {"rescue", "dogs"},
            [],
            {"owns:dog"},
            False,
            None,
        ),
        (
            "When did Gina and Jon meet in New York in May?",
            ["Gina", "Jon", "New York"],
            {"meet"},  # the names' words are left out
            ["May"],
            set(),
            False,
            None,
        ),
        ("What is my favourite cuisine?", [], {"cuisine"}, [], {"favourite:cuisine"}, False, None),
        (
            "Summarize what I used to do at work",
            [],
            {"summarize", "used", "work"},
            [],
            {"works_at"},
            True,
            "used to",
        ),
    ],
)
def test_analysis_table(query, names, content, time_words, slots, past, change):
    q = analyse(query, REFERENCE)
    assert list(q.names) == names
    assert q.content == content
    assert [s.text for s in q.time_spans] == time_words
    assert (q.interval is None) == (not time_words)
    assert q.asked_slots == slots
    assert q.past is past
    assert q.change == change


def test_name_rule_outside_questions_keeps_the_first_word():
    assert names_in("Marco met me in Lisbon.") == ["Marco", "Lisbon"]
    assert names_in("Marco met me in Lisbon.", question=True) == ["Lisbon"]
    assert names_in("Did you see Ana's Jon in March?") == ["Ana", "Jon"]


def test_tokens_are_the_lexical_index_s_and_the_record_is_frozen():
    q = analyse("What pet did Noor adopt in the summer?")
    assert q.tokens == ("pet", "noor", "adopt", "summer")
    assert analyze(q.text) == "pet noor adopt summer"
    assert q.time_spans == () and q.interval is None  # no reference: no time resolved
    assert q.keywords == ("pet", "noor", "adopt", "summer")
    with pytest.raises(AttributeError):
        q.past = True  # type: ignore[misc]
