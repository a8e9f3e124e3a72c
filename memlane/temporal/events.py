"""The events a chat turn dates, and the occurrence its memory gets at retain.

A memory is said at one time (its ``mentioned_at``, the turn's time) and may be about events on
other days: "I start on 6 April, so I gave my notice in today" said on 2 March dates
two events, 2 March and 6 April. The rules:

- the events are the spans of ``find_time_expressions`` (habits date none: "every Tuesday",
  "Sunday roasts"; memlane/temporal/habits.py);
- the occurrence interval (``occurred_start``..``occurred_end``, read by the temporal recall
  channel and the boosts) is the smallest interval covering every event, the same rule as a
  query's window (memlane/temporal/query.py): a turn about 2 March and 6 April lies on both,
  not on the first one it names; a turn with no event has none (its mention time stands in,
  memlane/units.py);
- the turn's event day (``day``) is the one day all its events fall on, or None: none, several
  days (two events, or one weekend), or a habit alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from .parse import TimeSpan, find_time_expressions
from .query import covering

# The metadata key of a memory's events when it dates more than one: [[first day, last day], ...]
# (ISO dates), so a client shows each beside the said date (memlane/views.py: memory_dates).
EVENTS = "events"


@dataclass(frozen=True)
class TurnEvents:
    """The dated events of one turn, in order of appearance."""

    spans: tuple[TimeSpan, ...]

    @property
    def occurrence(self) -> tuple[datetime, datetime] | None:
        """The closed UTC interval covering every event; None when the turn dates none."""
        return covering(self.spans)

    @property
    def intervals(self) -> list[tuple[date, date]]:
        """The distinct (first day, last day) of the events, in calendar order."""
        return sorted({(s.start.date(), s.end.date()) for s in self.spans})

    @property
    def day(self) -> date | None:
        """The one day every event falls on; None for no event, several, or one longer than a day."""
        intervals = self.intervals
        if len(intervals) == 1 and intervals[0][0] == intervals[0][1]:
            return intervals[0][0]
        return None


def turn_events(text: str, said_at: datetime) -> TurnEvents:
    """The events ``text``, said at ``said_at``, dates."""
    return TurnEvents(tuple(find_time_expressions(text, said_at)) if text else ())
