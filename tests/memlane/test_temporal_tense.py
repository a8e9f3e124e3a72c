"""Dates said without a year, and relative ones, land where the sentence puts them: a plan,
booking or schedule on the next occurrence, a report on the last (memlane/temporal/tense.py and
periods.pick).

Every sentence here is written for these tests (none is a line of evals/dates/, the set that
measures the rules); every expected date is worked out by hand from a calendar:

        December 2025           January 2026            August 2026
    Mo Tu We Th Fr Sa Su    Mo Tu We Th Fr Sa Su    Mo Tu We Th Fr Sa Su
     1  2  3  4  5  6  7              1  2  3  4                    1  2
     8  9 10 11 12 13 14     5  6  7  8  9 10 11     3  4  5  6  7  8  9
    15 16 17 18 19 20 21    12 13 14 15 16 17 18    10 11 12 13 14 15 16
    22 23 24 25 26 27 28    19 20 21 22 23 24 25    17 18 19 20 21 22 23
    29 30 31                26 27 28 29 30 31       24 25 26 27 28 29 30
                                                    31
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.temporal import find_time_expressions, query_interval
from memlane.temporal.tense import FUTURE, PAST, UNKNOWN, lean_of

AUG = datetime(2026, 8, 12, 18, 0, tzinfo=UTC)  # a Wednesday
NOV = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)  # a Friday
DEC = datetime(2025, 12, 19, 20, 0, tzinfo=UTC)  # a Friday
JAN = datetime(2026, 1, 6, 8, 0, tzinfo=UTC)  # a Tuesday


def spans(text: str, ref: datetime) -> list[tuple[str, str, str]]:
    return [
        (s.text, s.start.date().isoformat(), s.end.date().isoformat())
        for s in find_time_expressions(text, ref)
    ]


@pytest.mark.parametrize(
    "text, ref, expected",
    [
        # the examples this was built for: plans that used to land a year early
        ("I start on 1 September", AUG, ("1 September", "2026-09-01", "2026-09-01")),
        ("We fly on 14 October", AUG, ("14 October", "2026-10-14", "2026-10-14")),
        ("from January", NOV, ("January", "2027-01-01", "2027-01-31")),
        (
            "Yes please, on 25 June.",
            datetime(2025, 5, 28, 11, 22, tzinfo=UTC),
            ("25 June", "2025-06-25", "2025-06-25"),
        ),
        # schedules in the present tense, bookings in the past tense, appointments without a verb
        ("my train leaves at 6 on 3 September", AUG, ("3 September", "2026-09-03", "2026-09-03")),
        ("Grandad's operation is on the 9th", AUG, ("the 9th", "2026-09-09", "2026-09-09")),
        (
            "I reserved a table for the 21st of August",
            AUG,
            ("the 21st of August", "2026-08-21", "2026-08-21"),
        ),
        ("physio on the 4th", AUG, ("the 4th", "2026-09-04", "2026-09-04")),
        ("She's coming to stay in July", AUG, ("July", "2027-07-01", "2027-07-31")),
        ("they promised the refund would land by the 2nd", AUG, ("the 2nd", "2026-09-02", "2026-09-02")),
        # the occurrence in progress serves a plan: later this month, or today
        ("the gig is on the 28th", AUG, ("the 28th", "2026-08-28", "2026-08-28")),
        ("We'll paint the fence in August", AUG, ("August", "2026-08-01", "2026-08-31")),
        ("my appointment is on 12 August", AUG, ("12 August", "2026-08-12", "2026-08-12")),
    ],
)
def test_a_plan_takes_the_next_occurrence(text, ref, expected):
    assert spans(text, ref) == [expected]


@pytest.mark.parametrize(
    "text, ref, expected",
    [
        ("We flew home on 14 October", NOV, ("14 October", "2026-10-14", "2026-10-14")),
        ("I sold the van in January", NOV, ("January", "2026-01-01", "2026-01-31")),
        ("The plumber finally turned up on the 3rd", NOV, ("the 3rd", "2026-11-03", "2026-11-03")),
        ("The plumber finally turned up on the 23rd", NOV, ("the 23rd", "2026-10-23", "2026-10-23")),
        ("she was born on 30 November", NOV, ("30 November", "2025-11-30", "2025-11-30")),
        ("I've been vegan since March", NOV, ("since March", "2026-03-01", "2026-11-20")),
        ("we had snow over the weekend", NOV, ("the weekend", "2026-11-14", "2026-11-15")),
        ("My phone died on Wednesday", NOV, ("Wednesday", "2026-11-18", "2026-11-18")),
    ],
)
def test_a_report_still_takes_the_last_occurrence(text, ref, expected):
    assert spans(text, ref) == [expected]


@pytest.mark.parametrize(
    "text, ref, expected",
    [
        # said in December about January, in January about December
        ("The party is on 3 January", DEC, ("3 January", "2026-01-03", "2026-01-03")),
        ("We hosted the whole family on 28 December", JAN, ("28 December", "2025-12-28", "2025-12-28")),
        ("rent goes out on the 2nd", DEC, ("the 2nd", "2026-01-02", "2026-01-02")),
        ("the boiler packed up on the 30th", JAN, ("the 30th", "2025-12-30", "2025-12-30")),
        ("I'm going skiing in March", DEC, ("March", "2026-03-01", "2026-03-31")),
        ("I went skiing in March", DEC, ("March", "2025-03-01", "2025-03-31")),
        ("We're back at work on Monday", DEC, ("Monday", "2025-12-22", "2025-12-22")),
        (
            "Christmas Eve is on a Wednesday, we're doing dinner on Christmas",
            DEC,
            ("Christmas", "2025-12-25", "2025-12-25"),
        ),
        ("We opened presents on Christmas", JAN, ("Christmas", "2025-12-25", "2025-12-25")),
    ],
)
def test_around_the_year_boundary(text, ref, expected):
    assert spans(text, ref)[-1] == expected


@pytest.mark.parametrize(
    "text, ref, expected",
    [
        ("The fence is getting fixed in four days", AUG, ("in four days", "2026-08-16", "2026-08-16")),
        ("results come out in a fortnight", AUG, ("in a fortnight", "2026-08-26", "2026-08-26")),
        ("we move in two weeks' time", AUG, ("in two weeks' time", "2026-08-26", "2026-08-26")),
        ("the tiles arrive three days from now", AUG, ("three days from now", "2026-08-15", "2026-08-15")),
        ("I quit a fortnight ago", AUG, ("a fortnight ago", "2026-07-29", "2026-07-29")),
        ("she rang three weeks ago", AUG, ("three weeks ago", "2026-07-22", "2026-07-22")),
        ("I'm off to Wales on Saturday", AUG, ("Saturday", "2026-08-15", "2026-08-15")),
        ("it bucketed down on Saturday", AUG, ("Saturday", "2026-08-08", "2026-08-08")),
        # said on a Sunday: this weekend is the one ending today
        (
            "this weekend has flown by",
            datetime(2026, 8, 16, 21, 0, tzinfo=UTC),
            ("this weekend", "2026-08-15", "2026-08-16"),
        ),
        ("any plans for the weekend?", AUG, ("the weekend", "2026-08-15", "2026-08-16")),
        (
            "the rent's due on the 1st of next month",
            AUG,
            ("the 1st of next month", "2026-09-01", "2026-09-01"),
        ),
        (
            "this Tuesday suits me",
            datetime(2026, 8, 15, 9, 0, tzinfo=UTC),
            ("this Tuesday", "2026-08-18", "2026-08-18"),
        ),
    ],
)
def test_relative_expressions(text, ref, expected):
    assert spans(text, ref) == [expected]


def test_a_duration_in_a_report_is_not_a_date():
    assert spans("I finished the whole series in three days", AUG) == []
    assert spans("We walked it in a week last summer", AUG) == [("last summer", "2025-06-01", "2025-08-31")]


def test_a_named_weekday_picks_the_month_it_falls_in():
    # 4 September 2026 is a Friday; 4 August a Tuesday
    assert spans("the tasting is on Friday the 4th", AUG) == [("Friday the 4th", "2026-09-04", "2026-09-04")]
    assert spans("we signed on Tuesday the 4th", AUG) == [("Tuesday the 4th", "2026-08-04", "2026-08-04")]
    assert spans("Fri 4th works for me", AUG) == [("Fri 4th", "2026-09-04", "2026-09-04")]


@pytest.mark.parametrize(
    "text",
    [
        "that was the 3rd time this week",
        "we were down 10 in the 4th and came back",
        "the 19th century was grim",
        "novels set in the 17th and 18th centuries",
        "the 5th may be the better date",
        "I finished it in just 30 days",
    ],
)
def test_ordinals_and_durations_that_are_not_dates(text):
    assert [s for s in spans(text, AUG) if s[0] != "this week"] == []


def test_a_misspelt_month_keeps_the_text_as_written():
    (span,) = find_time_expressions("the scan is on septmber 3rd", AUG)
    assert (span.text, span.char_start, span.char_end) == ("septmber 3rd", 15, 27)
    assert span.start.date().isoformat() == "2026-09-03"
    assert spans("we moved out on febuary 2nd and came back on Agust 9th", AUG) == [
        ("febuary 2nd", "2026-02-02", "2026-02-02"),
        ("Agust 9th", "2026-08-09", "2026-08-09"),
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I booked the vet for the 5th", FUTURE),  # a booking in the past tense is a plan
        ("The wedding got moved to the 5th", FUTURE),
        ("We got the keys on the 5th", PAST),
        ("The keys are ready on the 5th", FUTURE),
        ("We got the letter on the 5th and we'll reply soon", PAST),  # the expression's clause decides
        ("We'll reply soon, we got the letter on the 5th", PAST),
        ("We were at Mum's on the 5th", PAST),  # a verb outweighs a possessive 's
        ("Nan's on the 5th", FUTURE),
        ("on the 5th", UNKNOWN),
    ],
)
def test_the_lean_of_a_sentence(text, expected):
    at = text.index("the 5th")
    assert lean_of(text, at, at + len("the 5th")) == expected


def test_a_question_reads_its_own_tense():
    assert query_interval("What did I do on 3 May?", AUG) == (
        datetime(2026, 5, 3, tzinfo=UTC),
        datetime(2026, 5, 3, 23, 59, 59, 999999, tzinfo=UTC),
    )
    assert query_interval("What am I doing on 3 May?", AUG) == (
        datetime(2027, 5, 3, tzinfo=UTC),
        datetime(2027, 5, 3, 23, 59, 59, 999999, tzinfo=UTC),
    )
