"""Only a fact whose extractor and slot family were measured precise enough may invalidate
another (memlane/facts/trust.py, wired into memlane/facts/resolve.py). Sentences written for
these tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.facts.resolve import SlotFact, resolve
from memlane.facts.slots import Slot
from memlane.facts.trust import BAR, MIN_PREDICTED, TABLE, Measured, may_supersede, slot_may_supersede
from memlane.records import Turn

DAY = 86400.0


def test_the_table_holds_held_half_counts_and_the_bar_decides():
    assert BAR == 0.95 and MIN_PREDICTED == 5
    assert Measured(predicted=10, right=10, labelled=14, found=10).trusted
    assert not Measured(predicted=20, right=18, labelled=20, found=18).trusted  # 0.90
    assert not Measured(predicted=3, right=3, labelled=20, found=3).trusted  # too few to show it
    for (extractor, family), m in TABLE.items():
        assert may_supersede(family, extractor) == (m.right / max(m.predicted, 1) >= BAR and m.predicted >= 5)
    assert may_supersede("works_at", "classifier:bge-small")
    assert not may_supersede("lives_in", "classifier:bge-small")  # measured below the bar
    assert not may_supersede("works_at", "llm")  # the chunk extractor: never measured
    assert not may_supersede(None, "rules")  # a predicate of no measured family
    assert slot_may_supersede(Slot("Ana", "job_title", "nurse"))  # "rules" is the default extractor
    assert not slot_may_supersede(Slot("Ana", "resides_in", "Oslo", by="classifier:bge-small"))


def fact(id_, predicate, obj, day, by):
    return SlotFact(id=id_, slot=Slot("Maya", predicate, obj, by=by), at=day * DAY, document_id=id_)


def test_an_untrusted_newer_value_is_a_hint_and_never_invalidates():
    r = resolve(
        [
            fact("job", "works_at", "Clyde Robotics", 0, "classifier:bge-small"),
            fact("lessons", "works_at", "Korean", 10, "llm-slots:some-model"),
        ]
    )
    job, lessons = r.decisions["job"], r.decisions["lessons"]
    assert job.invalid_at is None and job.superseded_by is None and job.possibly_superseded_by is None
    assert lessons.would_supersede == "job" and lessons.supersedes is None
    assert r.outcomes["untrusted"] == 1 and not r.outcomes["superseded"]


def test_a_trusted_newer_value_supersedes_every_valid_older_one():
    r = resolve(
        [
            fact("a", "works_at", "Clyde Robotics", 0, "classifier:bge-small"),
            fact("b", "works_at", "Korean", 10, "llm"),  # untrusted: stays valid beside a
            fact("c", "works_at", "Firth Marine", 40, "classifier:bge-small"),
        ]
    )
    assert r.decisions["a"].superseded_by == "c" and r.decisions["b"].superseded_by == "c"
    assert r.decisions["c"].invalid_at is None and r.outcomes["superseded"] == 2


def _turn(doc, text, day):
    t0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
    return Turn(
        document_id=doc,
        session_id=doc,
        turn_id=f"{doc}:0",
        index=0,
        speaker="Maya",
        text=text,
        timestamp=t0 + timedelta(days=day),
    )


def test_an_activity_is_not_written_as_a_job_and_hides_nothing(memory):
    memory.retain(
        "maya",
        [
            ("s1", [_turn("s1", "Settled in Perth now. I started at Harbour Robotics last week.", 0)]),
            ("s2", [_turn("s2", "I've also started Korean lessons on Monday evenings.", 20)]),
        ],
    )
    memory.consolidate("maya")
    units = {u.document_id: u for batch in memory.store.iter_units("maya") for u in batch}
    # no works_at = "Korean"
    assert all(f["predicate"] != "works_at" for f in units["s2"].metadata.get("facts", []))
    assert units["s1"].invalid_at is None and units["s1"].superseded_by is None
    facts = {f["predicate"]: f for f in units["s1"].metadata["facts"]}
    assert facts["lives_in"]["object"] == "Perth" and facts["works_at"]["object"] == "Harbour Robotics"
    assert not any(f.get("superseded_by") for f in facts.values())
