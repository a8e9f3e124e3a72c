"""The session times of the benchmark datasets, read by their readers (the engine's own
:func:`~memlane.temporal.parse_timestamp` knows only ISO 8601 and epoch seconds).

- LoCoMo: "1:56 pm on 8 May, 2023"; the same date without the time ("8 May, 2023") or month
  first ("May 8th, 2023").
- LongMemEval: "2023/05/20 (Sat) 02:21" (the weekday is decoration and is not checked).

A value in neither form falls back to :func:`~memlane.ingest.common.parse_time`, so a file
written with ISO times reads as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from memlane.ingest.common import InputError, parse_time
from memlane.temporal.periods import MONTH_INDEX

_MONTH_WORD = r"(?P<mon>[A-Za-z]{3,9})\.?"
_TIME_ON = r"(?:(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?\s*(?P<ap>[AaPp])\.?\s*[Mm]\.?\s+on\s+)?"
_LOCOMO_DMY = re.compile(_TIME_ON + r"(?P<d>\d{1,2})\s+" + _MONTH_WORD + r"\s*,?\s*(?P<y>\d{4})")
_LOCOMO_MDY = re.compile(_TIME_ON + _MONTH_WORD + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?\s*,?\s*(?P<y>\d{4})")
_SLASHED = re.compile(
    r"(?P<y>\d{4})/(?P<m>\d{1,2})/(?P<d>\d{1,2})(?:\s*\([A-Za-z]{2,9}\))?"
    r"(?:\s+(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?)?"
)
# Longer than three letters, a month word must be the whole name ("Mayo" is no month).
_MONTH_NAMES = {
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "sept",
}


def _hour24(h: str | None, ap: str | None) -> int:
    if h is None:
        return 0
    hour = int(h)
    if ap is None:
        if hour > 23:
            raise ValueError
        return hour
    if not 1 <= hour <= 12:
        raise ValueError
    return hour % 12 + (12 if ap.lower() == "p" else 0)


def _from_match(m: re.Match[str], month: int) -> datetime:
    g = m.groupdict()
    return datetime(
        int(g["y"]),
        month,
        int(g["d"]),
        _hour24(g.get("h"), g.get("ap")),
        int(g.get("mi") or 0),
        int(g.get("s") or 0),
        tzinfo=UTC,
    )


def locomo_time(text: str) -> datetime | None:
    """A LoCoMo session time as a UTC datetime; None when ``text`` is not in LoCoMo's form.
    Raises ValueError for one in the form that names no real time ("13:56 pm", "31 February")."""
    for pattern in (_LOCOMO_DMY, _LOCOMO_MDY):
        m = pattern.fullmatch(text.strip())
        if m:
            month = MONTH_INDEX.get(m["mon"].lower()[:3])
            if month is None or (len(m["mon"]) > 3 and m["mon"].lower() not in _MONTH_NAMES):
                return None
            return _from_match(m, month)
    return None


def longmemeval_time(text: str) -> datetime | None:
    """A LongMemEval session or question time as a UTC datetime; None when ``text`` is not in
    LongMemEval's form. Raises ValueError for one in the form that names no real time."""
    m = _SLASHED.fullmatch(text.strip())
    return _from_match(m, int(m["m"])) if m else None


def dataset_time(
    value: Any, dataset_form: Callable[[str], datetime | None], where: Callable[[], str]
) -> datetime:
    """``value`` read in the dataset's form, else as any timestamp the engine reads; an
    :class:`InputError` prefixed with ``where()`` when it is neither."""
    if isinstance(value, str):
        try:
            when = dataset_form(value)
        except ValueError as exc:
            reason = f": {exc}" if str(exc) else ""
            raise InputError(f"{where()}: cannot parse timestamp {value!r}{reason}") from None
        if when is not None:
            return when
    return parse_time(value, where)
