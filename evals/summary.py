"""Summaries of per-question rows: metric means per system and category, QA accuracy with
Wilson intervals, and the metric families a summary holds. Shared by the Markdown report
(:mod:`evals.report`) and the plots (:mod:`evals.plots`), which import it and not each other's
internals.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

from evals.metrics import wilson_interval

ALL = "all"


def split_metric(name: str) -> tuple[str, int | None]:
    """``"turn_recall_any@10"`` -> ``("turn_recall_any", 10)``; a name without ``@k`` ->
    ``(name, None)``."""
    family, sep, k = name.rpartition("@")
    if sep and k.isdigit():
        return family, int(k)
    return name, None


def summarize_scores(rows: Sequence[dict[str, Any]], systems: Sequence[str]) -> dict[str, Any]:
    """Means of every metric per system, overall (``"all"``) and per category.

    Returns ``{category: {"questions": rows in it, "n": {metric: rows scored},
    system: {metric: mean}}}`` with ``"all"`` first and categories sorted."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[ALL].append(row)
        groups[str(row.get("category"))].append(row)
    out: dict[str, Any] = {}
    for cat in [ALL] + sorted(c for c in groups if c != ALL):
        members = groups[cat]
        entry: dict[str, Any] = {"questions": len(members), "n": {}}
        for system in systems:
            sums: dict[str, float] = defaultdict(float)
            counts: dict[str, int] = defaultdict(int)
            for row in members:
                for metric, value in (row.get("scores", {}).get(system) or {}).items():
                    sums[metric] += float(value)
                    counts[metric] += 1
            # Metrics keep the order the rows give them (turn level before session level).
            entry[system] = {m: round(sums[m] / counts[m], 4) for m in sums}
            for m, c in counts.items():
                entry["n"][m] = max(entry["n"].get(m, 0), c)
        out[cat] = entry
    return out


def summarize_qa(rows: Sequence[dict[str, Any]], systems: Sequence[str]) -> dict[str, Any]:
    """QA accuracy per system, overall and per category, with Wilson 95 % intervals and mean
    context tokens. Questions whose answer or grade failed (``"error"`` in the row) are counted
    apart and left out of the accuracy."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("qa"):
            groups[ALL].append(row)
            groups[str(row.get("category"))].append(row)
    out: dict[str, Any] = {}
    for cat in [ALL] + sorted(c for c in groups if c != ALL):
        entry: dict[str, Any] = {}
        for system in systems:
            graded = [r["qa"][system] for r in groups[cat] if system in r["qa"]]
            ok = [g for g in graded if "error" not in g]
            correct = sum(1 for g in ok if g.get("correct"))
            lo, hi = wilson_interval(correct, len(ok))
            tokens = [g["context_tokens"] for g in ok if "context_tokens" in g]
            entry[system] = {
                "n": len(ok),
                "correct": correct,
                "accuracy": round(correct / len(ok), 4) if ok else None,
                "ci95": [round(lo, 4), round(hi, 4)],
                "context_tokens_mean": round(sum(tokens) / len(tokens), 1) if tokens else None,
                "errors": len(graded) - len(ok),
            }
        out[cat] = entry
    return out


def families(summary: dict[str, Any], systems: Sequence[str]) -> dict[str, list[int]]:
    """Metric families in the summary and their ks, in first-seen order."""
    fams: dict[str, set[int]] = {}
    for system in systems:
        for metric in summary.get(ALL, {}).get(system, {}):
            family, k = split_metric(metric)
            fams.setdefault(family, set())
            if k is not None:
                fams[family].add(k)
    return {f: sorted(ks) for f, ks in fams.items()}


def finite(x: Any) -> bool:
    """A real, finite number (not a bool, NaN or infinity)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
