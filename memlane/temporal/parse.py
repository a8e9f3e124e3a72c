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
in ``periods.py``). An expression without a year or a direction (a date, "the 9th", a month, a
season, a holiday, a plain "Friday", "the weekend", "in four days") is read by the sentence it
is in (``tense.py``): a plan, booking or schedule takes the next occurrence (the one in
progress counts: later this month, today), a report the last; a sentence with no tense cue at
all is read as a plan (a report has a past-tense verb). "last Friday" is the most recent Friday
strictly before the reference, "this Friday" the Friday of the reference's Monday-based week
(the next one when a plan's has passed); "next Friday", "next June", "next summer" are the
first such day, month or season to start after the reference (dateparser's reading; "the one
after the coming one" is the other common reading, and no rule serves both), and "next weekend"
the first weekend to start after it (said on a Thursday, the coming one; on a Saturday, the one
after); a day or season inside a habit ("every other Saturday", "Sunday roasts", ``habits.py``)
is no date at all; "last summer" is
the latest summer that ended before the reference; "N days/weeks ago" is that day (a week is 7
days), "N months/years ago" the whole calendar month/year N units back; "in N days/weeks" is
that day ahead (nothing in a report: "I read it in two days" is a duration); "the past N days"
is the rolling window ending at the reference; "the day/week before" is relative to the
previous expression in the text (else the reference), or to the date right after it ("the week
before 9 June 2023" = Jun 2-8); "since X" and "after X" reach up to the reference;
"early/mid/late X" and "the beginning/middle/end of X" keep a third of X.

The vocabulary is in ``vocabulary.py``, the rule table in ``rules.py`` and each rule's calendar
reading in ``resolvers.py``; this module runs the rules over a text and settles overlaps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

from . import periods as P
from .habits import HABIT_WORDS, blocks, habit_spans
from .rules import RULES
from .tense import TenseReader
from .timestamps import as_utc, parse_timestamp
from .vocabulary import DIGIT, MONTH_TYPO, MONTH_TYPO_WORDS, MONTH_TYPOS, WORDS

# (length, start, end, rule index, match, range or None for anchored rules)
_Candidate = tuple[int, int, int, int, re.Match[str], P.DateRange | None]


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
    start = datetime.combine(rng[0], time.min, tzinfo=UTC)
    end = datetime.combine(rng[1], _DAY_END, tzinfo=UTC)
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
    words = set(WORDS.findall(text.lower()))
    if words.isdisjoint(MONTH_TYPO_WORDS):
        return _find(text, ref, words)
    # A misspelt month ("octobr 2nd"): the rules read the corrected text; the spans keep the
    # offsets and words of the text as written.
    fixed, moves = _correct_months(text)
    spans = []
    for s in _find(fixed, ref, set(WORDS.findall(fixed.lower()))):
        cs, ce = _original(s.char_start, moves, start=True), _original(s.char_end, moves, start=False)
        spans.append(TimeSpan(s.start, s.end, text[cs:ce], cs, ce))
    return spans


# (start in the corrected text, end there, start in the original, end there)
_Move = tuple[int, int, int, int]


def _correct_months(text: str) -> tuple[str, list[_Move]]:
    parts, moves, at, shift = [], [], 0, 0
    for m in MONTH_TYPO.finditer(text):
        right = MONTH_TYPOS[m[0].lower()]
        parts.append(text[at : m.start()])
        parts.append(right)
        moves.append((m.start() + shift, m.start() + shift + len(right), m.start(), m.end()))
        shift += len(right) - (m.end() - m.start())
        at = m.end()
    parts.append(text[at:])
    return "".join(parts), moves


def _original(pos: int, moves: list[_Move], start: bool) -> int:
    """An offset of the corrected text in the original (a corrected word maps to all of the
    misspelt one)."""
    shift = 0
    for new_start, new_end, old_start, old_end in moves:
        if pos < new_start or (pos == new_start and not start):
            break
        if pos < new_end or (pos == new_end and not start):
            return old_start if start else old_end
        shift = old_end - new_end
    return pos + shift


def _find(text: str, ref: datetime, words: set[str]) -> list[TimeSpan]:
    d = ref.date()
    has_digit = DIGIT.search(text) is not None

    tense = TenseReader(text)  # reads the text only when a yearless expression asks
    candidates: list[_Candidate] = []
    for index, rule in enumerate(RULES):
        triggers = rule.triggers
        if isinstance(triggers, str):  # DIGITS
            if not has_digit:
                continue
        elif isinstance(triggers, frozenset):
            if triggers.isdisjoint(words):
                continue
        elif any(group.isdisjoint(words) for group in triggers):  # one word of each group
            continue
        for m in rule.regex.finditer(text):
            body = m.span("b") if "b" in rule.regex.groupindex and m["b"] is not None else m.span()
            if body[0] == body[1]:
                continue
            rng = None
            if not rule.anchored:
                try:
                    rng = rule.resolve(m, ref, d, None, tense)
                except (ValueError, OverflowError):  # out of the calendar (year 0, 10000)
                    rng = None
                if rng is None:
                    continue
            candidates.append((body[1] - body[0], body[0], body[1], index, m, rng))
    # a day or season inside a habit ("every other Saturday", "Sunday roasts") dates nothing
    habits = [] if HABIT_WORDS.isdisjoint(words) else habit_spans(text)
    if habits:
        candidates = [c for c in candidates if not blocks(habits, c[1], c[2])]
    if not candidates:
        return []

    # Longest first, then leftmost, then rule order: the most specific reading wins.
    candidates.sort(key=lambda c: (-c[0], c[1], c[3]))
    chosen: list[_Candidate] = []
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
        rule = RULES[index]
        try:
            if rule.anchored:
                if "tail" in rule.regex.groupindex and m["tail"] is not None:
                    # "the week before" + the date right after it: one span, relative to it.
                    if i >= len(chosen) or chosen[i][1] != ce or chosen[i][5] is None:
                        continue
                    target, ce = chosen[i][5], chosen[i][2]
                    i += 1
                    rng = rule.resolve(m, ref, d, target, tense)
                else:
                    rng = rule.resolve(m, ref, d, anchor, tense)
            if rng is None:  # an anchored reading with no real date ("the 31st" of a 30-day month)
                continue
            rng, cs = _apply_prefixes(text, cs, previous_end, rng, d)
        except (ValueError, OverflowError):
            continue
        spans.append(_to_span(rng, text, cs, ce))
        anchor = rng
        previous_end = ce
    return spans


def _apply_prefixes(text: str, cs: int, floor: int, rng: P.DateRange, d: date) -> tuple[P.DateRange, int]:
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
