"""Tests for memlane.temporal: timestamps, time expressions, query windows, proximity.

Every expected interval below is written out by hand from a calendar. The main reference is
LoCoMo's first session, "1:56 pm on 8 May, 2023", a Monday:

        April 2023              May 2023               June 2023
    Mo Tu We Th Fr Sa Su    Mo Tu We Th Fr Sa Su    Mo Tu We Th Fr Sa Su
                    1  2     1  2  3  4  5  6  7              1  2  3  4
     3  4  5  6  7  8  9     8  9 10 11 12 13 14     5  6  7  8  9 10 11
    10 11 12 13 14 15 16    15 16 17 18 19 20 21    12 13 14 15 16 17 18
    17 18 19 20 21 22 23    22 23 24 25 26 27 28    19 20 21 22 23 24 25
    24 25 26 27 28 29 30    29 30 31                26 27 28 29 30
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from memlane.temporal import (
    TimeSpan,
    find_time_expressions,
    from_epoch,
    parse_timestamp,
    proximity,
    query_interval,
    to_epoch,
)

UTC = UTC
REF = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # Monday
REF_JAN = datetime(2024, 1, 15, 9, 0, tzinfo=UTC)  # Monday, in a (leap-year) winter


def found(text: str, ref: datetime = REF) -> list[tuple[str, str, str]]:
    """(matched text, first day, last day) of each span, as ISO dates."""
    return [
        (s.text, s.start.date().isoformat(), s.end.date().isoformat())
        for s in find_time_expressions(text, ref)
    ]


def one(text: str, ref: datetime = REF) -> tuple[str, str, str]:
    spans = found(text, ref)
    assert len(spans) == 1, spans
    return spans[0]


# ------------------------------------------------------------------ parse_timestamp


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC)),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08 15:56:00+02:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("  2023-05-08T13:56:00.250000  ", datetime(2023, 5, 8, 13, 56, 0, 250000, tzinfo=UTC)),
        ("20230508", datetime(2023, 5, 8, tzinfo=UTC)),  # ISO basic date, not 1970
        (1683554160, datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (1683554160.5, datetime(2023, 5, 8, 13, 56, 0, 500000, tzinfo=UTC)),
        ("1683554160", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("-86400", datetime(1969, 12, 31, tzinfo=UTC)),
        (0, datetime(1970, 1, 1, tzinfo=UTC)),
        (datetime(2023, 5, 8, 13, 56), datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (
            datetime(2023, 5, 8, 9, 56, tzinfo=timezone(timedelta(hours=-4))),
            datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        ),
        (date(2023, 5, 8), datetime(2023, 5, 8, tzinfo=UTC)),
    ],
)
def test_parse_timestamp_accepts(value, expected):
    got = parse_timestamp(value)
    assert got == expected
    assert got.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "value",
    [
        "next tuesdayish",
        "",
        "   ",
        None,
        True,
        False,
        float("nan"),
        float("inf"),
        1683554160000,  # epoch milliseconds: out of range as seconds, not the year 55000
        "1683554160000",
        "13:56 pm on 8 May, 2023",
        "0:10 am on 8 May, 2023",
        "1:61 pm on 8 May, 2023",
        "1:56 pm on 31 February, 2023",
        "1:56 pm on 8 Mayo, 2023",
        "2023-13-01",
        "yesterday",
        "May",
        [2023, 5, 8],
    ],
)
def test_parse_timestamp_rejects_and_names_the_value(value):
    with pytest.raises(ValueError) as info:
        parse_timestamp(value)
    assert f"cannot parse timestamp {value!r}" in str(info.value)


def test_epoch_helpers():
    assert to_epoch(datetime(2023, 5, 8, 13, 56, tzinfo=UTC)) == 1683554160
    assert to_epoch(datetime(2023, 5, 8, 13, 56)) == 1683554160  # naive = UTC
    assert to_epoch(datetime(2023, 5, 8, 15, 56, tzinfo=timezone(timedelta(hours=2)))) == 1683554160
    # The last microsecond of a day stays in that day (floored, no float rounding).
    assert to_epoch(datetime(2023, 5, 8, 23, 59, 59, 999999, tzinfo=UTC)) == 1683590399
    assert to_epoch(datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)) == -1
    assert from_epoch(1683554160) == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert from_epoch(0).tzinfo is not None
    assert from_epoch(-1) == datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)
    with pytest.raises(ValueError):
        from_epoch(10**13)
    with pytest.raises(ValueError):
        from_epoch(float("nan"))


# ------------------------------------------------------------------ find_time_expressions


def test_interval_bounds_are_whole_utc_days_and_offsets_match_the_text():
    text = "I went to a LGBTQ support group yesterday and it was so powerful."
    spans = find_time_expressions(text, REF)
    assert spans == [
        TimeSpan(
            start=datetime(2023, 5, 7, 0, 0, 0, 0, tzinfo=UTC),
            end=datetime(2023, 5, 7, 23, 59, 59, 999999, tzinfo=UTC),
            text="yesterday",
            char_start=32,
            char_end=41,
        )
    ]
    assert text[32:41] == "yesterday"


def test_reference_is_taken_in_utc():
    # 01:00 at +05:00 is still the 7th in UTC; naive references are UTC.
    ref = datetime(2023, 5, 8, 1, 0, tzinfo=timezone(timedelta(hours=5)))
    assert one("today", ref) == ("today", "2023-05-07", "2023-05-07")
    assert one("today", datetime(2023, 5, 8, 1, 0)) == ("today", "2023-05-08", "2023-05-08")


@pytest.mark.parametrize(
    "text, expected",
    [
        # days around the reference
        ("I saw her yesterday.", ("yesterday", "2023-05-07", "2023-05-07")),
        ("I'm so tired today", ("today", "2023-05-08", "2023-05-08")),
        ("Are you free tonight?", ("tonight", "2023-05-08", "2023-05-08")),
        ("I ran this morning", ("this morning", "2023-05-08", "2023-05-08")),
        ("See you tomorrow!", ("tomorrow", "2023-05-09", "2023-05-09")),
        ("We danced last night", ("last night", "2023-05-07", "2023-05-07")),
        ("the day before yesterday", ("the day before yesterday", "2023-05-06", "2023-05-06")),
        ("the day after tomorrow", ("the day after tomorrow", "2023-05-10", "2023-05-10")),
        # calendar weeks (Mon..Sun), months, years, weekends
        ("What a week last week was", ("last week", "2023-05-01", "2023-05-07")),
        ("this week is busy", ("this week", "2023-05-08", "2023-05-14")),
        ("next week we leave", ("next week", "2023-05-15", "2023-05-21")),
        ("I moved last month", ("last month", "2023-04-01", "2023-04-30")),
        ("this month", ("this month", "2023-05-01", "2023-05-31")),
        ("next month", ("next month", "2023-06-01", "2023-06-30")),
        ("last year", ("last year", "2022-01-01", "2022-12-31")),
        ("this year", ("this year", "2023-01-01", "2023-12-31")),
        ("next year", ("next year", "2024-01-01", "2024-12-31")),
        ("last weekend", ("last weekend", "2023-05-06", "2023-05-07")),
        ("this weekend", ("this weekend", "2023-05-13", "2023-05-14")),
        ("next weekend", ("next weekend", "2023-05-13", "2023-05-14")),  # said on a Monday: the coming one
        ("this past weekend", ("this past weekend", "2023-05-06", "2023-05-07")),
        ("We hiked over the weekend", ("the weekend", "2023-05-06", "2023-05-07")),
        ("the week before last", ("the week before last", "2023-04-24", "2023-04-30")),
        ("this time last year", ("this time last year", "2022-05-08", "2022-05-08")),
        # weekdays (the reference is a Monday; a plain weekday in a report is the last one)
        ("Last Friday I painted", ("Last Friday", "2023-05-05", "2023-05-05")),
        ("on Friday we hiked", ("Friday", "2023-05-05", "2023-05-05")),
        ("We met on Sunday", ("Sunday", "2023-05-07", "2023-05-07")),
        ("we talked on monday", ("monday", "2023-05-01", "2023-05-01")),  # strictly before the reference
        ("last Monday", ("last Monday", "2023-05-01", "2023-05-01")),
        ("next Friday", ("next Friday", "2023-05-12", "2023-05-12")),
        ("next Monday", ("next Monday", "2023-05-15", "2023-05-15")),
        ("this Friday", ("this Friday", "2023-05-12", "2023-05-12")),
        ("Saturday night was fun", ("Saturday night", "2023-05-06", "2023-05-06")),
        # N units ago: the day N days or weeks back; the whole month / year N units back
        ("3 days ago", ("3 days ago", "2023-05-05", "2023-05-05")),
        ("twelve days ago", ("twelve days ago", "2023-04-26", "2023-04-26")),
        ("a day ago", ("a day ago", "2023-05-07", "2023-05-07")),
        ("two weeks ago", ("two weeks ago", "2023-04-24", "2023-04-24")),
        ("a week ago", ("a week ago", "2023-05-01", "2023-05-01")),
        ("a couple of days ago", ("a couple of days ago", "2023-05-06", "2023-05-06")),
        ("a couple months ago", ("a couple months ago", "2023-03-01", "2023-03-31")),
        ("a few weeks ago", ("a few weeks ago", "2023-04-17", "2023-04-17")),
        ("a few years ago", ("a few years ago", "2020-01-01", "2020-12-31")),
        ("one year ago", ("one year ago", "2022-01-01", "2022-12-31")),
        ("10 years ago", ("10 years ago", "2013-01-01", "2013-12-31")),
        ("4 years back", ("4 years back", "2019-01-01", "2019-12-31")),
        ("a day or two ago", ("a day or two ago", "2023-05-06", "2023-05-07")),
        # relative offsets without an earlier expression: from the reference
        ("the week before", ("the week before", "2023-05-01", "2023-05-07")),
        ("the day before", ("the day before", "2023-05-07", "2023-05-07")),
        # rolling windows ending at the reference
        ("in the past 3 days", ("the past 3 days", "2023-05-05", "2023-05-08")),
        ("the last two weeks", ("the last two weeks", "2023-04-24", "2023-05-08")),
        ("over the past month", ("the past month", "2023-04-08", "2023-05-08")),
        ("recently", ("recently", "2023-04-08", "2023-05-08")),
        ("I've been busy lately", ("lately", "2023-04-08", "2023-05-08")),
        ("the other day", ("the other day", "2023-05-01", "2023-05-07")),
        # months: without a year, in a report, the most recent one not after the reference
        ("in May", ("May", "2023-05-01", "2023-05-31")),
        ("We moved in April", ("April", "2023-04-01", "2023-04-30")),
        ("We moved in June", ("June", "2022-06-01", "2022-06-30")),
        ("since january", ("since january", "2023-01-01", "2023-05-08")),
        ("last May", ("last May", "2022-05-01", "2022-05-31")),
        ("last April", ("last April", "2023-04-01", "2023-04-30")),
        ("next March", ("next March", "2024-03-01", "2024-03-31")),
        ("this December", ("this December", "2023-12-01", "2023-12-31")),
        ("in May 2023", ("May 2023", "2023-05-01", "2023-05-31")),
        ("in June of 2021", ("June of 2021", "2021-06-01", "2021-06-30")),
        ("Sept 2020", ("Sept 2020", "2020-09-01", "2020-09-30")),
        ("from March to May", ("March to May", "2023-03-01", "2023-05-31")),
        # dates
        ("on 8 May, 2023", ("8 May, 2023", "2023-05-08", "2023-05-08")),
        ("on 27 June, 2023", ("27 June, 2023", "2023-06-27", "2023-06-27")),
        ("She left on the 3rd of March", ("the 3rd of March", "2023-03-03", "2023-03-03")),
        ("June 27, 2023", ("June 27, 2023", "2023-06-27", "2023-06-27")),
        ("He called May 5th", ("May 5th", "2023-05-05", "2023-05-05")),
        ("We met on May 10", ("May 10", "2022-05-10", "2022-05-10")),  # after the reference day
        ("He called June 27th", ("June 27th", "2022-06-27", "2022-06-27")),
        ("Jan. 3, 2020", ("Jan. 3, 2020", "2020-01-03", "2020-01-03")),
        ("Friday, May 5", ("Friday, May 5", "2023-05-05", "2023-05-05")),
        ("on 2023-04-30", ("2023-04-30", "2023-04-30", "2023-04-30")),
        ("on 4/30/2023", ("4/30/2023", "2023-04-30", "2023-04-30")),
        ("on 30/4/2023", ("30/4/2023", "2023-04-30", "2023-04-30")),
        ("on 30.04.2023", ("30.04.2023", "2023-04-30", "2023-04-30")),
        # years in a temporal context
        ("in 2022", ("2022", "2022-01-01", "2022-12-31")),
        ("I've volunteered since 2019", ("since 2019", "2019-01-01", "2023-05-08")),
        ("back in 2010", ("2010", "2010-01-01", "2010-12-31")),
        ("during 1998", ("1998", "1998-01-01", "1998-12-31")),
        ("from 2019 to 2021", ("from 2019 to 2021", "2019-01-01", "2021-12-31")),
        ("in the 1990s", ("1990s", "1990-01-01", "1999-12-31")),
        ("the '80s", ("'80s", "1980-01-01", "1989-12-31")),
        # seasons (meteorological; winter Y = Dec Y-1 .. Feb Y)
        ("last summer", ("last summer", "2022-06-01", "2022-08-31")),
        ("this summer", ("this summer", "2023-06-01", "2023-08-31")),
        # "next" is the first one to start after the reference, as for months and weekdays
        ("next summer", ("next summer", "2023-06-01", "2023-08-31")),
        ("next spring", ("next spring", "2024-03-01", "2024-05-31")),
        ("summer 2022", ("summer 2022", "2022-06-01", "2022-08-31")),
        ("in the summer of 2020", ("summer of 2020", "2020-06-01", "2020-08-31")),
        ("We moved in the fall", ("fall", "2022-09-01", "2022-11-30")),
        ("fall 2021", ("fall 2021", "2021-09-01", "2021-11-30")),
        ("autumn of 2021", ("autumn of 2021", "2021-09-01", "2021-11-30")),
        ("in the spring", ("spring", "2023-03-01", "2023-05-31")),  # in progress
        ("last spring", ("last spring", "2022-03-01", "2022-05-31")),
        ("last winter", ("last winter", "2022-12-01", "2023-02-28")),
        ("winter 2023", ("winter 2023", "2022-12-01", "2023-02-28")),
        ("this winter", ("this winter", "2023-12-01", "2024-02-29")),  # the coming one
        # early / mid / late and the beginning / end of
        ("early May", ("early May", "2023-05-01", "2023-05-10")),
        ("We moved mid-April", ("mid-April", "2023-04-11", "2023-04-20")),
        ("We moved at the end of April", ("the end of April", "2023-04-21", "2023-04-30")),
        ("late 2022", ("late 2022", "2022-09-01", "2022-12-31")),
        ("early last year", ("early last year", "2022-01-01", "2022-04-30")),
        ("We hiked in late summer", ("late summer", "2022-08-01", "2022-08-31")),
        ("since last summer", ("since last summer", "2022-06-01", "2023-05-08")),
        ("after March", ("after March", "2023-04-01", "2023-05-08")),
        # named days
        ("We sang on Christmas", ("Christmas", "2022-12-25", "2022-12-25")),
        ("last Thanksgiving", ("last Thanksgiving", "2022-11-24", "2022-11-24")),
        ("Easter 2023", ("Easter 2023", "2023-04-09", "2023-04-09")),
        ("We dressed up for Halloween", ("Halloween", "2022-10-31", "2022-10-31")),
        ("We danced on New Year's Eve", ("New Year's Eve", "2022-12-31", "2022-12-31")),
        ("We watched fireworks on the fourth of July", ("fourth of July", "2022-07-04", "2022-07-04")),
    ],
)
def test_forms(text, expected):
    assert one(text) == expected


@pytest.mark.parametrize(
    "text, ref, expected",
    [
        # "last winter" said in January: the current winter has not ended, so the one before.
        ("last winter", REF_JAN, ("last winter", "2022-12-01", "2023-02-28")),
        ("this winter", REF_JAN, ("this winter", "2023-12-01", "2024-02-29")),
        ("in the winter", REF_JAN, ("winter", "2023-12-01", "2024-02-29")),
        ("next winter", REF_JAN, ("next winter", "2024-12-01", "2025-02-28")),
        ("winter 2024", REF_JAN, ("winter 2024", "2023-12-01", "2024-02-29")),
        ("last summer", REF_JAN, ("last summer", "2023-06-01", "2023-08-31")),
        ("last winter", datetime(2024, 3, 1, tzinfo=UTC), ("last winter", "2023-12-01", "2024-02-29")),
        # a month without a year across the year boundary, in a report (a plan: test_temporal_tense.py)
        ("We moved in December", REF_JAN, ("December", "2023-12-01", "2023-12-31")),
        ("in January", REF_JAN, ("January", "2024-01-01", "2024-01-31")),
        ("We moved in February", REF_JAN, ("February", "2023-02-01", "2023-02-28")),
        ("last January", REF_JAN, ("last January", "2023-01-01", "2023-01-31")),
        ("last week", REF_JAN, ("last week", "2024-01-08", "2024-01-14")),
        ("last month", REF_JAN, ("last month", "2023-12-01", "2023-12-31")),
        ("We eloped on Feb 29", REF_JAN, ("Feb 29", "2020-02-29", "2020-02-29")),
        ("since Christmas", REF_JAN, ("since Christmas", "2023-12-25", "2024-01-15")),
    ],
)
def test_forms_around_the_year_boundary(text, ref, expected):
    assert one(text, ref) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # LoCoMo's answer style: relative to the date that follows (25 May 2023 is a Thursday,
        # 15 July 2023 a Saturday, 17 July 2023 a Monday)
        ("The week before 9 June 2023", ("The week before 9 June 2023", "2023-06-02", "2023-06-08")),
        ("The sunday before 25 May 2023", ("The sunday before 25 May 2023", "2023-05-21", "2023-05-21")),
        ("the friday before 15 July 2023", ("the friday before 15 July 2023", "2023-07-14", "2023-07-14")),
        ("The weekend before 17 July 2023", ("The weekend before 17 July 2023", "2023-07-15", "2023-07-16")),
        ("the day after 8 May, 2023", ("the day after 8 May, 2023", "2023-05-09", "2023-05-09")),
        ("the month before May 2023", ("the month before May 2023", "2023-04-01", "2023-04-30")),
    ],
)
def test_offsets_from_the_following_date(text, expected):
    assert one(text) == expected


def test_several_expressions_in_order_and_anchored_offsets():
    text = "We went to the concert last Friday, and the day before, we had dinner. Two days later it rained."
    assert found(text) == [
        ("last Friday", "2023-05-05", "2023-05-05"),
        ("the day before", "2023-05-04", "2023-05-04"),
        ("Two days later", "2023-05-06", "2023-05-06"),
    ]
    assert found("In 2022 I moved, and a year later I started pottery.") == [
        ("2022", "2022-01-01", "2022-12-31"),
        ("a year later", "2023-01-01", "2023-12-31"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I may go to the party.",
        "May I ask you something?",
        "you may be right, it may rain",
        "We march on.",
        "March on, soldiers!",
        "We sat on the porch.",
        "The sun is out and the sat nav works.",
        "That was the second time.",
        "I fall asleep early.",
        "Don't fall for it.",
        "I took the fall for him.",
        "Since the fall of Rome, things changed.",
        "Spring is my favorite season.",
        "She has a spring in her step.",
        "Summer said hello to Winter.",
        "a while ago I tried pottery, a long time ago",
        "I go to church every Sunday.",
        "The first Sunday of the month is great.",
        "I have 2 kids and 3 dogs.",
        "around 2000 people came and we raised 2000 dollars",
        "my last week at work was fun",
        "the day before my birthday",
        "I love Christmas.",
        "Hi, Jan! Mar is a name too.",
        "Score was 3-2, version 2.0.1, call 555-1234.",
        "",
    ],
)
def test_no_false_positives(text):
    assert find_time_expressions(text, REF) == []


def test_capitalized_months_still_work_next_to_the_verbs():
    assert found("They may march in May.") == [("May", "2023-05-01", "2023-05-31")]
    assert found("March 3rd was cold; we march again in March.") == [
        ("March 3rd", "2023-03-03", "2023-03-03"),
        ("March", "2023-03-01", "2023-03-31"),
    ]
    assert found("I fall a lot, but in the fall I hiked.") == [("fall", "2022-09-01", "2022-11-30")]


# ------------------------------------------------------------------ query_interval, proximity


def test_query_interval():
    assert query_interval("What did Caroline do last week?", REF) == (
        datetime(2023, 5, 1, tzinfo=UTC),
        datetime(2023, 5, 7, 23, 59, 59, 999999, tzinfo=UTC),
    )
    assert query_interval("What did Melanie paint in May 2023?", REF) == (
        datetime(2023, 5, 1, tzinfo=UTC),
        datetime(2023, 5, 31, 23, 59, 59, 999999, tzinfo=UTC),
    )
    assert query_interval("Where did they go last summer?", REF) == (
        datetime(2022, 6, 1, tzinfo=UTC),
        datetime(2022, 8, 31, 23, 59, 59, 999999, tzinfo=UTC),
    )
    # the union of several expressions
    assert query_interval("Did she hike last Friday or yesterday?", REF) == (
        datetime(2023, 5, 5, tzinfo=UTC),
        datetime(2023, 5, 7, 23, 59, 59, 999999, tzinfo=UTC),
    )
    assert query_interval("When did Caroline go to the LGBTQ support group?", REF) is None
    assert query_interval("What may Caroline paint next?", REF) is None


def test_proximity():
    day = 86400.0
    # overlapping, containing and touching intervals all score 1
    assert proximity(0, 100, 50, 200, day) == 1.0
    assert proximity(0, 1000, 10, 20, day) == 1.0
    assert proximity(0, 100, 100, 200, day) == 1.0
    # a gap of one scale is e^-1 = 0.36787944117144233, on either side
    assert proximity(0, 100, 400, 500, 300) == pytest.approx(0.36787944117144233, rel=1e-12)
    assert proximity(400, 500, 0, 100, 300) == pytest.approx(0.36787944117144233, rel=1e-12)
    # a one-day gap at a two-day scale is e^-0.5 = 0.6065306597126334
    assert proximity(0, day, 2 * day, 3 * day, 2 * day) == pytest.approx(0.6065306597126334)
    assert 0.0 <= proximity(0, 1, 1e12, 1e12 + 1, 1.0) < 1e-300
    assert not math.isnan(proximity(5, 5, 5, 5, 1.0))
    with pytest.raises(ValueError):
        proximity(0, 1, 2, 3, 0)
