"""The date libraries ``memlane eval dates`` measures beside the engine's rules: dateparser,
timefhuman and ctparse (the ``eval`` extra; the engine never imports them).

Each gets one setting for every line, as a real resolver would have to, and the most lenient
use of its API: it reads the expression alone first, then the expression without its leading
preposition ("on the 9th" -> "the 9th"), then the whole turn (the hit that overlaps the
expression); the first input it answers counts. Where a library answers a point and the period
it names (dateparser's ``RETURN_TIME_AS_PERIOD``: "two weeks ago" is a day and a week), both
readings are offered and either may match the label. An answer without a year (ctparse's
"X-05-X") is no reading: the year is what is measured.
"""

from __future__ import annotations

import calendar
import logging
import re
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any, Callable, Iterator

from evals.dates import DateCase, DateRange, Readings, Resolver, overlap

INSTALL = "the date libraries are not installed: pip install -e '.[eval]'"
_PREPOSITION = re.compile(r"^(?:on|in|at|by|for|to|from|until|till|during)\s+", re.IGNORECASE)


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(INSTALL) from None


def _naive(case: DateCase) -> datetime:
    return case.said_at.replace(tzinfo=None)


def _inputs(case: DateCase) -> Iterator[str]:
    yield case.expression
    stripped = _PREPOSITION.sub("", case.expression)
    if stripped != case.expression:
        yield stripped


def _month(d: date) -> DateRange:
    return d.replace(day=1), d.replace(day=calendar.monthrange(d.year, d.month)[1])


def _first(
    case: DateCase,
    parse: Callable[[str], Readings],
    search: Callable[[str], list[tuple[tuple[int, int], Readings]]],
) -> Readings:
    for text in _inputs(case):
        readings = parse(text)
        if readings:
            return readings
    target = (case.char_start, case.char_end)
    hits = [(overlap(where, target), r) for where, r in search(case.text) if r]
    hits = [h for h in hits if h[0] > 0]
    return max(hits, key=lambda h: h[0])[1] if hits else ()


# ---------------------------------------------------------------- dateparser


def _dateparser_readings(data: Any) -> Readings:
    if data is None or data.date_obj is None:
        return ()
    d = data.date_obj.date()
    period = data.period
    if period == "week":
        monday = d - timedelta(days=d.weekday())
        return (d, d), (monday, monday + timedelta(days=6))
    if period == "month":
        return (d, d), _month(d)
    if period == "year":
        return (d, d), (date(d.year, 1, 1), date(d.year, 12, 31))
    return ((d, d),)  # day, time, part of day


def resolve_dateparser(case: DateCase, prefer: str) -> Readings:
    dateparser = _require("dateparser")
    search_mod = _require("dateparser.search")
    settings = {"RELATIVE_BASE": _naive(case), "PREFER_DATES_FROM": prefer, "RETURN_TIME_AS_PERIOD": True}
    parser = dateparser.DateDataParser(languages=["en"], settings=settings)

    def parse(text: str) -> Readings:
        return _dateparser_readings(parser.get_date_data(text))

    def search(text: str) -> list[tuple[tuple[int, int], Readings]]:
        found = search_mod.search_dates(text, languages=["en"], settings=settings) or []
        out, at = [], 0
        for sub, _ in found:
            start = text.find(sub, at)
            if start < 0:
                continue
            at = start + len(sub)
            out.append(((start, at), parse(sub)))
        return out

    return _first(case, parse, search)


# ---------------------------------------------------------------- timefhuman


def _timefhuman_readings(value: Any) -> Readings:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, datetime) for v in value):
        return ((value[0].date(), value[1].date()),)
    if isinstance(value, datetime):
        return ((value.date(), value.date()),)
    return ()


def resolve_timefhuman(case: DateCase, direction: str) -> Readings:
    tfh = _require("timefhuman")
    config = tfh.tfhConfig(now=_naive(case), direction=tfh.Direction[direction], return_matched_text=True)

    def hits(text: str) -> list[tuple[tuple[int, int], Readings]]:
        try:
            found = tfh.timefhuman(text, config)
        except Exception:  # a grammar the library cannot parse: no reading
            return []
        return [(tuple(where), _timefhuman_readings(value)) for _, where, value in found]

    def parse(text: str) -> Readings:
        found = hits(text)
        return found[0][1] if found else ()

    return _first(case, parse, hits)


# ---------------------------------------------------------------- ctparse


def _ctparse_readings(resolution: Any) -> Readings:
    ct_types = _require("ctparse.types")
    if isinstance(resolution, ct_types.Interval):
        a, b = resolution.t_from, resolution.t_to
        if a is not None and b is not None and None not in (a.year, a.month, a.day, b.year, b.month, b.day):
            return ((date(a.year, a.month, a.day), date(b.year, b.month, b.day)),)
        return ()
    if not isinstance(resolution, ct_types.Time) or resolution.year is None:
        return ()
    if resolution.month is None:
        return ((date(resolution.year, 1, 1), date(resolution.year, 12, 31)),)
    if resolution.day is None:
        return (_month(date(resolution.year, resolution.month, 1)),)
    d = date(resolution.year, resolution.month, resolution.day)
    return ((d, d),)


def resolve_ctparse(case: DateCase) -> Readings:
    ctparse = _require("ctparse")
    logging.getLogger("ctparse").setLevel(logging.ERROR)  # it logs every input it cannot parse

    def parsed(text: str) -> Any:
        try:
            return ctparse.ctparse(text, ts=_naive(case), timeout=2.0)
        except Exception:  # an input the library cannot parse: no reading
            return None

    def parse(text: str) -> Readings:
        p = parsed(text)
        return () if p is None else _ctparse_readings(p.resolution)

    def search(text: str) -> list[tuple[tuple[int, int], Readings]]:
        p = parsed(text)
        if p is None:
            return []
        return [((p.resolution.mstart, p.resolution.mend), _ctparse_readings(p.resolution))]

    return _first(case, parse, search)


LIBRARY_ROWS: dict[str, Resolver] = {
    "dateparser:current_period": partial(resolve_dateparser, prefer="current_period"),
    "dateparser:future": partial(resolve_dateparser, prefer="future"),
    "dateparser:past": partial(resolve_dateparser, prefer="past"),
    "timefhuman:next": partial(resolve_timefhuman, direction="next"),
    "timefhuman:previous": partial(resolve_timefhuman, direction="previous"),
    "ctparse": resolve_ctparse,
}
