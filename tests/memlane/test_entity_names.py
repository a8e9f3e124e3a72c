"""An entity's name is the name, not the punctuation around it in the turn: a trailing dash
("David Grann-" from spaCy before " it's"), the quotes of a title, a dash with the next word.
The resolver keeps names through one rule (memlane.retain.entities.clean_name); the engine
test retains real turns through spaCy and Milvus Lite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane.records import Turn
from memlane.retain.entities import EntityResolver, clean_name
from memlane.retain.facts import Mention

T0 = datetime(2025, 3, 10, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("surface", "name"),
    [
        ("David Grann -", "David Grann"),
        ("David Grann-", "David Grann"),
        ("David Grann -it's", "David Grann"),
        ("David Grann \u2014", "David Grann"),
        ("- Sarah", "Sarah"),
        ("'The Wager'", "The Wager"),
        ("\u201cDune\u201d", "Dune"),
        ("Porto,", "Porto"),
        ("(Mom)", "Mom"),
        ("Lisbon)", "Lisbon"),
        # what belongs to a name stays
        ("Jean-Luc Picard", "Jean-Luc Picard"),
        ("Washington D.C.", "Washington D.C."),
        ("C++", "C++"),
        ("AT&T", "AT&T"),
        ("Guns N' Roses", "Guns N' Roses"),
        ("Foo (Bar)", "Foo (Bar)"),
        ("-", ""),
    ],
)
def test_clean_name_drops_only_what_surrounds_the_name(surface, name):
    assert clean_name(surface) == name


def test_a_mention_with_a_trailing_dash_makes_and_finds_the_clean_name():
    r = EntityResolver("b")
    (ids,) = r.resolve_chunk(
        [[Mention("David Grann -", "PERSON"), Mention("'The Wager'", "WORK_OF_ART")]], [T0]
    )
    assert sorted(e.name for e in r.entities()) == ["David Grann", "The Wager"]
    later = r.resolve_chunk(
        [[Mention("David Grann", "PERSON"), Mention("The Wager", "WORK_OF_ART")]], [T0 + timedelta(days=1)]
    )
    assert later == [ids]
    assert all(e.aliases == [] for e in r.entities())


def test_retained_turns_name_the_author_without_the_dash(memory):
    said = [
        ("Ana", "Any book ideas for the long flight to Lisbon next week?"),
        ("assistant", "Try 'The Wager' by David Grann- it's about a shipwreck in 1740."),
        ("Ana", "Ooh, I loved Killers of the Flower Moon by David Grann - ordering it now."),
    ]
    turns = [
        Turn(
            document_id="chat",
            session_id="s1",
            turn_id=f"s1:{i + 1}",
            index=i,
            speaker=speaker,
            text=text,
            timestamp=T0 + timedelta(minutes=i),
        )
        for i, (speaker, text) in enumerate(said)
    ]
    memory.retain("ana", [("chat", turns)])
    names = [e.name for e in memory.browse.list_entities("ana")]
    assert "David Grann" in names
    assert not [n for n in names if n != n.strip(" -'\u2014")], names
    grann = [e for e in memory.browse.list_entities("ana") if e.name == "David Grann"]
    assert len(grann) == 1 and grann[0].aliases == [] and grann[0].mention_count == 2
