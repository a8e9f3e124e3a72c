"""Calendar arithmetic on dates: weeks, months, seasons and named days.

Everything here works on ``datetime.date`` and returns inclusive ``(first_day, last_day)``
pairs; the parser turns them into UTC datetime intervals at the very end. Working in whole days
keeps the rules simple and is the right precision anyway: chat timestamps (LoCoMo's
"1:56 pm on 8 May, 2023") carry no time zone, so anything finer than a day would be false
precision.

Conventions (each is a choice; the reason is next to it):
- Weeks run Monday..Sunday (ISO 8601).
- Seasons are meteorological (northern hemisphere): spring Mar-May, summer Jun-Aug,
  fall/autumn Sep-Nov, winter Dec-Feb.
- A winter is labelled by the year that holds two of its three months: "winter 2023" is
  Dec 2022 .. Feb 2023. This matches how January/February events are talked about
  ("the Winter 2022 Olympics" were in February 2022).
"""

from __future__ import annotations

import calendar
from datetime import date, timedelta

DateRange = tuple[date, date]

ONE_DAY = timedelta(days=1)

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAY_INDEX = {name: i for i, name in enumerate(WEEKDAYS)}

MONTH_INDEX = {
    name: i
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}


def month_number(name: str) -> int:
    """1..12 for a full or abbreviated English month name ("Sept." and "sep" both give 9)."""
    return MONTH_INDEX[name.strip(". ").lower()[:3]]


# ---------------------------------------------------------------- plain calendar periods


def day_range(d: date) -> DateRange:
    return d, d


def week_range(d: date) -> DateRange:
    """The Monday..Sunday week that contains ``d``."""
    monday = d - timedelta(days=d.weekday())
    return monday, monday + timedelta(days=6)


def weekend_range(d: date) -> DateRange:
    """Saturday and Sunday of the Monday-based week that contains ``d``."""
    monday = d - timedelta(days=d.weekday())
    return monday + timedelta(days=5), monday + timedelta(days=6)


def last_day_of_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def month_range(year: int, month: int) -> DateRange:
    return date(year, month, 1), date(year, month, last_day_of_month(year, month))


def year_range(year: int) -> DateRange:
    return date(year, 1, 1), date(year, 12, 31)


def decade_range(first_year: int) -> DateRange:
    return date(first_year, 1, 1), date(first_year + 9, 12, 31)


def shift_month(year: int, month: int, n: int) -> tuple[int, int]:
    """(year, month) moved by ``n`` months (negative goes back)."""
    k = year * 12 + (month - 1) + n
    return k // 12, k % 12 + 1


def shift_months_clamped(d: date, n: int) -> date:
    """``d`` moved by ``n`` months, the day clamped to the target month's length (Mar 31 - 1 = Feb 28)."""
    y, m = shift_month(d.year, d.month, n)
    return date(y, m, min(d.day, last_day_of_month(y, m)))


def months_between(start: date, end: date) -> int:
    return (end.year - start.year) * 12 + end.month - start.month + 1


def latest_month_not_after(month: int, d: date, strictly_before: bool = False) -> tuple[int, int]:
    """The most recent (year, month) with that month number at or before ``d``'s month
    (strictly before it when ``strictly_before``)."""
    if month < d.month or (month == d.month and not strictly_before):
        return d.year, month
    return d.year - 1, month


def earliest_month_after(month: int, d: date) -> tuple[int, int]:
    """The first (year, month) with that month number strictly after ``d``'s month."""
    return (d.year, month) if month > d.month else (d.year + 1, month)


# ---------------------------------------------------------------- yearless: which occurrence

PAST, UNKNOWN, FUTURE = -1, 0, 1  # a sentence's lean (memlane/temporal/tense.py)


def pick(candidates: list[DateRange], d: date, lean: int) -> DateRange | None:
    """Of a yearless expression's occurrences (``candidates``, in time order), the one the
    sentence means: a plan (FUTURE) the first that has not ended by ``d``, a report (PAST) the
    last that has begun by ``d``; so the occurrence in progress (this month, today) serves both.

    With no cue either way (UNKNOWN), the plan's reading: a report says what happened with a
    past-tense verb, so a sentence without one is a proposal, a question or a fragment ("How
    about Friday at 5?", "Any plans for the weekend?", "dentist on the 4th"). Of the 13 such
    expressions in LoCoMo's turns, 8 are plans, 1 a report and 4 habits or generic.
    """
    ahead = next((r for r in candidates if r[1] >= d), None)
    behind = next((r for r in reversed(candidates) if r[0] <= d), None)
    # none that way (a "Thursday the 4th" a year off): the nearest the other way
    return (behind or ahead) if lean == PAST else (ahead or behind)


def date_candidates(month: int, day: int, d: date, weekday: int | None = None) -> list[DateRange]:
    """``month``/``day`` in the years around ``d`` (Feb 29 in the leap years of +-8), those on
    ``weekday`` only when one is named and some fall on it ("Friday 13 June")."""
    found = []
    for year in range(d.year - 8, d.year + 9):
        if month == 2 and day == 29 or abs(year - d.year) <= 1:
            try:
                found.append(date(year, month, day))
            except ValueError:  # Feb 29 in a common year, April 31
                continue
    return _on_weekday(found, weekday)


def day_of_month_candidates(day: int, d: date, weekday: int | None = None) -> list[DateRange]:
    """The ``day``-th of each month within a year of ``d`` (months that have it), those on
    ``weekday`` only when one is named ("Thursday the 4th")."""
    found = []
    for k in range(-13, 14):
        y, m = shift_month(d.year, d.month, k)
        if day <= last_day_of_month(y, m):
            found.append(date(y, m, day))
    return _on_weekday(found, weekday)


def _on_weekday(days: list[date], weekday: int | None) -> list[DateRange]:
    if weekday is not None:
        matching = [x for x in days if x.weekday() == weekday]
        days = matching or days
    return [day_range(x) for x in days]


def month_candidates(month: int, d: date) -> list[DateRange]:
    """That month in the year before ``d``'s, in ``d``'s and in the year after."""
    return [month_range(year, month) for year in (d.year - 1, d.year, d.year + 1)]


def weekday_candidates(weekday: int, d: date) -> list[DateRange]:
    """The ``weekday`` strictly before ``d`` (within a week) and the one strictly after: said
    on a Friday, a plain "Friday" is last week's or next week's, never today."""
    before = d - timedelta(days=(d.weekday() - weekday) % 7 or 7)
    return [
        day_range(before),
        day_range(before + timedelta(days=7 if before + timedelta(days=7) > d else 14)),
    ]


def weekend_candidates(d: date) -> list[DateRange]:
    """The weekend of the week before ``d``'s (Monday-based) and the weekend of ``d``'s week."""
    return [weekend_range(d - timedelta(weeks=1)), weekend_range(d)]


# ---------------------------------------------------------------- seasons

SEASON_FIRST_MONTH = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


def season_range(season: str, label_year: int) -> DateRange:
    """The season called ``season label_year`` (winter 2023 = Dec 2022 .. Feb 2023)."""
    first = SEASON_FIRST_MONTH[season]
    if first == 12:
        return date(label_year - 1, 12, 1), date(label_year, 2, last_day_of_month(label_year, 2))
    return date(label_year, first, 1), month_range(label_year, first + 2)[1]


def _season_candidates(season: str, d: date) -> list[DateRange]:
    return [season_range(season, y) for y in range(d.year - 2, d.year + 3)]


def season_last(season: str, d: date) -> DateRange:
    """The latest such season that ended before ``d`` ("last winter" said in January is the
    winter a year earlier, because the current one has not ended)."""
    return max(r for r in _season_candidates(season, d) if r[1] < d)


def season_next(season: str, d: date) -> DateRange:
    """The first such season that starts after ``d``."""
    return min(r for r in _season_candidates(season, d) if r[0] > d)


def season_this(season: str, d: date) -> DateRange:
    """The season in progress at ``d``, else the one of ``d``'s year. "This winter" outside
    Dec-Feb means the coming winter (Dec of ``d``'s year): that is what people plan for."""
    for r in _season_candidates(season, d):
        if r[0] <= d <= r[1]:
            return r
    if SEASON_FIRST_MONTH[season] == 12:
        return season_range(season, d.year + 1)
    return season_range(season, d.year)


# ---------------------------------------------------------------- named days


def nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    """The ``n``-th (1-based) ``weekday`` (0 = Monday) of a month."""
    first = date(year, month, 1)
    return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))


def easter_sunday(year: int) -> date:
    """Western (Gregorian) Easter Sunday, by the Meeus/Jones/Butcher computus."""
    a = year % 19
    b, c = divmod(year, 100)
    d, e = divmod(b, 4)
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    el = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * el) // 451
    month, day0 = divmod(h + el - 7 * m + 114, 31)
    return date(year, month, day0 + 1)


_FIXED_HOLIDAYS = {
    "christmas eve": (12, 24),
    "christmas": (12, 25),
    "new year's eve": (12, 31),
    "new year's day": (1, 1),
    "halloween": (10, 31),
    "valentine's day": (2, 14),
    "fourth of july": (7, 4),
    "st. patrick's day": (3, 17),
}


def holiday_date(name: str, year: int) -> date:
    """The date of a canonical holiday name (see ``canonical_holiday``) in ``year``."""
    if name in _FIXED_HOLIDAYS:
        month, day = _FIXED_HOLIDAYS[name]
        return date(year, month, day)
    if name == "thanksgiving":  # US: fourth Thursday of November
        return nth_weekday(year, 11, 3, 4)
    if name == "mother's day":  # US/Canada: second Sunday of May
        return nth_weekday(year, 5, 6, 2)
    if name == "father's day":  # third Sunday of June
        return nth_weekday(year, 6, 6, 3)
    if name == "easter":
        return easter_sunday(year)
    raise KeyError(name)


def canonical_holiday(words: str) -> str:
    """Normalize a matched holiday phrase ("Xmas", "New Years", "valentines") to a key of
    ``holiday_date``."""
    w = " ".join(words.lower().replace("\u2019", "'").split())
    if w.startswith("the "):
        w = w[4:]
    if "eve" in w.split():
        return "christmas eve" if w.startswith("christmas") else "new year's eve"
    if w.startswith(("christmas", "xmas")):
        return "christmas"
    if w.startswith("new year"):
        return "new year's day"
    if w.startswith("valentine"):
        return "valentine's day"
    if "july" in w:
        return "fourth of july"
    if "patrick" in w:
        return "st. patrick's day"
    if w.startswith("mother"):
        return "mother's day"
    if w.startswith("father"):
        return "father's day"
    if w.startswith("easter"):
        return "easter"
    return w  # halloween, thanksgiving


def holiday_latest(name: str, d: date, strictly_before: bool = False) -> date:
    for year in (d.year, d.year - 1):
        h = holiday_date(name, year)
        if h < d or (h == d and not strictly_before):
            return h
    return holiday_date(name, d.year - 2)  # unreachable for yearly holidays


def holiday_next(name: str, d: date) -> date:
    for year in (d.year, d.year + 1):
        h = holiday_date(name, year)
        if h > d:
            return h
    return holiday_date(name, d.year + 2)  # unreachable for yearly holidays


# ---------------------------------------------------------------- early / mid / late


def narrow(rng: DateRange, part: int) -> DateRange | None:
    """The first (0), middle (1) or last (2) third of a period of at least a month.

    Periods made of whole months split by months (early 2022 = Jan-Apr, late summer = Aug,
    the early 2010s = 2010-2013); a single month splits by days 1-10 / 11-20 / 21-end. Returns
    None for periods shorter than a month (weeks are not split: "early next week" keeps the week).
    """
    start, end = rng
    if (end - start).days < 27:
        return None
    whole_months = start.day == 1 and end.day == last_day_of_month(end.year, end.month)
    n_months = months_between(start, end)
    if whole_months and n_months >= 3:
        base, extra = divmod(n_months, 3)
        sizes = [base, base + (1 if extra == 2 else 0), base + (1 if extra >= 1 else 0)]
        offset = sum(sizes[:part])
        y0, m0 = shift_month(start.year, start.month, offset)
        y1, m1 = shift_month(start.year, start.month, offset + sizes[part] - 1)
        return date(y0, m0, 1), month_range(y1, m1)[1]
    if whole_months and n_months == 1:
        if part == 0:
            return start, start.replace(day=10)
        if part == 1:
            return start.replace(day=11), start.replace(day=20)
        return start.replace(day=21), end
    # Any other span (rolling windows): plain thirds by days.
    total = (end - start).days + 1
    a = start + timedelta(days=total * part // 3)
    b = start + timedelta(days=total * (part + 1) // 3 - 1)
    return a, b
