"""``memlane eval dates``, second set: which events a turn dates, and which day its memory gets.

``evals/dates/events.jsonl`` (format and provenance in ``evals/dates/EVENTS.md``) labels time
expressions in chat turns of three kinds: ``deictic`` ("this morning", "tomorrow night"),
``multi`` (turns that date two or three events on different days, and the one dated event of a
turn that also states a habit) and ``habit`` ("every Tuesday", "Sunday roasts": no date). Each
line also carries the turn's ``turn_date``: the one day its memory is dated by as an event, or
null (several events on different days, only habits, or an event longer than a day).

Two figures per kind, for the engine's rules only (the date libraries have no notion of a habit
or of a turn's event):

- expressions: a dated line is right when the rules' span overlapping the expression has exactly
  the labelled first and last day; a habit line when the rules give no date there;
- turns: right when the day retain dates the turn's memory by as an event
  (``memlane.temporal.turn_events(...).day``) is the labelled ``turn_date`` (both null counts).
  A turn is counted under the kind of its lines (a habit turn's dated line and its habit line
  each count under their own kind, the turn once under each).

The set is split by turn, stratified by the turn's kind (habit when any line is a habit, else
multi, else deictic), with ``random.Random(EVENTS_SPLIT_SEED)``: the rules are tuned on the
calibration half only; held is run once.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

from evals.dates import json_lines

EVENT_KINDS = ("multi", "habit", "deictic")
EVENTS_SPLIT_SEED = 20261207  # the seed of the stratified by-turn split (split_turns)
EVENTS_FILE = Path(__file__).resolve().parent / "dates" / "events.jsonl"


@dataclass(frozen=True)
class EventCase:
    """One labelled line: ``expression`` is a substring of ``text``; ``start``..``end`` the
    inclusive days it denotes (both None for a habit); ``turn_date`` the turn's event day."""

    id: str
    said_at: datetime
    text: str
    expression: str
    kind: str
    start: date | None
    end: date | None
    turn_date: date | None

    @property
    def turn(self) -> tuple[str, str]:
        return (self.said_at.isoformat(), self.text)

    @property
    def char_start(self) -> int:
        return self.text.find(self.expression)

    @property
    def char_end(self) -> int:
        return self.char_start + len(self.expression)


def _day(value: Any) -> date | None:
    return None if value is None else date.fromisoformat(value)


def _case(row: dict[str, Any], where: str) -> EventCase:
    try:
        case = EventCase(
            id=str(row["id"]),
            said_at=datetime.fromisoformat(row["said_at"]),
            text=row["text"],
            expression=row["expression"],
            kind=row["kind"],
            start=_day(row["start"]),
            end=_day(row["end"]),
            turn_date=_day(row["turn_date"]),
        )
    except KeyError as exc:
        raise ValueError(f"{where}: missing field {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    if case.kind not in EVENT_KINDS:
        raise ValueError(f"{where}: kind must be one of {', '.join(EVENT_KINDS)}, not {case.kind!r}")
    if case.char_start < 0:
        raise ValueError(f"{where}: expression {case.expression!r} is not in the text")
    if (case.start is None) != (case.end is None) or (case.kind == "habit") != (case.start is None):
        raise ValueError(f"{where}: a habit has start and end null, any other line both set")
    if case.start is not None and case.end is not None and case.start > case.end:
        raise ValueError(f"{where}: start {case.start} is after end {case.end}")
    return case


def is_event_set(path: Path) -> bool:
    """Whether a labelled file is of this set (its lines carry ``turn_date``)."""
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                return False
            return isinstance(row, dict) and "turn_date" in row
    return False


def load_rows(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The lines of each file as checked dicts (a bad line raises ValueError naming it)."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    turn_dates: dict[tuple[str, str], date | None] = {}
    for where, row in json_lines(paths):
        case = _case(row, where)
        if case.id in seen:
            raise ValueError(f"{where}: duplicate id {case.id!r}")
        if turn_dates.setdefault(case.turn, case.turn_date) != case.turn_date:
            raise ValueError(f"{where}: turn_date differs from another line of the same turn")
        seen.add(case.id)
        rows.append(row)
    return rows


def turn_kind(lines: Sequence[dict[str, Any]]) -> str:
    kinds = {r["kind"] for r in lines}
    return "habit" if "habit" in kinds else "multi" if "multi" in kinds else "deictic"


def split_turns(
    rows: Sequence[dict[str, Any]], seed: int = EVENTS_SPLIT_SEED
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The by-turn split: the turns (lines with the same ``said_at`` and ``text``) of each kind,
    in sorted kind order, sorted by their first id, are shuffled with one ``random.Random(seed)``
    and the first half (rounded down) is calibration, the rest held; each half's lines by id."""
    turns: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        turns[(row["said_at"], row["text"])].append(row)
    by_kind: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for lines in turns.values():
        by_kind[turn_kind(lines)].append(lines)
    rng = random.Random(seed)
    calibration: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    for kind in sorted(by_kind):
        group = sorted(by_kind[kind], key=lambda lines: min(r["id"] for r in lines))
        rng.shuffle(group)
        half = len(group) // 2
        calibration += [r for lines in group[:half] for r in lines]
        held += [r for lines in group[half:] for r in lines]
    return sorted(calibration, key=lambda r: r["id"]), sorted(held, key=lambda r: r["id"])


def load_event_cases(paths: Sequence[Path] | None = None, split: str = "all") -> list[EventCase]:
    """The checked lines of ``paths`` (default: events.jsonl), or of one half of the split."""
    rows = load_rows(paths or [EVENTS_FILE])
    if split in ("calibration", "held"):
        rows = split_turns(rows)[0 if split == "calibration" else 1]
    elif split != "all":
        raise ValueError(f"--split must be one of calibration, held, all, not {split!r}")
    return [_case(r, r["id"]) for r in rows]


@dataclass(frozen=True)
class EventOutcome:
    """The rules on one line: the interval of the span overlapping its expression (None: no
    span there) and the day retain dates the line's turn by as an event."""

    case: EventCase
    got: tuple[date, date] | None
    turn_day: date | None

    @property
    def right(self) -> bool:
        want = None if self.case.start is None else (self.case.start, self.case.end)
        return self.got == want

    @property
    def turn_right(self) -> bool:
        return self.turn_day == self.case.turn_date


def run_events(cases: Sequence[EventCase]) -> list[EventOutcome]:
    """The engine's rules on every line: ``find_time_expressions`` over the whole turn (the span
    overlapping the expression most) and ``turn_events`` for the turn's day."""
    from evals.dates import overlap
    from memlane.temporal import turn_events

    out = []
    for case in cases:
        events = turn_events(case.text, case.said_at)
        target = (case.char_start, case.char_end)
        best, best_overlap = None, 0
        for span in events.spans:
            shared = overlap((span.char_start, span.char_end), target)
            if shared > best_overlap:
                best, best_overlap = span, shared
        got = None if best is None else (best.start.date(), best.end.date())
        out.append(EventOutcome(case, got, events.day))
    return out


def _fraction(right: int, n: int) -> dict[str, Any]:
    return {"right": right, "n": n, "fraction": round(right / n, 4) if n else None}


def report_events(outcomes: Sequence[EventOutcome], label: str) -> dict[str, Any]:
    """Per kind and overall: expressions right / lines and turns right / turns (a turn once per
    kind of its lines), and the misses."""
    kinds: dict[str, Any] = {}
    for kind in (*EVENT_KINDS, "all"):
        mine = [o for o in outcomes if kind == "all" or o.case.kind == kind]
        turns = {o.case.turn: o.turn_right for o in mine}
        kinds[kind] = {
            "expressions": _fraction(sum(o.right for o in mine), len(mine)),
            "turns": _fraction(sum(turns.values()), len(turns)),
        }

    def day(d: date | None) -> str | None:
        return None if d is None else d.isoformat()

    misses = [
        {
            "id": o.case.id,
            "kind": o.case.kind,
            "said_at": o.case.said_at.date().isoformat(),
            "text": o.case.text,
            "expression": o.case.expression,
            "want": None if o.case.start is None else [day(o.case.start), day(o.case.end)],
            "got": None if o.got is None else [day(o.got[0]), day(o.got[1])],
            "turn_date": day(o.case.turn_date),
            "turn_got": day(o.turn_day),
        }
        for o in outcomes
        if not (o.right and o.turn_right)
    ]
    return {"set": label, "kinds": kinds, "misses": misses}


def format_events(rep: dict[str, Any], misses: bool = False) -> str:
    """A Markdown table: expressions and turns right/n (fraction) per kind; then the misses."""

    def cell(v: dict[str, Any]) -> str:
        return f"{v['right']}/{v['n']} ({'-' if v['fraction'] is None else format(v['fraction'], '.3f')})"

    lines = [
        f"events ({rep['set']}), the rules:",
        "| | " + " | ".join((*EVENT_KINDS, "all")) + " |",
        "|" + " --- |" * (len(EVENT_KINDS) + 2),
    ]
    for what in ("expressions", "turns"):
        lines.append(f"| {what} | " + " | ".join(cell(v[what]) for v in rep["kinds"].values()) + " |")
    if misses:
        lines.append("")
        for m in rep["misses"]:
            want = " .. ".join(m["want"]) if m["want"] else "no date"
            got = " .. ".join(m["got"]) if m["got"] else "no date"
            lines.append(
                f"{m['id']} {m['kind']} said {m['said_at']}: {m['expression']!r} want {want}, got {got}; "
                f"turn want {m['turn_date']}, got {m['turn_got']} | {m['text']}"
            )
    return "\n".join(lines)
