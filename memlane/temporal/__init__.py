"""Time for Memlane: timestamps from input files, time expressions in text, and the temporal
recall channel's query window and proximity score.

All datetimes are aware UTC; intervals are closed, [first microsecond, last microsecond].
"""

from .events import EVENTS, TurnEvents, turn_events
from .habits import habit_spans
from .parse import TimeSpan, find_time_expressions
from .query import proximity, query_interval
from .timestamps import from_epoch, parse_timestamp, to_epoch

__all__ = [
    "EVENTS",
    "TimeSpan",
    "TurnEvents",
    "find_time_expressions",
    "habit_spans",
    "from_epoch",
    "parse_timestamp",
    "proximity",
    "query_interval",
    "to_epoch",
    "turn_events",
]
