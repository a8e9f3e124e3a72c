"""Calendar resolution of each time-expression rule's match: from a regex match and the
reference date to an inclusive date range (the rules are in memlane/temporal/rules.py, the
reasons for each reading in the docstring of memlane/temporal/parse.py)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Callable

from . import periods as P
from .tense import PAST, TenseReader
from .vocabulary import NUM_WORDS


def number(text: str) -> int:
    """The count a number phrase names ("3", "a couple of", "twelve")."""
    words = text.lower().split()
    for w in words:
        if w in ("couple", "few", "several"):
            return NUM_WORDS[w]
    w = words[0]
    return int(w) if w.isdigit() else NUM_WORDS[w]


def direction(text: str | None) -> int | None:
    """-1 for last / this past / past, 0 for this, +1 for next / coming / this coming."""
    if text is None:
        return None
    t = text.lower()
    if "past" in t or t == "last":
        return -1
    if "coming" in t or t == "next":
        return 1
    return 0


def unit_of(word: str) -> str:
    w = word.lower()
    return "day" if w in ("night", "morning") else w


def shift(unit: str, pivot: date, n: int) -> P.DateRange:
    """The ``unit``-sized calendar period ``n`` units after ``pivot`` (negative: before)."""
    if unit == "day":
        return P.day_range(pivot + timedelta(days=n))
    if unit == "week":
        return P.week_range(pivot + timedelta(weeks=n))
    if unit == "weekend":
        return P.weekend_range(pivot + timedelta(weeks=n))
    if unit == "month":
        return P.month_range(*P.shift_month(pivot.year, pivot.month, n))
    if unit == "year":
        return P.year_range(pivot.year + n)
    if unit == "decade":
        return P.year_range(pivot.year + 10 * n)
    raise ValueError(unit)


def two_digit_year(yy: int, d: date) -> int:
    year = 2000 + yy
    return year if year <= d.year + 10 else year - 100


def checked_day(y: int, m: int, day: int) -> P.DateRange | None:
    try:
        return P.day_range(date(y, m, day))
    except ValueError:
        return None


# ---------------------------------------------------------------- resolvers
# Each takes (match, reference datetime, reference date, anchor range or None, the text's tense
# reader) and returns an inclusive date range, or None when the match names no real date.


Resolver = Callable[[re.Match, datetime, date, "P.DateRange | None", TenseReader], "P.DateRange | None"]


def lean(m: re.Match, tense: TenseReader, group: str | None = None) -> int:
    """The lean of the sentence at the match (its ``group`` when given)."""
    start, end = m.span(group) if group else m.span()
    return tense.lean(start, end)


def weekday_of(name: str | None) -> int | None:
    """0..6 for a weekday name or abbreviation ("Thurs", "sat"), None for None."""
    return None if name is None else P.WEEKDAY_INDEX[WEEKDAY_ABBR.get(name.lower().rstrip("."), name.lower())]


WEEKDAY_ABBR = {
    a: full
    for full, abbrs in (
        ("monday", "mon"),
        ("tuesday", "tue tues"),
        ("wednesday", "wed weds"),
        ("thursday", "thu thur thurs"),
        ("friday", "fri"),
        ("saturday", "sat"),
        ("sunday", "sun"),
    )
    for a in abbrs.split()
}


def resolve_relday(m, ref, d, anchor, tense):
    w = " ".join(m["w"].lower().split())
    if w == "the day before yesterday":
        return P.day_range(d - timedelta(days=2))
    if w == "the day after tomorrow":
        return P.day_range(d + timedelta(days=2))
    if w in ("yesterday", "last night"):
        return P.day_range(d - P.ONE_DAY)
    if w in ("tomorrow", "tmrw"):
        return P.day_range(d + P.ONE_DAY)
    return P.day_range(d)  # today, tonight, this morning/afternoon/evening


def resolve_ago(m, ref, d, anchor, tense):
    """N hours/days/weeks/fortnights ago: that day (a week is 7 days back, as "a week ago"
    is said of a day); N months/years/decades ago: that whole calendar month/year/decade."""
    unit = m["unit"].lower()
    ranges = []
    for g in ("n", "n2"):
        if m[g] and m[g].lower() != "so":
            n = number(m[g])
            if unit == "hour":
                ranges.append(P.day_range((ref - timedelta(hours=n)).date()))
            elif unit in DAY_UNITS:
                ranges.append(P.day_range(d - timedelta(days=n * DAY_UNITS[unit])))
            else:
                ranges.append(shift(unit, d, -n))
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


DAY_UNITS = {"day": 1, "week": 7, "fortnight": 14}


def resolve_in_offset(m, ref, d, anchor, tense):
    """In N days/weeks/fortnights (or N weeks from now): that day; in N months/years: that
    calendar month/year. In a report it is a duration ("I read it in two days"): no date."""
    if lean(m, tense) == PAST:
        return None
    n, unit = number(m["n"]), m["unit"].lower()
    if unit in DAY_UNITS:
        return P.day_range(d + timedelta(days=n * DAY_UNITS[unit]))
    return shift(unit, d, n)


def resolve_rolling(m, ref, d, anchor, tense):
    n = number(m["n"]) if m["n"] else 1
    unit = m["unit"].lower()
    if unit == "day":
        start = d - timedelta(days=n)
    elif unit == "week":
        start = d - timedelta(weeks=n)
    elif unit == "month":
        start = P.shift_months_clamped(d, -n)
    else:
        start = P.shift_months_clamped(d, -12 * n)
    return start, d


def resolve_relunit(m, ref, d, anchor, tense):
    step = direction(m["rel"])
    assert step is not None  # the rule's pattern requires the "rel" group
    unit = m["unit"].lower()
    if unit == "weekend" and step == 1:
        # the first weekend to start after the reference, as "next Friday" is the first Friday:
        # said Monday to Friday, the coming one; said on a weekend, the one after
        return P.weekend_range(d if d.weekday() < 5 else d + timedelta(weeks=1))
    return shift(unit, d, step)


def resolve_before_last(m, ref, d, anchor, tense):
    return shift(m["unit"].lower(), d, -2 if "last" in m["dir"].lower() else 2)


def resolve_this_time(m, ref, d, anchor, tense):
    k = -1 if m["rel"].lower() == "last" else 1
    unit = m["unit"].lower()
    if unit == "week":
        return P.day_range(d + timedelta(weeks=k))
    return P.day_range(P.shift_months_clamped(d, k * (1 if unit == "month" else 12)))


def resolve_weekday(m, ref, d, anchor, tense):
    wd = P.WEEKDAY_INDEX[m["wd"].lower()]
    k = direction(m["rel"])
    if k == 0:  # this week's; a plan's "this Friday" said on the Saturday after is the coming one
        this = P.week_range(d)[0] + timedelta(days=wd)
        if this < d and lean(m, tense) != PAST:
            this += timedelta(weeks=1)
        return P.day_range(this)
    if k == 1:
        return P.day_range(d + timedelta(days=(wd - d.weekday()) % 7 or 7))
    if k == -1:
        return P.day_range(d - timedelta(days=(d.weekday() - wd) % 7 or 7))
    return P.pick(P.weekday_candidates(wd, d), d, lean(m, tense))  # a plain "Friday"


def resolve_the_weekend(m, ref, d, anchor, tense):
    # a report: the weekend in progress, else the one just gone; a plan: the coming one
    return P.pick(P.weekend_candidates(d), d, lean(m, tense, "b"))


def resolve_month_rel(m, ref, d, anchor, tense):
    month = P.month_number(m["mon"])
    k = direction(m["rel"])
    if k == -1:
        return P.month_range(*P.latest_month_not_after(month, d, strictly_before=True))
    if k == 1:
        return P.month_range(*P.earliest_month_after(month, d))
    return P.month_range(d.year, month)


def resolve_month_ctx(m, ref, d, anchor, tense):
    # "since June" and "after June" look back whatever the sentence's tense
    k = PAST if m["ctx"].lower() in ("since", "after") else lean(m, tense, "b")
    return P.pick(P.month_candidates(P.month_number(m["mon"]), d), d, k)


def resolve_month_year(m, ref, d, anchor, tense):
    return P.month_range(int(m["year"]), P.month_number(m["mon"]))


def resolve_month_span(m, ref, d, anchor, tense):
    m1, m2 = P.month_number(m["m1"]), P.month_number(m["m2"])
    if m["year"]:
        y2 = int(m["year"])
    else:  # the span that the sentence means: the one that ends next (a plan) or last ended
        ends = [P.month_range(y, m2) for y in (d.year - 1, d.year, d.year + 1)]
        spans = [(P.month_range(e[0].year - (m1 > m2), m1)[0], e[1]) for e in ends]
        chosen = P.pick(spans, d, lean(m, tense, "b"))
        if chosen is None:
            return None
        y2 = chosen[1].year
    y1 = y2 if m1 <= m2 else y2 - 1
    return P.month_range(y1, m1)[0], P.month_range(y2, m2)[1]


def resolve_day_month(m, ref, d, anchor, tense):
    month, day = P.month_number(m["mon"]), int(m["day"])
    if m["year"]:
        return checked_day(int(m["year"]), month, day)
    candidates = P.date_candidates(month, day, d, weekday_of(m["wd"]))
    return P.pick(candidates, d, lean(m, tense))


def resolve_day_of_month(m, ref, d, anchor, tense):
    """ "the 9th", "Thursday the 4th", "Sat 28th": the day of this, the next or the last month
    that the sentence means (and that falls on the weekday named)."""
    day = int(m["day"])
    if not 1 <= day <= 31:
        return None
    k = direction(m["rel"])
    if k is not None:  # the 1st of next month
        return checked_day(*P.shift_month(d.year, d.month, k), day)
    return P.pick(P.day_of_month_candidates(day, d, weekday_of(m["wd"])), d, lean(m, tense))


def resolve_numeric(m, ref, d, anchor, tense):
    if m["iy"]:
        return checked_day(int(m["iy"]), int(m["im"]), int(m["id"]))
    if m["ey"]:  # 08.05.2023: day first, as everywhere dots are used
        return checked_day(int(m["ey"]), int(m["em"]), int(m["ed"]))
    a, b, c = int(m["a"]), int(m["b2"]), m["c"]
    year = int(c) if len(c) == 4 else two_digit_year(int(c), d)
    # US month/day order unless the first number cannot be a month.
    return checked_day(year, b, a) if a > 12 else checked_day(year, a, b)


def resolve_year(m, ref, d, anchor, tense):
    return P.year_range(int(m["y"]))


def resolve_year_span(m, ref, d, anchor, tense):
    y1, y2 = int(m["y1"]), int(m["y2"])
    return (P.year_range(y1)[0], P.year_range(y2)[1]) if y1 <= y2 else None


def resolve_decade(m, ref, d, anchor, tense):
    if m["c"]:
        return P.decade_range(int(m["c"]))
    s = int(m["s"].lstrip("'’"))
    first = (d.year // 100) * 100 + s
    return P.decade_range(first if first <= d.year else first - 100)


def resolve_season_year(m, ref, d, anchor, tense):
    year = int(m["y"]) if m["y"] else two_digit_year(int(m["y2"]), d)
    return P.season_range(m["s"].lower(), year)


def resolve_season_rel(m, ref, d, anchor, tense):
    season, k = m["s"].lower(), direction(m["rel"])
    if k == -1:
        return P.season_last(season, d)
    if k == 1:
        return P.season_next(season, d)
    return P.season_this(season, d)


def resolve_season_ctx(m, ref, d, anchor, tense):
    seasons = sorted(P.season_range(m["s"].lower(), y) for y in range(d.year - 2, d.year + 3))
    return P.pick(seasons, d, lean(m, tense, "b"))


def resolve_holiday(m, ref, d, anchor, tense):
    name = P.canonical_holiday(m["h"])
    if m["y"]:
        return P.day_range(P.holiday_date(name, int(m["y"])))
    k = direction(m["rel"])
    if k is None and not m["ctx"]:
        return None  # "I love Christmas" is not a time
    if k == -1:
        return P.day_range(P.holiday_latest(name, d, strictly_before=True))
    if k == 1:
        return P.day_range(P.holiday_next(name, d))
    if k == 0:
        return P.day_range(P.holiday_date(name, d.year))
    days = [P.day_range(P.holiday_date(name, y)) for y in (d.year - 1, d.year, d.year + 1)]
    return P.pick(days, d, lean(m, tense, "b"))


def resolve_vague(m, ref, d, anchor, tense):
    if m["w"].lower().startswith("the"):  # the other day
        return d - timedelta(days=7), d - P.ONE_DAY
    return d - timedelta(days=30), d  # recently / lately


def resolve_anchored(m, ref, d, anchor, tense):
    """Offsets from the previous expression in the same text ("the day before", "two weeks
    later"), or from the reference when there is none."""
    start, end = anchor if anchor is not None else (d, d)
    n = number(m["n"]) if "n" in m.re.groupindex and m["n"] else 1
    direction = m["dir"].lower()
    if direction in ("before", "earlier", "previous", "prior"):
        return shift(unit_of(m["unit"]), start, -n)
    return shift(unit_of(m["unit"]), end, n)


def resolve_before_after(m, ref, d, anchor, tense):
    """ "the <unit> before/after" X: the day, the 7 days, the weekend, the named weekday, the
    calendar month or year just before X's start or just after X's end (X = ``anchor``, else
    the reference day). A week is the 7 days next to X, not a calendar week: "the week before
    9 June" means Jun 2-8."""
    start, end = anchor if anchor is not None else (d, d)
    unit = unit_of(m["unit"])
    before = m["dir"].lower() == "before"
    if unit == "day":
        return P.day_range(start - P.ONE_DAY if before else end + P.ONE_DAY)
    if unit == "week":
        if before:
            return start - timedelta(days=7), start - P.ONE_DAY
        return end + P.ONE_DAY, end + timedelta(days=7)
    if unit in ("month", "year"):
        return shift(unit, start if before else end, -1 if before else 1)
    if unit == "weekend":
        if before:  # the last Sunday strictly before X, and its Saturday
            sunday = start - timedelta(days=(start.weekday() - 6) % 7 or 7)
            return sunday - P.ONE_DAY, sunday
        saturday = end + timedelta(days=(5 - end.weekday()) % 7 or 7)
        return saturday, saturday + P.ONE_DAY
    wd = P.WEEKDAY_INDEX[unit]
    if before:
        return P.day_range(start - timedelta(days=(start.weekday() - wd) % 7 or 7))
    return P.day_range(end + timedelta(days=(wd - end.weekday()) % 7 or 7))
