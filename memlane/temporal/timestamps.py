"""Timestamps from input files, and epoch-second conversions.

``parse_timestamp`` accepts a closed list of explicit formats and nothing else: it runs on
every turn of every imported file, so it must be fast and must never guess. General-purpose
parsers (dateparser) accept almost any string ("We" parses as a date) and are slow, so they
are deliberately not used here.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_BASIC_DATE = re.compile(r"(?P<y>(?:19|20)\d\d|2100)(?P<m>\d\d)(?P<d>\d\d)")


def as_utc(dt: datetime) -> datetime:
    """``dt`` as an aware UTC datetime; a naive value is taken to be UTC already."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def from_epoch(s: int | float) -> datetime:
    """The aware UTC datetime ``s`` seconds after 1970-01-01T00:00Z (negative goes before).

    Raises ValueError for NaN, infinities, bools and values outside years 1..9999.
    """
    if isinstance(s, bool) or not isinstance(s, (int, float)):
        raise ValueError(f"epoch seconds must be a number, got {s!r}")
    if isinstance(s, float) and not math.isfinite(s):
        raise ValueError(f"epoch seconds must be finite, got {s!r}")
    try:
        # timedelta arithmetic is exact for ints (a float timestamp() round trip is not).
        return _EPOCH + timedelta(seconds=s)
    except OverflowError:
        raise ValueError(f"epoch seconds {s!r} out of range (years 1..9999)") from None


def to_epoch(dt: datetime | date) -> int:
    """Whole epoch seconds (floored) of a datetime (naive = UTC) or of a date's midnight UTC.

    Floored, so the last microsecond of a day maps into that day, never the next one.
    """
    if not isinstance(dt, datetime):
        if isinstance(dt, date):
            dt = datetime(dt.year, dt.month, dt.day)
        else:
            raise ValueError(f"to_epoch needs a datetime, got {dt!r}")
    return (as_utc(dt) - _EPOCH) // _SECOND


def _parse_text(text: str) -> datetime | None:
    if _INTEGER.fullmatch(text):
        basic = _BASIC_DATE.fullmatch(text)
        if basic:
            # Eight digits that spell a valid YYYYMMDD between 1900 and 2100 are an ISO 8601
            # basic date, not the epoch second 20230508 (which is August 1970).
            try:
                return datetime(int(basic["y"]), int(basic["m"]), int(basic["d"]), tzinfo=UTC)
            except ValueError:
                pass
        return from_epoch(int(text))
    if _NUMBER.fullmatch(text):
        return from_epoch(float(text))
    # ISO 8601: Python 3.11's fromisoformat reads dates, date-times, offsets and "Z".
    if text[:4].isdigit():
        return as_utc(datetime.fromisoformat(text))
    return None


def parse_timestamp(value: str | int | float | datetime) -> datetime:
    """Parse a timestamp from an input file into an aware UTC datetime.

    Accepted, and nothing else:
    - ``datetime`` (naive = UTC) and ``date`` (midnight UTC);
    - epoch seconds as int or float, or as a numeric string ("1683554160", "1683554160.5");
      an 8-digit string that spells YYYYMMDD (1900-2100) is read as an ISO basic date;
    - ISO 8601 strings: "2023-05-08", "2023-05-08T13:56:00", "2023-05-08 13:56:00+02:00",
      "2023-05-08T13:56:00Z" (no offset = UTC).

    A dataset's own forms (LoCoMo's "1:56 pm on 8 May, 2023") are its reader's to parse
    (memlane/ingest/dataset_times.py).

    Raises ValueError naming the value (``cannot parse timestamp 'next tuesdayish'``) for
    anything else: empty strings, None, bools, NaN, epochs outside years 1..9999 (so epoch
    milliseconds are rejected rather than silently read as the year 55000).
    """
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return from_epoch(value)
        if isinstance(value, str):
            result = _parse_text(value.strip())
            if result is not None:
                return result
    except (ValueError, OverflowError) as exc:
        reason = f": {exc}" if str(exc) else ""
        raise ValueError(f"cannot parse timestamp {value!r}{reason}") from None
    raise ValueError(f"cannot parse timestamp {value!r}")
