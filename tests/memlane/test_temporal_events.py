"""The events a turn dates (memlane/temporal/events.py), habits (memlane/temporal/habits.py) and
how a memory's dates are stored and shown: said when, about which events.

Every sentence here is written for these tests (none is a line of evals/dates/, the sets that
measure the rules: tests/evals/test_dev_sets.py checks)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from fixtures import write_jsonl_fixture

from memlane.temporal import EVENTS, find_time_expressions, habit_spans, turn_events

MON = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)  # a Monday
THU = datetime(2026, 5, 7, 12, 0, tzinfo=UTC)
SAT = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)
SUN = datetime(2026, 5, 10, 12, 0, tzinfo=UTC)


def _days(text: str, said: datetime) -> list[tuple[date, date]]:
    return [(s.start.date(), s.end.date()) for s in find_time_expressions(text, said)]


# ----------------------------------------------------------------------------- habits


@pytest.mark.parametrize(
    "text, habit",
    [
        ("Gymnastics is every Wednesday after school for Tilly", "every Wednesday"),
        ("my brother phones every other Sunday from Perth", "every other Sunday"),
        ("we always got bored each summer at the caravan", "each summer"),
        ("I cycle in most mornings unless it's chucking it down", "most mornings"),
        ("on Fridays the canteen does fish and chips", "on Fridays"),
        ("Tuesday nights are choir, non negotiable", "Tuesday nights"),
        ("those Saturday lie-ins are what keep me sane", "Saturday lie-ins"),
        ("every Thursday evening we take the dog round the reservoir", "every Thursday evening"),
    ],
)
def test_a_habit_dates_no_day(text, habit):
    (span,) = habit_spans(text)
    assert text[span[0] : span[1]] == habit
    assert _days(text, THU) == []
    events = turn_events(text, THU)
    assert events.occurrence is None and events.day is None


def test_a_dated_event_beside_a_habit_keeps_its_date():
    # the weekday inside the habit gives no date; the one outside it does (the last Wednesday)
    text = "Choir is every Wednesday, but I missed it on Wednesday with a cold"
    events = turn_events(text, THU)
    assert events.intervals == [(date(2026, 5, 6), date(2026, 5, 6))]
    assert events.day == date(2026, 5, 6)


def test_a_singular_weekday_before_a_noun_is_still_a_day():
    # one occasion ("Sunday lunch at Gran's"), unlike the plural routine: the coming Sunday
    assert _days("we're having Sunday lunch at Gran's", THU) == [(date(2026, 5, 10), date(2026, 5, 10))]


def test_a_weekday_before_a_verb_is_still_a_day():
    # "Friday works" is a verb: Friday stays a date (the coming one)
    assert habit_spans("Friday works for me if you can do the morning") == []
    assert _days("Friday works for me if you can do the morning", THU)[0] == (
        date(2026, 5, 8),
        date(2026, 5, 8),
    )


# ----------------------------------------------------------------------------- several events


def test_two_events_on_different_days_are_both_kept_and_the_occurrence_covers_them():
    text = "we exchanged contracts yesterday and we move in on 30 May"
    events = turn_events(text, MON)
    assert events.intervals == [(date(2026, 5, 3), date(2026, 5, 3)), (date(2026, 5, 30), date(2026, 5, 30))]
    assert events.day is None  # no one day dates the turn
    start, end = events.occurrence or (None, None)
    assert start == datetime(2026, 5, 3, tzinfo=UTC)  # not collapsed onto the first one named
    assert end == datetime(2026, 5, 30, 23, 59, 59, 999999, tzinfo=UTC)


def test_two_expressions_of_the_same_day_are_one_event():
    events = turn_events("tonight is the school disco, so this evening I'm ironing a costume", THU)
    assert events.intervals == [(date(2026, 5, 7), date(2026, 5, 7))]
    assert events.day == date(2026, 5, 7)


def test_an_event_longer_than_a_day_has_an_occurrence_but_no_day():
    events = turn_events("we're camping in the Peaks this weekend", MON)
    assert events.intervals == [(date(2026, 5, 9), date(2026, 5, 10))]
    assert events.day is None
    assert events.occurrence is not None


def test_a_turn_without_a_time_dates_nothing():
    events = turn_events("the new kettle is brilliant", MON)
    assert events.spans == () and events.occurrence is None and events.day is None


# ----------------------------------------------------------------------------- next weekend


@pytest.mark.parametrize(
    "said, want",
    [
        (MON, (date(2026, 5, 9), date(2026, 5, 10))),  # said on a weekday: the coming one
        (THU, (date(2026, 5, 9), date(2026, 5, 10))),
        (SAT, (date(2026, 5, 16), date(2026, 5, 17))),  # said on a weekend: the one after
        (SUN, (date(2026, 5, 16), date(2026, 5, 17))),
    ],
)
def test_next_weekend_is_the_first_weekend_to_start_after_the_day_said(said, want):
    assert _days("the twins have a party next weekend", said) == [want]


# ----------------------------------------------------------------------------- how dates read


def _unit(**over):
    from memlane.records import MemoryUnit

    return MemoryUnit(
        id="u1", bank_id="b", text="x", mentioned_at=datetime(2026, 5, 4, 8, 15, tzinfo=UTC), **over
    )


@pytest.mark.parametrize(
    "over, want",
    [
        ({}, "2026-05-04"),
        (  # a weekend: one event over two days
            {
                "occurred_start": datetime(2026, 5, 9, tzinfo=UTC),
                "occurred_end": datetime(2026, 5, 10, 23, 59, 59, tzinfo=UTC),
            },
            "2026-05-04, event 2026-05-09..2026-05-10",
        ),
        ({"occurred_end": datetime(2026, 6, 1, tzinfo=UTC)}, "2026-05-04, event 2026-06-01"),  # a deadline
        (  # the said time copied into the occurrence, as retain stored a turn without a date
            {
                "occurred_start": datetime(2026, 5, 4, 8, 15, tzinfo=UTC),
                "occurred_end": datetime(2026, 5, 4, 8, 15, tzinfo=UTC),
            },
            "2026-05-04",
        ),
        (
            {
                "occurred_start": datetime(2026, 5, 1, tzinfo=UTC),
                "occurred_end": datetime(2026, 5, 31, tzinfo=UTC),
                "metadata": {EVENTS: [["2026-05-01", "2026-05-01"], ["2026-05-30", "2026-05-31"]]},
            },
            "2026-05-04, events 2026-05-01, 2026-05-30..2026-05-31",
        ),
    ],
)
def test_a_memory_reads_said_date_then_its_events(over, want):
    from memlane.views import memory_dates

    assert memory_dates(_unit(**over)) == want


# ----------------------------------------------------------------------------- through retain


def test_retain_stores_the_said_date_and_shows_the_events_a_turn_dates(memory, tmp_path, capsys):
    from cluster.recall_cmd import print_recall
    from memlane.views import memory_dates, recall_view

    rows = [
        {
            "speaker": "Priya",
            "text": "I start on 6 April at the bakery! Handed my notice in this morning.",
            "timestamp": "2026-03-02T09:30:00Z",
            "session_id": "s1",
        },
        {
            "speaker": "Priya",
            "text": "I miss our Sunday roasts with Ola so much.",
            "timestamp": "2026-04-12T18:00:00Z",  # a Sunday: the rules once dated it 5 April
            "session_id": "s2",
        },
    ]
    memory.retain_file("p", write_jsonl_fixture(tmp_path / "p.jsonl", rows))

    job = memory.recall("p", "Priya's notice at the bakery", max_tokens=2000)
    (notice,) = [m.unit for m in job.memories if "bakery" in m.unit.text]
    assert notice.mentioned_at == datetime(2026, 3, 2, 9, 30, tzinfo=UTC)  # said
    assert notice.occurred_start is not None and notice.occurred_end is not None
    assert (notice.occurred_start.date(), notice.occurred_end.date()) == (date(2026, 3, 2), date(2026, 4, 6))
    assert notice.metadata[EVENTS] == [["2026-03-02", "2026-03-02"], ["2026-04-06", "2026-04-06"]]
    assert memory_dates(notice) == "2026-03-02, events 2026-03-02, 2026-04-06"

    roasts_job = memory.recall("p", "Sunday roasts with Ola", max_tokens=2000)
    (roasts,) = [m.unit for m in roasts_job.memories if "roasts" in m.unit.text]
    assert roasts.mentioned_at == datetime(2026, 4, 12, 18, 0, tzinfo=UTC)
    assert roasts.occurred_start is None and roasts.occurred_end is None
    assert EVENTS not in roasts.metadata
    assert memory_dates(roasts) == "2026-04-12"

    # the CLI's line and the API's fields
    capsys.readouterr()
    print_recall(job)
    print_recall(roasts_job)
    out = capsys.readouterr().out
    assert "[world 2026-03-02, events 2026-03-02, 2026-04-06] Priya: I start on 6 April" in out
    assert "[world 2026-04-12] Priya: I miss our Sunday roasts" in out
    assert "2026-04-05" not in out
    (api,) = [m["unit"] for m in recall_view(job)["memories"] if "bakery" in m["unit"]["text"]]
    assert api["mentioned_at"].startswith("2026-03-02T09:30:00")
    assert api["occurred_start"].startswith("2026-03-02") and api["occurred_end"].startswith("2026-04-06")
    assert api["metadata"][EVENTS] == [["2026-03-02", "2026-03-02"], ["2026-04-06", "2026-04-06"]]


def test_one_dated_event_is_shown_as_the_event(memory, tmp_path):
    from memlane.views import memory_dates

    rows = [
        {
            "speaker": "Jon",
            "text": "The boiler engineer comes on 14 May, finally",
            "timestamp": "2026-05-04T08:00:00Z",
            "session_id": "s1",
        }
    ]
    memory.retain_file("j", write_jsonl_fixture(tmp_path / "j.jsonl", rows))
    (unit,) = [m.unit for m in memory.recall("j", "boiler engineer", max_tokens=2000).memories]
    assert unit.mentioned_at.date() == date(2026, 5, 4)
    assert EVENTS not in unit.metadata
    assert memory_dates(unit) == "2026-05-04, event 2026-05-14"
