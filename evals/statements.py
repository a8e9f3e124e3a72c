"""The statement eval: how precise each slot extractor is, per slot, on the labelled statement
set (``evals/statements/README.md``: user turns in context, each labelled with the slot facts
it states about the speaker's own current situation, or none and why).

An extractor maps a statement to facts ``(slot, value)``. A predicted fact is right when the
statement's labels hold a fact of the same slot whose value matches (:func:`values_match`); a
label is found when some prediction matches it. Per slot family (``favourite:band`` and
``favourite:food`` are one family) the report gives precision, recall and counts, and
``slot_precision``: the share of predictions whose slot alone is right (what a ranking that
only reads the slot needs).

Only a slot family whose precision on the held half is at least the bar may invalidate older
facts (memlane/facts/trust.py keeps the measured table).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable, Sequence

from memlane.query.words import norm_text

SPLITS = ("calibration", "held")


@dataclass(frozen=True, slots=True)
class Statement:
    id: str
    speaker: str
    said_at: datetime
    before: str
    text: str
    facts: tuple[tuple[str, str], ...]  # (slot, value)
    kind: str


@dataclass(frozen=True, slots=True)
class Predicted:
    slot: str
    value: str  # "" when the extractor names the slot only


Extractor = Callable[[Sequence[Statement]], list[list[Predicted]]]


def family(slot: str) -> str:
    """``favourite:band`` -> ``favourite``."""
    return slot.split(":", 1)[0]


def load_statements(path: Path) -> list[Statement]:
    """The statements of one JSON Lines file; ValueError naming the line on a bad one."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            out.append(
                Statement(
                    id=raw["id"],
                    speaker=raw["speaker"],
                    said_at=datetime.fromisoformat(raw["said_at"]),
                    before=raw.get("before") or "",
                    text=raw["text"],
                    facts=tuple((f["slot"], str(f["value"])) for f in raw["facts"]),
                    kind=raw["kind"],
                )
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: {exc}") from None
    return out


def default_statement_paths(split: str) -> list[Path]:
    base = Path(__file__).resolve().parent / "statements"
    if split == "all":
        return [base / f"{s}.jsonl" for s in SPLITS]
    if split not in SPLITS:
        raise ValueError(f"--split must be calibration, held or all, not {split!r}")
    return [base / f"{split}.jsonl"]


def values_match(slot: str, predicted: str, labelled: str) -> bool:
    """Counts by number; other values when one's words contain the other's (``"Harbourline"``
    / ``"Harbourline Freight"``), case and punctuation aside."""
    if family(slot) == "count":
        return predicted.strip() == labelled.strip()
    p, g = set(norm_text(predicted).split()), set(norm_text(labelled).split())
    return bool(p and g) and (p <= g or g <= p)


def _slot_match(pred: Predicted, slot: str) -> bool:
    # favourite:<category> and count:<thing> are matched on the family: the category words an
    # extractor and a labeller choose differ ("favourite:team" / "favourite:football_team").
    return family(pred.slot) == family(slot) if family(slot) in ("favourite", "count") else pred.slot == slot


def score(statements: Sequence[Statement], predictions: Sequence[Sequence[Predicted]]) -> dict[str, dict]:
    """Per slot family and ``all``: predicted, right, slot_right, labelled, found; precision,
    slot_precision and recall."""
    tally: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for st, preds in zip(statements, predictions):
        for p in preds:
            fam = family(p.slot)
            right = any(
                _slot_match(p, s) and (not p.value or values_match(s, p.value, v)) for s, v in st.facts
            )
            slot_right = any(_slot_match(p, s) for s, _ in st.facts)
            for key in (fam, "all"):
                tally[key]["predicted"] += 1
                tally[key]["right"] += right and bool(p.value)
                tally[key]["slot_right"] += slot_right
        for s, v in st.facts:
            found = any(_slot_match(p, s) and p.value and values_match(s, p.value, v) for p in preds)
            for key in (family(s), "all"):
                tally[key]["labelled"] += 1
                tally[key]["found"] += found
    out = {}
    for key, t in tally.items():
        valued = t["predicted"]
        out[key] = {
            **{k: t[k] for k in ("predicted", "right", "slot_right", "labelled", "found")},
            "precision": round(t["right"] / valued, 4) if valued else None,
            "slot_precision": round(t["slot_right"] / t["predicted"], 4) if t["predicted"] else None,
            "recall": round(t["found"] / t["labelled"], 4) if t["labelled"] else None,
        }
    return out


def run_statements(
    paths: Iterable[Path], extractors: dict[str, Extractor]
) -> tuple[dict[str, dict[str, dict]], list[dict]]:
    """Each extractor's per-slot scores over the files, and one row per statement with every
    extractor's predictions (for tracing a miss)."""
    statements = [s for p in paths for s in load_statements(Path(p))]
    report: dict[str, dict[str, dict]] = {}
    rows = [
        {"id": s.id, "text": s.text, "kind": s.kind, "facts": s.facts, "predicted": {}} for s in statements
    ]
    for name, extract in extractors.items():
        preds = extract(statements)
        report[name] = score(statements, preds)
        for row, p in zip(rows, preds):
            row["predicted"][name] = [(x.slot, x.value) for x in p]
    return report, rows


def format_statements(report: dict[str, dict[str, dict]], files: str) -> str:
    """One table per extractor: slot family, counts, precision, slot precision, recall."""
    lines = [f"Slot extraction on {files}"]
    for name, slots in report.items():
        lines += [
            "",
            f"{name}:",
            f"{'slot':<14}{'pred':>6}{'label':>7}{'precision':>11}{'slot prec':>11}{'recall':>8}",
        ]
        for key in ["all", *sorted(k for k in slots if k != "all")]:
            t = slots[key]

            def f(x):
                return f"{x:.3f}" if x is not None else "-"

            lines.append(
                f"{key:<14}{t['predicted']:>6}{t['labelled']:>7}{f(t['precision']):>11}"
                f"{f(t['slot_precision']):>11}{f(t['recall']):>8}"
            )
    return "\n".join(lines)
