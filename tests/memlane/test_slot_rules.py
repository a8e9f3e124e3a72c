"""The rules' slot facts (memlane/facts/patterns.py find_facts): precision first, several facts a
turn. Sentences written for these tests (none from the statement set or its training data)."""

from __future__ import annotations

import pytest

from memlane.facts.families import family_of, labelled
from memlane.facts.patterns import find_facts, find_slot
from memlane.facts.slots import Slot


def facts(text: str) -> set[tuple[str, str]]:
    return {(s.predicate, s.object) for s in find_facts(text, "Noor")}


# An activity, a class or a hobby named with a capitalised word is not an employer.
@pytest.mark.parametrize(
    "text",
    [
        "I've just started Mandarin classes on Thursday nights.",
        "We also started Portuguese lessons with a tutor.",
        "I started Bikram yoga in the spring and it's brutal.",
        "I joined Zumba sessions at the leisure centre.",
        "I've been working with Priya on the garden all weekend.",
    ],
)
def test_an_activity_is_never_a_workplace(text):
    assert not any(p == "works_at" for p, _ in facts(text))


def test_a_workplace_after_at_or_for_is_one():
    assert ("works_at", "Brightwater Labs") in facts(
        "I started at Brightwater Labs last week, so far so good."
    )
    assert ("works_at", "Orla Freight") in facts("I've been working for Orla Freight since the spring.")
    assert ("works_at", "Quillon") in facts("I joined Quillon in March.")


def test_a_turn_gives_every_fact_it_states_in_order():
    text = (
        "Settled in Dundee now. I started at Kestrel Analytics on Monday, and my tabby Moss hates the stairs."
    )
    got = find_facts(text, "Noor")
    assert [(s.predicate, s.object) for s in got] == [
        ("lives_in", "Dundee"),
        ("works_at", "Kestrel Analytics"),
        ("pet", "cat Moss"),
    ]
    assert all(s.subject == "Noor" and s.by == "rules" for s in got)
    assert find_slot(text, "Noor") == got[0]  # a unit that keeps one slot keeps the first


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "I'm a hospital porter at St Aldhelm's, nights mostly.",
            {("job_title", "hospital porter"), ("works_at", "St Aldhelm's")},
        ),
        ("I've been vegan for about three years.", {("diet", "vegan")}),
        ("I'm coeliac, so no bread for me.", {("diet", "gluten-free")}),
        ("My old spaniel Juno sleeps on my feet.", {("pet", "dog Juno")}),
        ("Our Mazda CX-5 needs new brakes.", {("car", "Mazda CX-5")}),
        (
            "I'm doing a part-time MSc in data science at Keele.",
            {("studies", "MSc in data science at Keele")},
        ),
        ("We have three kids.", {("owns:child", "3")}),
    ],
)
def test_the_new_families_from_plain_statements(text, expected):
    assert facts(text) == expected


# Not the speaker's own current value: someone else's, planned, supposed, asked, negated, past.
@pytest.mark.parametrize(
    "text",
    [
        "My brother is vegan and won't stop talking about it.",
        "My neighbour's spaniel Juno barks all night.",
        "If I went vegetarian my dad would never forgive me.",
        "Should I get a Mazda CX-5 or something smaller?",
        "I'm not vegan any more, I gave up in the summer.",
        "I used to drive a Fiat Punto.",
        "We bought a flat in Ghent! Moving in on the 3rd.",
        "I got a job at Harlow Print, starting next month.",
        "Our dog Biscuit died last winter.",
    ],
)
def test_what_is_not_the_speakers_current_value_fills_nothing(text):
    assert facts(text) == set()


def test_counts_map_to_their_family_in_one_place():
    slot = Slot("Noor", "owns:dog", "2", count=2)
    assert family_of(slot.predicate) == "count" and labelled(slot) == ("count:dog", "2")
    assert family_of("favourite:band") == "favourite" and family_of("resides_in") is None
