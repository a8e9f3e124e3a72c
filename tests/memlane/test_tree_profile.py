"""The profile (the temporal tree's top level) states what the people of the bank said about
themselves and their lives: never the assistant's questions, chit-chat or recommendations, and
no question of anyone's. Real engine, embedder, spaCy and Milvus Lite; the extractive
consolidator (the default)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane.engine import Memory
from memlane.records import Turn
from memlane.settings import Settings
from memlane.tree.profile import states_something

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)  # a Monday
LATER = datetime(2025, 1, 1, tzinfo=UTC)  # every window below is closed by then

# (day offset, turns): one session in each of three ISO weeks. The assistant's turns are long
# and name the entities of the chat, so they are among the most central of their sessions: the
# lead point of the second week is the assistant's question, of the third Ana's question.
SESSIONS = [
    (
        0,
        [
            "Ana: I adopted a beagle called Pixel from a shelter in Porto last weekend.",
            "assistant: Ha, that's adorable. Is your landlord okay with pets?",
            "Ana: Yes, my landlord Rui said dogs are fine in the flat.",
            "assistant: Great! Beagles like Pixel need long walks, so try the trails along the Douro river in Porto.",
        ],
    ),
    (
        8,
        [
            "Ana: Pixel chewed my running shoes, so I bought new Asics in Porto.",
            "assistant: Oh no, poor shoes! Did Pixel get a chew toy from the pet shop in Porto too?",
            "Ana: I got him a Kong from the shop near my office.",
        ],
    ),
    (
        15,
        [
            "Ana: Any book ideas for the flight to Lisbon?",
            "assistant: Try 'The Wager' by David Grann - it's about a shipwreck in 1740, a gripping read for a flight to Lisbon.",
            "Ana: I work as a nurse at Santo Antonio hospital in Porto, so I read on night shifts.",
        ],
    ),
]
# What Ana said that states something, by week: what the profile may quote.
STATEMENTS = [
    {"s0:0", "s0:2"},
    {"s1:0", "s1:2"},
    {"s2:2"},
]


def _turns() -> list[Turn]:
    out = []
    for s, (day, texts) in enumerate(SESSIONS):
        for i, line in enumerate(texts):
            speaker, said = line.split(": ", 1)
            out.append(
                Turn(
                    document_id="chat",
                    session_id=f"s{s}",
                    turn_id=f"s{s}:{i}",
                    index=i,
                    speaker=speaker,
                    text=said,
                    timestamp=T0 + timedelta(days=day, minutes=3 * i),
                )
            )
    return out


@pytest.fixture
def ana(tmp_path, embedder, extractor):
    m = Memory(
        Settings(data_dir=tmp_path / "data", background={"tree": False}),
        embedder=embedder,
        extractor=extractor,
    )
    m.retain("ana", [("chat", _turns())])
    m.consolidate("ana", now=LATER)
    yield m
    m.close()


def test_the_profile_quotes_what_ana_said_not_the_assistant(ana):
    (profile,) = ana.tree.nodes("ana", level="profile")
    weeks = ana.tree.nodes("ana", level="week")
    # the weeks still quote the assistant and the questions (a week says what happened in it) ...
    leads = [w.metadata["points"][0][0] for w in sorted(weeks, key=lambda w: w.key)]
    assert leads[1].startswith("assistant: ") and leads[2] == "Ana: Any book ideas for the flight to Lisbon?"
    # ... the profile one statement of Ana's per week, cited by its turn
    points = profile.metadata["points"]
    assert len(points) == 3
    assert all(text.startswith("Ana: ") and not text.endswith("?") for text, _ in points)
    cited = [set(ts) for _, ts in points]
    assert all(sum(c <= week for week in STATEMENTS) == 1 for c in cited)  # one point per week
    assert [c for c in cited if c <= STATEMENTS[2]] == [{"s2:2"}]
    assert "assistant" not in profile.text and "?" not in profile.text
    assistant = [e.entity_id for e in ana.browse.list_entities("ana") if e.name == "assistant"]
    assert assistant and assistant[0] not in profile.entity_ids


def test_a_rerun_writes_nothing(ana):
    report = ana.consolidate("ana", now=LATER)
    assert sum(report.written.values()) == 0 and report.unchanged["profile"] == 1


@pytest.mark.parametrize(
    ("text", "states"),
    [
        ("Ana: Any book ideas for the flight to Lisbon?", False),
        ("Sam: Congratulations! How is the new job?", True),  # a sentence that is not a question
        ("Ana: I adopted a beagle. Do you know a vet in Porto?", True),
        ("Ana: Where? When?", False),
        ("Ana: Pixel howls at the mail carrier", True),
    ],
)
def test_a_statement_has_a_sentence_that_is_not_a_question(text, states):
    assert states_something(text) is states
