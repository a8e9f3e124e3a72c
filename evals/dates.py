"""``memlane eval dates``: do time expressions said without a year land on the right day?

Each line of a labelled set (``evals/dates/*.jsonl``, format and provenance in
``evals/dates/README.md``) is one chat turn, the time it was said, one time expression in it and
the day or inclusive interval it denotes. Every resolver gets the turn and its time; a line
counts as resolved when the resolver's interval for that expression has exactly the labelled
first and last day. The figure is that fraction per kind (plan, report, relative) and overall.

Resolvers: the engine's own rules (``memlane.temporal.find_time_expressions`` on the whole turn,
the span overlapping the labelled expression) and the libraries of ``evals/date_libraries.py``
(the ``eval`` extra: dateparser, timefhuman, ctparse), each with one setting for every line, as
a real resolver would have to run.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

KINDS = ("plan", "report", "relative")
SPLITS = ("calibration", "held", "all")
SPLIT_SEED = 20261128  # the seed of the stratified calibration/held split (split_cases)
DATA_DIR = Path(__file__).resolve().parent / "dates"

DateRange = tuple[date, date]


@dataclass(frozen=True)
class DateCase:
    """One labelled line: ``expression`` is a substring of ``text``; ``start``..``end`` the
    inclusive days it denotes, said at ``said_at``."""

    id: str
    said_at: datetime
    text: str
    expression: str
    kind: str
    start: date
    end: date

    @property
    def char_start(self) -> int:
        return self.text.find(self.expression)

    @property
    def char_end(self) -> int:
        return self.char_start + len(self.expression)


# A resolver's readings of a line's expression: none, one, or (a library that answers a point and
# the period it names, e.g. dateparser's "week" for "two weeks ago") several, any of which counts.
Readings = tuple[DateRange, ...]
Resolver = Callable[[DateCase], Readings]


def _case(row: dict[str, Any], where: str) -> DateCase:
    try:
        case = DateCase(
            id=str(row["id"]),
            said_at=datetime.fromisoformat(row["said_at"]),
            text=row["text"],
            expression=row["expression"],
            kind=row["kind"],
            start=date.fromisoformat(row["start"]),
            end=date.fromisoformat(row["end"]),
        )
    except KeyError as exc:
        raise ValueError(f"{where}: missing field {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    if case.kind not in KINDS:
        raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}, not {case.kind!r}")
    if case.char_start < 0:
        raise ValueError(f"{where}: expression {case.expression!r} is not in the text")
    if case.start > case.end:
        raise ValueError(f"{where}: start {case.start} is after end {case.end}")
    return case


def json_lines(paths: Iterable[Path]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` for each non-blank line of each JSON Lines file ("path:line"); a line
    that is not a JSON object raises ValueError naming it."""
    for path in paths:
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}: a line must be a JSON object")
            yield where, row


def load_cases(paths: Iterable[Path]) -> list[DateCase]:
    """The lines of each JSON Lines file, checked (a bad line raises ValueError naming it)."""
    cases: list[DateCase] = []
    seen: set[str] = set()
    for where, row in json_lines(paths):
        case = _case(row, where)
        if case.id in seen:
            raise ValueError(f"{where}: duplicate id {case.id!r}")
        seen.add(case.id)
        cases.append(case)
    return cases


def split_files(split: str) -> list[Path]:
    """The set's files for ``--split``: calibration, held or all (both)."""
    if split not in SPLITS:
        raise ValueError(f"--split must be one of {', '.join(SPLITS)}, not {split!r}")
    names = ("calibration", "held") if split == "all" else (split,)
    return [DATA_DIR / f"{name}.jsonl" for name in names]


def split_cases(rows: Sequence[dict], seed: int = SPLIT_SEED) -> tuple[list[dict], list[dict]]:
    """The stratified split the set's files were made with: per kind (in sorted order), the
    lines sorted by id are shuffled with one ``random.Random(seed)`` and the first half (rounded
    down) is calibration, the rest held; each half sorted by id."""
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    rng = random.Random(seed)
    calibration: list[dict] = []
    held: list[dict] = []
    for kind in sorted(by_kind):
        group = sorted(by_kind[kind], key=lambda r: r["id"])
        rng.shuffle(group)
        half = len(group) // 2
        calibration += group[:half]
        held += group[half:]
    return sorted(calibration, key=lambda r: r["id"]), sorted(held, key=lambda r: r["id"])


def overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Characters two [start, end) offsets share."""
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def resolve_rules(case: DateCase) -> Readings:
    """The engine's reading: of the spans ``find_time_expressions`` finds in the whole turn, the
    one that overlaps the labelled expression most."""
    from memlane.temporal import find_time_expressions

    target = (case.char_start, case.char_end)
    best, best_overlap = None, 0
    for span in find_time_expressions(case.text, case.said_at):
        shared = overlap((span.char_start, span.char_end), target)
        if shared > best_overlap:
            best, best_overlap = span, shared
    return () if best is None else ((best.start.date(), best.end.date()),)


def resolvers(names: Sequence[str] | None = None) -> dict[str, Resolver]:
    """The rules and every library row (or the ``names`` asked for, in that order)."""
    from evals.date_libraries import LIBRARY_ROWS

    available: dict[str, Resolver] = {"rules": resolve_rules, **LIBRARY_ROWS}
    if not names:
        return available
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown resolver {unknown[0]!r}; known: {', '.join(available)}")
    return {n: available[n] for n in names}


@dataclass(frozen=True)
class Outcome:
    """One resolver on one line: its readings (none: it found nothing) and whether one of them
    is the labelled interval."""

    case: DateCase
    got: Readings

    @property
    def right(self) -> bool:
        return (self.case.start, self.case.end) in self.got


def run(cases: Sequence[DateCase], chosen: dict[str, Resolver]) -> dict[str, list[Outcome]]:
    """Every resolver on every line."""
    return {name: [Outcome(c, resolve(c)) for c in cases] for name, resolve in chosen.items()}


def report(outcomes: dict[str, list[Outcome]], files: Sequence[Path]) -> dict[str, Any]:
    """Per resolver: per kind and overall, lines right / lines (fraction), and its misses."""
    rows = {}
    for name, results in outcomes.items():
        per: dict[str, dict[str, Any]] = {}
        for kind in (*KINDS, "all"):
            mine = [o for o in results if kind == "all" or o.case.kind == kind]
            right = sum(o.right for o in mine)
            per[kind] = {
                "right": right,
                "n": len(mine),
                "fraction": round(right / len(mine), 4) if mine else None,
            }
        rows[name] = {
            "kinds": per,
            "misses": [
                {
                    "id": o.case.id,
                    "kind": o.case.kind,
                    "said_at": o.case.said_at.date().isoformat(),
                    "text": o.case.text,
                    "expression": o.case.expression,
                    "want": [o.case.start.isoformat(), o.case.end.isoformat()],
                    "got": [[a.isoformat(), b.isoformat()] for a, b in o.got],
                }
                for o in results
                if not o.right
            ],
        }
    return {"benchmark": "dates", "files": [str(f) for f in files], "resolvers": rows}


def format_report(rep: dict[str, Any], misses_of: str | None = None) -> str:
    """A Markdown table: one row per resolver, right/n (fraction) per kind; then the misses of
    ``misses_of`` when asked."""
    head = "| resolver | " + " | ".join(f"{k}" for k in (*KINDS, "all")) + " |"
    lines = [head, "|" + " --- |" * (len(KINDS) + 2)]
    for name, row in rep["resolvers"].items():
        cells = [
            f"{v['right']}/{v['n']} ({'-' if v['fraction'] is None else format(v['fraction'], '.3f')})"
            for v in row["kinds"].values()
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if misses_of is not None:
        lines.append("")
        for m in rep["resolvers"][misses_of]["misses"]:
            got = " or ".join(" .. ".join(g) for g in m["got"]) or "none"
            lines.append(
                f"{m['id']} {m['kind']} said {m['said_at']}: {m['expression']!r} want "
                f"{' .. '.join(m['want'])}, got {got} | {m['text']}"
            )
    return "\n".join(lines)
