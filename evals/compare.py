"""Memlane against the best single-channel baseline, per category and metric, with a paired
bootstrap 95 % interval of the difference.

For each category (``"all"`` first) and metric Memlane has: Memlane's mean, each baseline's
mean (``bm25``, ``dense``: whichever the run has), the **best baseline** (the highest mean for
that metric in that category; ties go to the first in run order), and the difference
Memlane - best over the questions both were scored on, with a percentile interval from
resampling those questions with replacement (:func:`paired_bootstrap_ci`; a fixed seed, so a
report is reproducible). ``beats_best_baseline`` says, per headline metric over all
questions, whether that difference is strictly above zero.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from evals.summary import ALL
from evals.systems import MEMLANE, baselines_of

RESAMPLES = 2000
SEED = 0
# Resampled means computed this many at a time (bounded memory for thousands of questions).
_CHUNK = 500


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(a - b)``: questions (pairs) are resampled with
    replacement ``resamples`` times; the interval is the ``(1 - level) / 2`` and
    ``(1 + level) / 2`` quantiles of the resampled mean differences. ``(nan, nan)`` for no
    pairs."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, _CHUNK):
        stop = min(resamples, start + _CHUNK)
        idx = rng.integers(0, d.size, size=(stop - start, d.size))
        means[start:stop] = d[idx].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _r(x: float) -> float:
    return round(float(x), 4)


def _mean(xs: list[float]) -> float | None:
    return _r(sum(xs) / len(xs)) if xs else None


def compare_to_baselines(
    rows: Sequence[dict[str, Any]],
    systems: Sequence[str],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Any]:
    """The comparison section of a report: ``{category: {metric: entry}}`` with ``"all"`` first
    and categories sorted, each entry ``{"memlane", "baselines": {name: mean}, "best_baseline",
    "best_value", "diff", "ci95": [lo, hi], "n"}`` (``n``: questions scored for both Memlane and
    the best baseline; ``diff`` is the mean paired difference over them; ``beats``: diff > 0,
    before rounding). Empty when the run has
    no Memlane or no baseline."""
    baselines = baselines_of(systems)
    if MEMLANE not in systems or not baselines:
        return {}
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[ALL].append(row)
        groups[str(row.get("category"))].append(row)
    out: dict[str, Any] = {}
    for cat in [ALL] + sorted(c for c in groups if c != ALL):
        members = [r.get("scores", {}) for r in groups[cat]]
        metrics = list(dict.fromkeys(m for s in members for m in (s.get(MEMLANE) or {})))
        entries: dict[str, Any] = {}
        for metric in metrics:
            ours = [float(s[MEMLANE][metric]) for s in members if metric in (s.get(MEMLANE) or {})]
            means = {}
            for b in baselines:
                values = [float(s[b][metric]) for s in members if metric in (s.get(b) or {})]
                means[b] = _mean(values)
            scored = {b: m for b, m in means.items() if m is not None}
            if not scored:
                continue
            best = max(scored, key=lambda b: scored[b])  # max keeps the first of equals
            pairs = [
                (float(s[MEMLANE][metric]), float(s[best][metric]))
                for s in members
                if metric in (s.get(MEMLANE) or {}) and metric in (s.get(best) or {})
            ]
            a = [p[0] for p in pairs]
            b_ = [p[1] for p in pairs]
            lo, hi = paired_bootstrap_ci(a, b_, resamples=resamples, seed=seed)
            diff = (sum(a) - sum(b_)) / len(pairs) if pairs else None
            entries[metric] = {
                "memlane": _mean(ours),
                "baselines": means,
                "best_baseline": best,
                "best_value": scored[best],
                "diff": None if diff is None else _r(diff),
                "ci95": [_r(lo), _r(hi)] if pairs else None,
                "n": len(pairs),
                # from the exact difference: the verdict does not depend on the rounding
                "beats": diff is not None and diff > 0,
            }
        out[cat] = entries
    return out


def beats_best_baseline(comparison: dict[str, Any], headline_metrics: Sequence[str]) -> dict[str, bool]:
    """``{metric: Memlane's mean paired difference to the best baseline over all questions is
    > 0}`` for each headline metric the comparison has (a k not run is simply absent)."""
    overall = comparison.get(ALL, {})
    return {m: bool(overall[m]["beats"]) for m in headline_metrics if m in overall}


# --------------------------------------------------------------------------------------------
# Tables


def _f(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def _signed(x: Any) -> str:
    return "-" if x is None else f"{x:+.3f}"


def _ci(ci: Any) -> str:
    return "-" if not ci else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def comparison_rows(report: dict[str, Any], metric: str) -> list[list[str]]:
    """One headline metric's table: a header, then a row per category (category, n, memlane,
    each baseline, best, diff, 95 % CI, beats)."""
    comparison = report.get("comparison") or {}
    baselines = baselines_of(report.get("systems", []))
    header = ["category", "n", MEMLANE, *baselines, "best", "diff", "95% CI", "beats"]
    out = [header]
    for cat, entries in comparison.items():
        e = entries.get(metric)
        if not e:
            continue
        out.append(
            [
                cat,
                str(e["n"]),
                _f(e["memlane"]),
                *(_f(e["baselines"].get(b)) for b in baselines),
                e["best_baseline"],
                _signed(e["diff"]),
                _ci(e["ci95"]),
                "yes" if e["beats"] else "no",
            ]
        )
    return out if len(out) > 1 else []


def _headlines(report: dict[str, Any]) -> list[str]:
    overall = (report.get("comparison") or {}).get(ALL, {})
    return [m for m in report.get("headline_metrics", []) if m in overall]


TITLE = "Memlane vs best single-channel baseline"
EXPLAIN = (
    "diff = memlane - best baseline (the baseline with the highest mean for that metric and "
    "category), paired over questions; 95% CI: paired bootstrap over questions "
    f"({RESAMPLES} resamples, seed {SEED}); beats: diff > 0 (significant at 95% only where the "
    "interval excludes 0)."
)


def comparison_markdown(report: dict[str, Any]) -> list[str]:
    """Markdown lines: one table per headline metric (nothing when the run has no baseline)."""
    metrics = _headlines(report)
    if not metrics:
        return []
    lines = [f"## {TITLE}", "", EXPLAIN, ""]
    for metric in metrics:
        table = comparison_rows(report, metric)
        header = table[0]
        # numbers right-aligned: n, memlane, the baselines and diff
        numeric = set(range(1, len(header) - 4)) | {len(header) - 3}
        lines += [f"### {metric}", "", "| " + " | ".join(header) + " |"]
        lines.append("| " + " | ".join("---:" if i in numeric else "---" for i in range(len(header))) + " |")
        lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
        lines.append("")
    return lines


def comparison_text(report: dict[str, Any]) -> list[str]:
    """Plain-text lines (aligned columns): one block per headline metric."""
    metrics = _headlines(report)
    if not metrics:
        return []
    lines = [f"{TITLE} ({EXPLAIN})"]
    for metric in metrics:
        table = comparison_rows(report, metric)
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        lines.append(f"{metric}:")
        for row in table:
            cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
            lines.append("  " + "  ".join(cells))
    return lines
