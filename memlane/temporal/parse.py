"""Time expressions in free text, resolved against a reference time.

``find_time_expressions`` runs on every retained chat turn and on every recall query, so it is
built from regular expressions and calendar rules only:

- Speed (measured on the 2-core dev machine, Python 3.11): dateparser's ``search_dates`` did
  about 1,100 sentences/s and read "We" and "I may go" as dates, so it is not used at all, not
  even as a fallback. These rules do 45,000-54,000 sentences/s on LoCoMo-like chat turns (about
  one in two with a time expression) and about 27,000/s when every sentence has one or two;
  the target was 5,000/s. ``tests/memlane/test_temporal.py::test_throughput`` guards the bar.
- Gating: each rule names words of which one must occur for it to match (or needs a digit);
  a turn is split into lowercase words once, and a rule's regex runs only when one of its
  words is there. Most turns contain no time word and cost one ``findall`` and a set test.
- Precision over recall: a word that is also a common verb or noun ("may", "march", "fall",
  "spring", "sat", "sun", "second") yields a span only in a clear temporal context (a
  capitalized month after a preposition or next to a number, a season after a preposition or
  next to a year). A missed expression costs recall a little; a wrong interval misleads it.

Resolution rules (all relative to the reference date, in UTC, day granularity; the reasons are
in ``periods.py``): "last Friday" and a plain "Friday" are the most recent Friday strictly
before the reference (chat is mostly past tense), "this Friday" the Friday of the reference's
Monday-based week; "next Friday", "next June", "next summer" are the first such day, month or
season to start after the reference (dateparser's reading; "the one after the coming one" is
the other common reading, and no rule serves both); "last summer" is the latest summer that
ended before the reference; a month or date without a year is the most recent one not after
the reference; "N weeks/months/years ago" is the whole calendar week/month/year N units back;
"the past N days" is the rolling window ending at the reference; "the day/week before" is
relative to the previous expression in the text (else the reference), or to the date right
after it ("the week before 9 June 2023" = Jun 2-8); "since X" and "after X" reach up to the
reference; "early/mid/late X" and "the beginning/middle/end of X" keep a third of X.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Callable

from . import periods as P
from .timestamps import as_utc, parse_timestamp


@dataclass(frozen=True)
class TimeSpan:
    """A time expression found in a text: its closed UTC interval [start, end] (end is the last
    microsecond of the period), the matched text and its character offsets (``text ==
    source[char_start:char_end]``)."""

    start: datetime
    end: datetime
    text: str
    char_start: int
    char_end: int


# ---------------------------------------------------------------- vocabulary

_NUM_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "a": 1, "an": 1, "couple": 2, "few": 3, "several": 3,
}
# Longest alternatives first so the regex engine tries "a couple of" before "a".
_NUM = (
    r"(?:\d{1,3}|a\s+couple(?:\s+of)?|couple(?:\s+of)?|a\s+few|few|several|"
    r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|"
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|an|a)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
# "May" and "March" are common verbs: only the capitalized forms are months.
_MONTH_FULL = (
    r"(?:january|february|april|june|july|august|september|october|november|december|"
    r"(?-i:May|March))\b"
)
_MONTH_ABBR = r"(?-i:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\b\.?"
_MONTH_ANY = rf"(?:{_MONTH_FULL}|{_MONTH_ABBR})"
_SEASON = r"(?:spring|summer|fall|autumn|winter)"
_YEAR = r"(?:19\d\d|20\d\d|2100)"  # bare years in running text: 1900-2100 only
_YEAR_EXPLICIT = r"(?:1[89]\d\d|20\d\d|21\d\d)"  # the year of an explicit date
_REL = r"(?P<rel>this\s+past|this\s+coming|last|this|next|coming|past)"
# "my last week at work", "the last summer of college" name some other period, not the
# calendar one; lookbehinds must be fixed-width, hence one per word.
_NOT_POSS = "".join(
    rf"(?<!\b{w}\s)" for w in ("the", "my", "his", "her", "our", "their", "your", "its")
)
# An offset like "the day before" is anchored to an event we cannot resolve when a noun phrase
# or clause follows ("the day before my birthday", "the day after I left").
_NO_EVENT_AFTER = r"(?!\s+\w)"
_NOT_QUANTITY = (
    r"(?!\s*(?:%|percent|people|persons|dollars|usd|euros|pounds|yen|words|pages|steps|"
    r"calories|points|miles|km|meters|metres|feet|times|units|items|followers|likes|views|"
    r"votes|copies|students|members|users|kg|lbs)\b)"
)
_HOLIDAYS = (
    r"(?:christmas\s+eve|christmas(?:\s+day)?|xmas|new\s+year['’]?s?\s+eve|"
    r"new\s+year['’]?s?(?:\s+day)?|halloween|thanksgiving|easter(?:\s+sunday)?|"
    r"valentine['’]?s?(?:\s+day)?|(?:the\s+)?(?:fourth|4th)\s+of\s+july|july\s+(?:fourth|4th)|"
    r"(?:st\.?|saint)\s+patrick['’]?s(?:\s+day)?|mother['’]?s\s+day|father['’]?s\s+day)"
)

_WORDS = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")


def _num(text: str) -> int:
    words = text.lower().split()
    for w in words:
        if w in ("couple", "few", "several"):
            return _NUM_WORDS[w]
    w = words[0]
    return int(w) if w.isdigit() else _NUM_WORDS[w]


def _rel(text: str | None) -> int | None:
    """-1 for last / this past / past, 0 for this, +1 for next / coming / this coming."""
    if text is None:
        return None
    t = text.lower()
    if "past" in t or t == "last":
        return -1
    if "coming" in t or t == "next":
        return 1
    return 0


def _unit(word: str) -> str:
    w = word.lower()
    return "day" if w in ("night", "morning") else w


def _shift(unit: str, pivot: date, n: int) -> P.DateRange:
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


def _two_digit_year(yy: int, d: date) -> int:
    year = 2000 + yy
    return year if year <= d.year + 10 else year - 100


def _date(y: int, m: int, day: int) -> P.DateRange | None:
    try:
        return P.day_range(date(y, m, day))
    except ValueError:
        return None


# ---------------------------------------------------------------- resolvers
# Each takes (match, reference datetime, reference date, anchor range or None) and returns an
# inclusive date range, or None when the match names no real date (April 31).

Resolver = Callable[[re.Match, datetime, date, "P.DateRange | None"], "P.DateRange | None"]


def _r_relday(m, ref, d, anchor):
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


def _r_ago(m, ref, d, anchor):
    unit = m["unit"].lower()
    ranges = []
    for g in ("n", "n2"):
        if m[g] and m[g].lower() != "so":
            n = _num(m[g])
            if unit == "hour":
                ranges.append(P.day_range((ref - timedelta(hours=n)).date()))
            else:
                ranges.append(_shift(unit, d, -n))
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def _r_rolling(m, ref, d, anchor):
    n = _num(m["n"]) if m["n"] else 1
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


def _r_relunit(m, ref, d, anchor):
    return _shift(m["unit"].lower(), d, _rel(m["rel"]))


def _r_before_last(m, ref, d, anchor):
    return _shift(m["unit"].lower(), d, -2 if "last" in m["dir"].lower() else 2)


def _r_this_time(m, ref, d, anchor):
    k = -1 if m["rel"].lower() == "last" else 1
    unit = m["unit"].lower()
    if unit == "week":
        return P.day_range(d + timedelta(weeks=k))
    return P.day_range(P.shift_months_clamped(d, k * (1 if unit == "month" else 12)))


def _r_weekday(m, ref, d, anchor):
    wd = P.WEEKDAY_INDEX[m["wd"].lower()]
    k = _rel(m["rel"])
    if k == 0:
        return P.day_range(P.week_range(d)[0] + timedelta(days=wd))
    if k == 1:
        return P.day_range(d + timedelta(days=(wd - d.weekday()) % 7 or 7))
    return P.day_range(d - timedelta(days=(d.weekday() - wd) % 7 or 7))


def _r_the_weekend(m, ref, d, anchor):
    # Past-tense chat: the weekend in progress, else the one just gone.
    return P.weekend_range(d if d.weekday() >= 5 else d - timedelta(weeks=1))


def _r_month_rel(m, ref, d, anchor):
    month = P.month_number(m["mon"])
    k = _rel(m["rel"])
    if k == -1:
        return P.month_range(*P.latest_month_not_after(month, d, strictly_before=True))
    if k == 1:
        return P.month_range(*P.earliest_month_after(month, d))
    return P.month_range(d.year, month)


def _r_month_ctx(m, ref, d, anchor):
    return P.month_range(*P.latest_month_not_after(P.month_number(m["mon"]), d))


def _r_month_year(m, ref, d, anchor):
    return P.month_range(int(m["year"]), P.month_number(m["mon"]))


def _r_month_span(m, ref, d, anchor):
    m1, m2 = P.month_number(m["m1"]), P.month_number(m["m2"])
    y2 = int(m["year"]) if m["year"] else P.latest_month_not_after(m2, d)[0]
    y1 = y2 if m1 <= m2 else y2 - 1
    return P.month_range(y1, m1)[0], P.month_range(y2, m2)[1]


def _r_day_month(m, ref, d, anchor):
    month, day = P.month_number(m["mon"]), int(m["day"])
    if m["year"]:
        return _date(int(m["year"]), month, day)
    found = P.latest_date_not_after(month, day, d)
    return None if found is None else P.day_range(found)


def _r_numeric(m, ref, d, anchor):
    if m["iy"]:
        return _date(int(m["iy"]), int(m["im"]), int(m["id"]))
    if m["ey"]:  # 08.05.2023: day first, as everywhere dots are used
        return _date(int(m["ey"]), int(m["em"]), int(m["ed"]))
    a, b, c = int(m["a"]), int(m["b2"]), m["c"]
    year = int(c) if len(c) == 4 else _two_digit_year(int(c), d)
    # US month/day order unless the first number cannot be a month.
    return _date(year, b, a) if a > 12 else _date(year, a, b)


def _r_year(m, ref, d, anchor):
    return P.year_range(int(m["y"]))


def _r_year_span(m, ref, d, anchor):
    y1, y2 = int(m["y1"]), int(m["y2"])
    return (P.year_range(y1)[0], P.year_range(y2)[1]) if y1 <= y2 else None


def _r_decade(m, ref, d, anchor):
    if m["c"]:
        return P.decade_range(int(m["c"]))
    s = int(m["s"].lstrip("'’"))
    first = (d.year // 100) * 100 + s
    return P.decade_range(first if first <= d.year else first - 100)


def _r_season_year(m, ref, d, anchor):
    year = int(m["y"]) if m["y"] else _two_digit_year(int(m["y2"]), d)
    return P.season_range(m["s"].lower(), year)


def _r_season_rel(m, ref, d, anchor):
    season, k = m["s"].lower(), _rel(m["rel"])
    if k == -1:
        return P.season_last(season, d)
    if k == 1:
        return P.season_next(season, d)
    return P.season_this(season, d)


def _r_season_ctx(m, ref, d, anchor):
    return P.season_recent(m["s"].lower(), d)


def _r_holiday(m, ref, d, anchor):
    name = P.canonical_holiday(m["h"])
    if m["y"]:
        return P.day_range(P.holiday_date(name, int(m["y"])))
    k = _rel(m["rel"])
    if k is None and not m["ctx"]:
        return None  # "I love Christmas" is not a time
    if k == -1:
        return P.day_range(P.holiday_latest(name, d, strictly_before=True))
    if k == 1:
        return P.day_range(P.holiday_next(name, d))
    if k == 0:
        return P.day_range(P.holiday_date(name, d.year))
    return P.day_range(P.holiday_latest(name, d))


def _r_vague(m, ref, d, anchor):
    if m["w"].lower().startswith("the"):  # the other day
        return d - timedelta(days=7), d - P.ONE_DAY
    return d - timedelta(days=30), d  # recently / lately


def _r_anchored(m, ref, d, anchor):
    """Offsets from the previous expression in the same text ("the day before", "two weeks
    later"), or from the reference when there is none."""
    start, end = anchor if anchor is not None else (d, d)
    n = _num(m["n"]) if "n" in m.re.groupindex and m["n"] else 1
    direction = m["dir"].lower()
    if direction in ("before", "earlier", "previous", "prior"):
        return _shift(_unit(m["unit"]), start, -n)
    return _shift(_unit(m["unit"]), end, n)


def _r_before_after(m, ref, d, anchor):
    """"the <unit> before/after" X: the day, the 7 days, the weekend, the named weekday, the
    calendar month or year just before X's start or just after X's end (X = ``anchor``, else
    the reference day). A week is the 7 days next to X, not a calendar week: "the week before
    9 June" means Jun 2-8."""
    start, end = anchor if anchor is not None else (d, d)
    unit = _unit(m["unit"])
    before = m["dir"].lower() == "before"
    if unit == "day":
        return P.day_range(start - P.ONE_DAY if before else end + P.ONE_DAY)
    if unit == "week":
        if before:
            return start - timedelta(days=7), start - P.ONE_DAY
        return end + P.ONE_DAY, end + timedelta(days=7)
    if unit in ("month", "year"):
        return _shift(unit, start if before else end, -1 if before else 1)
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


# ---------------------------------------------------------------- rules

_MONTH_WORDS = frozenset(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
_SEASON_WORDS = frozenset("spring summer fall autumn winter".split())
_UNIT_WORDS = frozenset("week month year weekend".split())
DIGITS = "digits"  # trigger: the text contains a digit


@dataclass(frozen=True)
class _Rule:
    name: str
    regex: re.Pattern
    triggers: frozenset | str
    resolve: Resolver
    anchored: bool = False


def _rule(name, pattern, triggers, resolve, anchored=False):
    if isinstance(triggers, str) and triggers != DIGITS:
        triggers = frozenset(triggers.split())
    return _Rule(name, re.compile(pattern, re.IGNORECASE), triggers, resolve, anchored)


_RULES: tuple[_Rule, ...] = (
    _rule(
        "relative_day",
        r"\b(?P<w>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|"
        r"tonight|tonite|tomorrow|tmrw|last\s+night|this\s+(?:morning|afternoon|evening))\b"
        r"(?:\s+(?:morning|afternoon|evening|night)\b)?",
        "yesterday today tonight tonite tomorrow tmrw night morning afternoon evening",
        _r_relday,
    ),
    _rule(
        "ago",
        rf"\b(?P<n>{_NUM})\s+(?P<unit>hour|day|week|month|year|decade)s?"
        rf"(?:\s+or\s+(?P<n2>{_NUM}|so))?\s+(?:ago|back)\b",
        "ago back",
        _r_ago,
    ),
    _rule(
        "rolling",
        rf"\b(?:(?:the\s+)?(?:past|last)\s+(?P<n>{_NUM})\s+|(?:the\s+)?past\s+|the\s+last\s+)"
        r"(?P<unit>day|week|month|year)s?\b(?!\s+of\b)",
        "past last",
        _r_rolling,
    ),
    _rule(
        "relative_unit",
        rf"{_NOT_POSS}\b{_REL}\s+(?P<unit>weekend|week|month|year)\b(?!\s+of\b)",
        _UNIT_WORDS,
        _r_relunit,
    ),
    _rule(
        "before_last",
        r"\bthe\s+(?P<unit>weekend|week|month|year)\s+(?P<dir>before\s+last|after\s+next)\b",
        _UNIT_WORDS,
        _r_before_last,
    ),
    _rule(
        "this_time",
        r"\bthis\s+time\s+(?P<rel>last|next)\s+(?P<unit>week|month|year)\b",
        "time",
        _r_this_time,
    ),
    _rule(
        "weekday",
        rf"{_NOT_POSS}\b(?:{_REL}\s+)?(?<!\bevery\s)(?P<wd>{_WEEKDAY})\b(?!\s+of\b)"
        r"(?:\s+(?:morning|afternoon|evening|night)\b)?",
        " ".join(P.WEEKDAYS),
        _r_weekday,
    ),
    _rule(
        "the_weekend",
        r"\b(?:over|on|during|at|for|after|before|since)\s+(?P<b>the\s+weekend)\b",
        "weekend",
        _r_the_weekend,
    ),
    _rule(
        "day_month",  # 8 May, 2023 / the 27th of June / Friday, 5 May
        rf"\b(?:{_WEEKDAY}\s*,?\s+)?(?:the\s+)?(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?"
        rf"(?P<mon>{_MONTH_ANY})(?:\s*,?\s*(?P<year>{_YEAR_EXPLICIT})\b)?",
        _MONTH_WORDS,
        _r_day_month,
    ),
    _rule(
        "month_day",  # May 8th / June 27, 2023 / Friday, May 5
        rf"\b(?:{_WEEKDAY}\s*,?\s+)?(?P<mon>{_MONTH_ANY})\s+(?:the\s+)?(?P<day>[0-3]?\d)"
        rf"(?:st|nd|rd|th)?\b(?:\s*,?\s*(?P<year>{_YEAR_EXPLICIT})\b)?",
        _MONTH_WORDS,
        _r_day_month,
    ),
    _rule(
        "month_year",  # May 2023 / May of 2023
        rf"\b(?P<mon>{_MONTH_ANY})\s*,?\s+(?:of\s+)?(?P<year>{_YEAR_EXPLICIT})\b",
        _MONTH_WORDS,
        _r_month_year,
    ),
    _rule(
        "month_span",  # from March to May (2023)
        rf"\b(?:from|between)\s+(?P<b>(?P<m1>{_MONTH_FULL})\s+(?:to|and|until|till|through)\s+"
        rf"(?P<m2>{_MONTH_FULL})(?:\s*,?\s*(?P<year>{_YEAR_EXPLICIT})\b)?)",
        _MONTH_WORDS,
        _r_month_span,
    ),
    _rule(
        "month_relative",  # last May / this June / next March
        rf"{_NOT_POSS}\b{_REL}\s+(?P<mon>{_MONTH_FULL})",
        _MONTH_WORDS,
        _r_month_rel,
    ),
    _rule(
        "month_in_context",  # in May / since June / early March / the end of April
        r"\b(?:in|since|during|until|till|by|before|after|from|through|throughout|around|"
        r"early|late|mid|of|for)[\s-]+"
        rf"(?P<b>(?P<mon>{_MONTH_FULL}))",
        _MONTH_WORDS,
        _r_month_ctx,
    ),
    _rule(
        "numeric_date",  # 2023-05-08, 2023/05/08, 5/8/2023, 08.05.2023
        r"(?<![\d/.\-])(?:(?P<iy>\d{4})(?P<sep>[-/.])(?P<im>\d{1,2})(?P=sep)(?P<id>\d{1,2})|"
        r"(?P<a>\d{1,2})/(?P<b2>\d{1,2})/(?P<c>\d{4}|\d{2})|"
        r"(?P<ed>\d{1,2})\.(?P<em>\d{1,2})\.(?P<ey>\d{4}))(?![\d/]|\.\d)",
        DIGITS,  # (the second number is "b2": the group name "b" marks span bodies)
        _r_numeric,
    ),
    _rule(
        "year_span",  # from 2019 to 2021 / between 2019 and 2021 / 2019-2021
        rf"\b(?:(?:from|between)\s+(?P<y1>{_YEAR})\s*(?:to|and|until|till|through|-|–|—)\s*"
        rf"(?P<y2>{_YEAR})|(?P<y1b>{_YEAR})\s*[-–—]\s*(?P<y2b>{_YEAR}))\b",
        DIGITS,
        lambda m, ref, d, a: _r_year_span(_Renamed(m), ref, d, a),
    ),
    _rule(
        "year_in_context",  # in 2022 / since 2019 / back in 2010 / mid-2022 / the end of 2021
        r"\b(?:(?:ever\s+)?since|in\s+the\s+year|back\s+in|in|during|until|till|by|before|"
        r"after|from|through|throughout|of|circa|around|early|late|mid)[\s-]+"
        rf"(?P<b>(?P<y>{_YEAR}))\b(?![,.]\d){_NOT_QUANTITY}",
        DIGITS,
        _r_year,
    ),
    _rule(
        "decade",  # the 1990s / the '90s / the early 2000s
        r"\b(?P<c>(?:19|20)\d0)['’]?s\b|\bthe\s+(?:(?:early|late|mid)[\s-]+)?(?P<b>(?P<s>['’]?\d0)s)\b",
        DIGITS,
        _r_decade,
    ),
    _rule(
        "season_year",  # summer 2022 / fall of 2019 / summer '22
        rf"\b(?P<s>{_SEASON})\s*,?\s+(?:of\s+)?(?:(?P<y>{_YEAR})|['’](?P<y2>\d\d))\b",
        _SEASON_WORDS,
        _r_season_year,
    ),
    _rule(
        "season_relative",  # last summer / this winter / next spring / this past fall
        rf"{_NOT_POSS}\b{_REL}\s+(?P<s>{_SEASON})\b(?!\s+of\s+(?!['’]?\d))",
        _SEASON_WORDS,
        _r_season_rel,
    ),
    _rule(
        "season_in_context",  # in the summer / during winter / all summer / the end of summer
        r"\b(?:in|during|over|through|throughout|since|until|till|by|all|for|early|late|mid|"
        r"(?:beginning|start|end|middle)\s+of)[\s-]+(?:the\s+)?(?:(?:early|late|mid)[\s-]+)?"
        rf"(?P<b>(?P<s>{_SEASON}))\b(?!\s+of\s+(?!['’]?\d))",
        _SEASON_WORDS,
        _r_season_ctx,
    ),
    _rule(
        "holiday",  # on Christmas / last Thanksgiving / Easter 2022 (a bare "Christmas" is not)
        r"\b(?:(?P<ctx>on|at|for|over|during|since|until|till|by|before|after|around|from|"
        r"through|in)\s+(?:the\s+)?)?"
        rf"(?P<b>(?:{_REL}\s+)?(?P<h>{_HOLIDAYS})(?:\s*,?\s+(?:of\s+)?(?P<y>{_YEAR}))?)\b",
        "christmas xmas year years halloween thanksgiving easter valentine valentines july "
        "patrick patricks mother mothers father fathers",
        _r_holiday,
    ),
    _rule(
        "vague",
        r"\b(?P<w>recently|lately|the\s+other\s+day)\b",
        "recently lately other",
        _r_vague,
    ),
    _rule(
        # the day before / the week after / the Sunday before: relative to the previous
        # expression; or, with "tail", to the date that follows ("the week before 9 June
        # 2023", LoCoMo's answer style). Not "the day before my birthday".
        "anchored_the",
        rf"\bthe\s+(?P<unit>day|night|weekend|week|month|year|{_WEEKDAY})\s+(?P<dir>before|after)\b"
        rf"(?:(?P<tail>\s+)(?=(?:the\s+)?\d|{_MONTH_ANY}|{_WEEKDAY}\b)|{_NO_EVENT_AFTER})",
        "before after",
        _r_before_after,
        anchored=True,
    ),
    _rule(
        "anchored_next",  # the next day / the following week / the previous month
        r"\bthe\s+(?:(?P<dir>following|previous|prior)\s+(?P<unit>day|morning|night|weekend|"
        r"week|month|year)|(?P<dir2>next)\s+(?P<unit2>day|morning|night))\b",
        "following previous prior next",
        lambda m, ref, d, a: _r_anchored(_Renamed(m), ref, d, a),
        anchored=True,
    ),
    _rule(
        "anchored_offset",  # two days later / a week earlier / three years before
        rf"\b(?P<n>{_NUM})\s+(?P<unit>day|week|month|year)s?\s+"
        rf"(?:(?P<dir>later|earlier)\b|(?P<dir2>before|after)\b{_NO_EVENT_AFTER})",
        "later earlier before after",
        lambda m, ref, d, a: _r_anchored(_Renamed(m), ref, d, a),
        anchored=True,
    ),
)


class _Renamed:
    """A match whose alternative groups ("dir2", "unit2", "y1b") answer under the main name, so one
    resolver serves every alternative of a rule."""

    _ALIASES = {"dir": "dir2", "unit": "unit2", "y1": "y1b", "y2": "y2b"}

    def __init__(self, m: re.Match):
        self._m = m
        self.re = m.re

    def __getitem__(self, name: str):
        value = self._m[name] if name in self._m.re.groupindex else None
        alias = self._ALIASES.get(name)
        if value is None and alias is not None and alias in self._m.re.groupindex:
            value = self._m[alias]
        return value


_MODIFIER = re.compile(
    r"(?:\b(?P<m1>early|late|mid)|\b(?:the\s+)?(?P<m2>beginning|start|end|middle)\s+of"
    r"(?:\s+the)?)[\s-]*(?:the\s+)?$",
    re.IGNORECASE,
)
_MODIFIER_PART = {"early": 0, "beginning": 0, "start": 0, "mid": 1, "middle": 1, "late": 2, "end": 2}
_SINCE = re.compile(r"\b(?P<w>(?:ever\s+)?since|after)\s+(?:the\s+)?$", re.IGNORECASE)
_LOOKBACK = 40  # characters before a span searched for a modifier or "since"

_DAY_END = time.max  # 23:59:59.999999


def _to_span(rng: P.DateRange, text: str, cs: int, ce: int) -> TimeSpan:
    start = datetime.combine(rng[0], time.min, tzinfo=timezone.utc)
    end = datetime.combine(rng[1], _DAY_END, tzinfo=timezone.utc)
    return TimeSpan(start, end, text[cs:ce], cs, ce)


def _reference(reference: datetime | str | int | float) -> datetime:
    return as_utc(reference) if isinstance(reference, datetime) else parse_timestamp(reference)


def find_time_expressions(text: str, reference: datetime) -> list[TimeSpan]:
    """The time expressions of ``text``, in order of appearance, resolved against
    ``reference`` (the session time; naive = UTC; anything ``parse_timestamp`` reads is
    accepted too).

    Each span's interval is closed and whole-day: [00:00:00 of its first day, 23:59:59.999999
    of its last day], UTC. Overlapping candidates are settled longest-first, so "8 May, 2023"
    is one span, not a day and a month. See the module docstring for the resolution rules.
    """
    if not text:
        return []
    ref = _reference(reference)
    d = ref.date()
    words = set(_WORDS.findall(text.lower()))
    has_digit = _DIGIT.search(text) is not None

    # (length, start, end, rule index, match, range or None for anchored rules)
    candidates = []
    for index, rule in enumerate(_RULES):
        if rule.triggers == DIGITS:
            if not has_digit:
                continue
        elif rule.triggers.isdisjoint(words):
            continue
        for m in rule.regex.finditer(text):
            body = m.span("b") if "b" in rule.regex.groupindex and m["b"] is not None else m.span()
            if body[0] == body[1]:
                continue
            rng = None
            if not rule.anchored:
                try:
                    rng = rule.resolve(m, ref, d, None)
                except (ValueError, OverflowError):  # out of the calendar (year 0, 10000)
                    rng = None
                if rng is None:
                    continue
            candidates.append((body[1] - body[0], body[0], body[1], index, m, rng))
    if not candidates:
        return []

    # Longest first, then leftmost, then rule order: the most specific reading wins.
    candidates.sort(key=lambda c: (-c[0], c[1], c[3]))
    chosen = []
    for cand in candidates:
        if all(cand[2] <= c[1] or cand[1] >= c[2] for c in chosen):
            chosen.append(cand)
    chosen.sort(key=lambda c: c[1])

    spans: list[TimeSpan] = []
    anchor: P.DateRange | None = None
    previous_end = 0
    i = 0
    while i < len(chosen):
        _, cs, ce, index, m, rng = chosen[i]
        i += 1
        rule = _RULES[index]
        try:
            if rule.anchored:
                if "tail" in rule.regex.groupindex and m["tail"] is not None:
                    # "the week before" + the date right after it: one span, relative to it.
                    if i >= len(chosen) or chosen[i][1] != ce or chosen[i][5] is None:
                        continue
                    target, ce = chosen[i][5], chosen[i][2]
                    i += 1
                    rng = rule.resolve(m, ref, d, target)
                else:
                    rng = rule.resolve(m, ref, d, anchor)
            rng, cs = _apply_prefixes(text, cs, previous_end, rng, d)
        except (ValueError, OverflowError):
            continue
        spans.append(_to_span(rng, text, cs, ce))
        anchor = rng
        previous_end = ce
    return spans


def _apply_prefixes(
    text: str, cs: int, floor: int, rng: P.DateRange, d: date
) -> tuple[P.DateRange, int]:
    """Widen a span over a modifier ("early", "the end of") and then over "since"/"after"
    just before it, adjusting its range; never back into the previous span."""
    lo = max(floor, cs - _LOOKBACK)
    m = _MODIFIER.search(text, lo, cs)
    if m:
        part = _MODIFIER_PART[(m["m1"] or m["m2"]).lower()]
        narrowed = P.narrow(rng, part)
        if narrowed is not None:
            rng, cs = narrowed, m.start()
    m = _SINCE.search(text, max(floor, cs - _LOOKBACK), cs)
    if m:
        start, end = rng
        if m["w"].lower().endswith("since"):
            if start <= d:
                rng, cs = (start, max(end, d)), m.start()
        elif end < d:  # after X: from the day after X up to the reference
            rng, cs = (end + P.ONE_DAY, d), m.start()
    return rng, cs
