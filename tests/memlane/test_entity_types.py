"""Entity types a person would agree with: the cues of memlane/retain/entity_types.py, the
speakers' labels, and entity resolution letting a certain mention correct an earlier guess.
Sentences written for these tests (none from benchmarks/entity_types.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane.records import Bank, Entity, Turn
from memlane.retain.chunking import chunk_turns
from memlane.retain.entities import EntityResolver
from memlane.retain.entity_types import cue_label, speaker_label
from memlane.retain.facts import Mention

T0 = datetime(2024, 9, 3, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text, surface, model_label, want",
    [
        ("We finally relocated to Nantes in the spring.", "Nantes", "PERSON", "GPE"),
        ("She grew up in Valparaiso, then left.", "Valparaiso", "ORG", "GPE"),
        ("My cousin is visiting from Graz next week.", "Graz", "NORP", "GPE"),
        ("Our hamster Pretzel escaped again.", "Pretzel", "ORG", "ANIMAL"),
        ("We got a beagle named Waffles.", "Waffles", "PRODUCT", "ANIMAL"),
        ("Feeding Sprout, my tortoise, takes a minute.", "Sprout", "PERSON", "ANIMAL"),
        ("Dinner with my landlady Ottoline tonight.", "Ottoline", "GPE", "PERSON"),
        ("Ask Bartholomew, my coach, about it.", "Bartholomew", "ORG", "PERSON"),
        ("We ate somewhere in Vauxhall.", "Vauxhall", "PERSON", "GPE"),
        ("The meeting is at Quarry Lane at nine.", "Quarry Lane", "PERSON", "FAC"),
        ("The cafe by the River Wensum shut.", "River Wensum", "PERSON", "FAC"),
        ("I opened an account with Harrowgate Bank.", "Harrowgate Bank", "PERSON", "ORG"),
        ("She lectures at the University of Keele.", "University of Keele", "GPE", "ORG"),
    ],
)
def test_a_cue_in_the_turn_types_the_name(text, surface, model_label, want):
    assert cue_label(text, surface, model_label) == want


@pytest.mark.parametrize(
    "text, surface, model_label",
    [
        ("I had a long call with Orla yesterday.", "Orla", "PERSON"),  # no cue: the model's guess
        ("I'm a tester in Brackenfield's QA team.", "Brackenfield", "ORG"),  # owns the team
        ("I work in Tessaract these days.", "Tessaract", "ORG"),  # an org stays an org after "in"
        ("She answered in Catalan.", "Catalan", "NORP"),  # a language after "in"
        ("They moved to Lisbon in May.", "Lisbon", "GPE"),  # already a place: kept
    ],
)
def test_without_a_certain_cue_the_models_label_stands(text, surface, model_label):
    assert cue_label(text, surface, model_label) in (None, model_label)


def test_role_speakers_are_assistants_and_named_speakers_people():
    assert speaker_label("assistant") == "ASSISTANT"
    assert speaker_label("AI Assistant") == "ASSISTANT"
    assert speaker_label("Nell", {"role": "assistant"}) == "ASSISTANT"
    assert speaker_label("Nell", {"role": "user"}) == "PERSON"
    assert speaker_label("user") == "PERSON"


def test_a_certain_mention_corrects_a_guessed_type_and_a_guess_does_not():
    existing = [Entity(entity_id="e-h", bank_id="b", name="Hollis", type="GPE")]
    r = EntityResolver("b", existing)
    r.resolve_chunk([[Mention("Hollis", "ORG")]], [T0])  # another guess: the type stands
    assert {e.name: e.type for e in r.entities()}["Hollis"] == "GPE"
    ids = r.resolve_chunk([[Mention("Hollis", "PERSON", certain=True)]], [T0 + timedelta(days=1)])
    assert ids == [["e-h"]]
    assert {e.name: e.type for e in r.entities()}["Hollis"] == "PERSON"


def _turns(lines, metadata=None):
    return [
        Turn(
            document_id="d",
            session_id="s",
            turn_id=f"t{i}",
            index=i,
            speaker=who,
            text=text,
            timestamp=T0 + timedelta(minutes=i),
            metadata=(metadata or {}).get(who, {}),
        )
        for i, (who, text) in enumerate(lines)
    ]


def _types(extractor, turns):
    r = EntityResolver("b")
    chunks = chunk_turns("b", "d", turns, 8)
    for facts in extractor.extract(Bank(bank_id="b"), chunks):
        r.resolve_chunk([f.mentions for f in facts], [f.mentioned_at for f in facts])
    return {e.name: e.type for e in r.entities()}


def test_rules_extractor_types_speakers_assistants_and_cued_names(extractor):
    turns = _turns(
        [
            ("user", "Big week: we moved to Kirkcaldy and the new puppy Bramble came home."),
            ("assistant", "Congratulations! How is Bramble finding Kirkcaldy?"),
            ("Wynne", "Hi, Wynne here, Bramble chewed my slipper."),
            ("Dot", "Wynne, tell the user that my nephew Caspian can walk Bramble."),
        ],
        metadata={"Dot": {"role": "assistant"}},
    )
    types = _types(extractor, turns)
    assert types["user"] == "PERSON" and types["Wynne"] == "PERSON"
    assert types["assistant"] == "ASSISTANT" and types["Dot"] == "ASSISTANT"
    assert types["Bramble"] == "ANIMAL"
    assert types["Kirkcaldy"] == "GPE"
    assert types.get("Caspian") == "PERSON"
