"""The temporal recall channel's two primitives: the window a query asks about, and how close
a memory's occurrence interval lies to it."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Sequence

from .parse import TimeSpan, find_time_expressions


def query_interval(query: str, reference: datetime) -> tuple[datetime, datetime] | None:
    """The closed UTC window a recall query asks about, or None when it names no time.

    It is the smallest interval covering every time expression of the query ("in May or in
    July 2023" covers May 1 .. Jul 31), resolved against ``reference`` (the request's
    ``reference_time``, else its ``as_of``, else now). Example: "What did Caroline do last week?" with a reference on Monday
    2023-05-08 gives Monday 2023-05-01 00:00 .. Sunday 2023-05-07 23:59:59.999999.
    """
    return covering(find_time_expressions(query, reference))


def covering(spans: Sequence[TimeSpan]) -> tuple[datetime, datetime] | None:
    """The smallest interval covering every one of ``spans`` (None: no span)."""
    if not spans:
        return None
    return min(s.start for s in spans), max(s.end for s in spans)


def proximity(start: float, end: float, q_start: float, q_end: float, scale_s: float) -> float:
    """How close the interval [start, end] is to the query interval [q_start, q_end], in [0, 1].

    All arguments are epoch seconds. 1.0 when the intervals overlap (touching counts);
    otherwise exp(-gap / scale_s) where gap is the distance between the nearer ends, so a
    memory one ``scale_s`` away scores 1/e. Reversed bounds are put in order first.
    """
    if not scale_s > 0:
        raise ValueError(f"proximity scale must be positive, got {scale_s!r}")
    lo, hi = (start, end) if start <= end else (end, start)
    qlo, qhi = (q_start, q_end) if q_start <= q_end else (q_end, q_start)
    gap = max(qlo - hi, lo - qhi, 0.0)
    if gap == 0.0:
        return 1.0
    return math.exp(-gap / scale_s)
