"""The temporal tree's ablation: Memlane's recall (with the tree) against the same recall with
the tree stage off (``flat``), per category, on the run's headline metrics, with a paired
bootstrap 95 % interval of the difference (the interval :mod:`evals.compare` uses), and the
tokens each returned per question."""

from __future__ import annotations

from typing import Any, Sequence

from evals.compare import paired_bootstrap_ci
from evals.summary import ALL
from evals.systems import FLAT, MEMLANE


def tree_ablation(
    rows: Sequence[dict[str, Any]], metrics: Sequence[str], a: str = MEMLANE, b: str = FLAT
) -> dict[str, Any] | None:
    """``{category: {"n", metric: {a, b, diff, ci}, "tokens": {a, b}}}`` ("all" first), or None
    when the rows do not score both systems."""
    if not any(b in r.get("scores", {}) for r in rows):
        return None
    cats = [ALL, *sorted({r["category"] for r in rows})]
    out: dict[str, Any] = {}
    for cat in cats:
        sel = [r for r in rows if cat == ALL or r["category"] == cat]
        entry: dict[str, Any] = {"n": len(sel)}
        for m in metrics:
            pairs = [
                (r["scores"][a][m], r["scores"][b][m])
                for r in sel
                if m in r["scores"].get(a, {}) and m in r["scores"].get(b, {})
            ]
            if not pairs:
                continue
            xa, xb = [p[0] for p in pairs], [p[1] for p in pairs]
            lo, hi = paired_bootstrap_ci(xa, xb)
            ma, mb = sum(xa) / len(xa), sum(xb) / len(xb)
            entry[m] = {"n": len(pairs), a: ma, b: mb, "diff": ma - mb, "ci": [lo, hi]}
        toks = [r["tokens"] for r in sel if a in r.get("tokens", {}) and b in r.get("tokens", {})]
        if toks:
            entry["tokens"] = {s: sum(t[s] for t in toks) / len(toks) for s in (a, b)}
        out[cat] = entry
    return out


def ablation_lines(ablation: dict[str, Any] | None, a: str = MEMLANE, b: str = FLAT) -> list[str]:
    """Plain-text (and Markdown-friendly) table of :func:`tree_ablation`."""
    if not ablation:
        return []
    metrics = [k for k in next(iter(ablation.values())) if k not in ("n", "tokens")]
    lines = [
        f"Tree ablation: {a} (tree recall) - {b} (flat), paired bootstrap 95% CI; "
        "significant where the interval excludes 0; tokens: mean recalled tokens per question.",
    ]
    for m in metrics:
        lines.append(f"{m}:")
        lines.append(f"  {'category':<28}{'n':>5}  {a:>8}  {b:>8}  {'diff':>7}  {'95% CI':>17}")
        for cat, e in ablation.items():
            if m not in e:
                continue
            x = e[m]
            lines.append(
                f"  {cat:<28}{x['n']:>5}  {x[a]:>8.3f}  {x[b]:>8.3f}  {x['diff']:>+7.3f}  "
                f"[{x['ci'][0]:+.3f}, {x['ci'][1]:+.3f}]"
            )
    lines.append("recalled tokens per question:")
    for cat, e in ablation.items():
        if "tokens" in e:
            t = e["tokens"]
            lines.append(f"  {cat:<28}{e['n']:>5}  {t[a]:>8.0f}  {t[b]:>8.0f}  {t[a] - t[b]:>+7.0f}")
    return lines
