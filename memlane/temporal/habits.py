"""Habits: recurring times that date no single day.

"every Tuesday", "every other Saturday", "each summer", "most mornings", "on Sundays",
"Sunday roasts", "Saturday mornings" name a day of the week, a season or a part of the day, and
the calendar rules would read the day or season alone as the next or the last one ("I miss our
Sunday roasts", said on a Sunday, became the Sunday before). A habit is no event: no span of
``find_time_expressions`` may fall inside one (memlane/temporal/parse.py drops them), so a turn
that only states habits gets no occurrence date at retain.

The patterns are the forms of the recurrence in English, not a list of sentences:

- a quantifier before a period: "every", "each", "every other", "every second", "most", "all
  my", "some" + a weekday, a part of the day, a period or a season ("every Sunday night",
  "each summer", "every weekend", "most mornings");
- a weekday in the plural ("Sundays", "on Saturdays");
- a weekday before a plural noun of a routine ("Sunday roasts", "Friday drinks", "Saturday
  mornings"): the plural makes it generic. A singular one ("Sunday lunch at Mum's") stays a
  date: it names one occasion as often as the routine.
"""

from __future__ import annotations

import re

from .vocabulary import HOLIDAYS, MONTH_FULL, SEASON, WEEKDAY

_PERIOD = (
    rf"(?:{WEEKDAY}|{SEASON}|{MONTH_FULL}|{HOLIDAYS}|day|night|morning|afternoon|evening|"
    r"week|weekend|fortnight|month|year|weekday|term|holiday)s?"
)
_PART = r"(?:\s+(?:morning|afternoon|evening|night|lunchtime|teatime)s?)?"
_QUANTIFIED = (
    r"\b(?:every|each)\s+(?:(?:other|second|single|few|couple\s+of)\s+)?"
    rf"|\b(?:most|all\s+(?:my|our|the)|some|on)\s+(?={WEEKDAY}s|(?:morning|afternoon|evening|night|weekend|weekday)s\b)"
)
# plural nouns of routines after a weekday ("Sunday roasts"); not verbs ("Friday works for me")
_ROUTINE_NOUNS = (
    r"roasts|lunches|dinners|brunches|breakfasts|drinks|mornings|afternoons|evenings|nights|"
    r"lie-ins|walks|runs|swims|rides|games|matches|services|shifts|classes|lessons|sessions|"
    r"meetings|markets|papers|chores|quizzes|practices|rehearsals|visits|calls|dinners|"
    r"pancakes|fry-ups|takeaways|cleans|shops|nights\s+out"
)
HABIT = re.compile(
    rf"(?:{_QUANTIFIED}){_PERIOD}\b{_PART}"
    rf"|\b{WEEKDAY}s\b{_PART}"
    rf"|\b{WEEKDAY}\s+(?:{_ROUTINE_NOUNS})\b",
    re.IGNORECASE,
)


def habit_spans(text: str) -> list[tuple[int, int]]:
    """The [start, end) character offsets of the habits in ``text``, in order."""
    return [m.span() for m in HABIT.finditer(text)]


# one of these words must be in a text for a habit to be there (a turn is split into words once)
HABIT_WORDS = frozenset(
    "every each most all some".split()
    + [d for w in ("monday tuesday wednesday thursday friday saturday sunday".split()) for d in (w, w + "s")]
)


def blocks(habits: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether the span [start, end) overlaps a habit."""
    return any(start < h_end and h_start < end for h_start, h_end in habits)
