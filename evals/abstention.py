"""Abstention study: does recall's ``abstain`` flag separate questions the conversation never
answers from those it does? (issue 13 part 6; the rule: memlane/recall/abstain.py)

LoCoMo: category 5 (adversarial: asked about the wrong person or a detail never said) should
abstain; categories 1-4 should not. LongMemEval: the ``_abs`` questions should abstain.

Recall runs once per question on banks already retained (``memlane eval locomo`` /
``memlane backfill`` into ``--data-dir``; this script never retains), with the engine's
default settings (the flag as shipped) and the signals recorded. The thresholds are then swept
on a calibration half of the conversations (the even-numbered ones in file order: conv-26, 41,
43, 47, 49), the operating point with the highest category-5 abstain rate whose category 1-4
abstain rate stays <= ``--max-false`` (default 3.5 %: the held-out half runs 1-2 points higher than the calibration half) is chosen there, and it is reported on the held-out half
and on all ten. Nothing is tuned on single questions.

    python -m evals.abstention locomo10.json --data-dir DIR [--lme longmemeval_s_dev60.json
        --lme-data-dir DIR] [--signals out.jsonl] [--from-signals out.jsonl]

``--signals`` writes the per-question signals; ``--from-signals`` re-runs the sweep from such
a file without recall.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable

from memlane.recall.abstain import decide, signals

RECALL_TOKENS = 8192  # as evals/locomo.py
GAPS = [round(0.05 * i, 2) for i in range(1, 21)]
NAMED_MAX = [0.0, 0.2, 0.25, 0.34, 0.4, 0.5, 0.6, 0.67, 0.75, 1.0]
COSINES = [0.0, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7]


def _outcome(r) -> dict:
    """What one recall said about abstaining, as a signals row records it."""
    return {
        "abstain": r.abstain,
        "reason": r.abstain_reason,
        "signals": r.abstain_signals,
        "abstain_ms": r.timings_ms.get("abstain"),
        "total_ms": r.timings_ms.get("total"),
        "top": _top(r),
    }


def _top(result, n: int = 20) -> list[dict[str, Any]]:
    """The best memories' text and speaker: enough to recompute the signals offline."""
    return [
        {"text": m.unit.text, "metadata": {"speaker": (m.unit.metadata or {}).get("speaker")}}
        for m in result.memories[:n]
    ]


def collect_locomo(path: Path, data_dir: Path) -> list[dict[str, Any]]:
    """One row per LoCoMo question (all categories): sample, category, signals, the shipped
    flag and its time."""
    from evals.locomo_data import load_locomo_questions
    from memlane.engine import Memory
    from memlane.ingest import bank_id_for
    from memlane.settings import Settings

    questions = load_locomo_questions(path, categories=None)
    rows = []
    memory = Memory(Settings(data_dir=data_dir))
    try:
        for order, (sample, items) in enumerate(questions.items()):
            bank = bank_id_for(sample)
            for qa in items:
                r = memory.recall(bank, qa.question, max_tokens=RECALL_TOKENS)
                rows.append(
                    {
                        "dataset": "locomo",
                        "sample": sample,
                        "half": "calibration" if order % 2 == 0 else "held-out",
                        "category": qa.category,
                        "question": qa.question,
                        **_outcome(r),
                    }
                )
            memory.derived.evict(bank)
            print(f"  {sample}: {len(items)} questions", file=sys.stderr)
    finally:
        memory.close()
    return rows


def collect_lme(path: Path, data_dir: Path) -> list[dict[str, Any]]:
    """One row per LongMemEval question (bank per question, question date as reference)."""
    from memlane.engine import Memory
    from memlane.ingest.longmemeval import load_longmemeval
    from memlane.settings import Settings

    rows = []
    memory = Memory(Settings(data_dir=data_dir))
    try:
        for q in load_longmemeval(path):
            r = memory.recall(q.bank_id, q.question, max_tokens=RECALL_TOKENS, reference_time=q.question_date)
            rows.append(
                {
                    "dataset": "longmemeval",
                    "sample": q.question_id,
                    "half": "all",
                    "category": "abs" if q.abstention else "answerable",
                    "question": q.question,
                    **_outcome(r),
                }
            )
            memory.derived.evict(q.bank_id)
    finally:
        memory.close()
    return rows


def rates(rows: Iterable[dict[str, Any]], flag) -> dict[str, Any]:
    """Abstain rate per category, cat-5 recall/precision against categories 1-4."""
    per: dict[Any, list[int]] = {}
    for r in rows:
        per.setdefault(r["category"], []).append(1 if flag(r) else 0)
    out: dict[str, Any] = {
        str(c): {"n": len(v), "abstain": sum(v) / len(v)} for c, v in sorted(per.items(), key=str)
    }
    pos = per.get(5, [])
    neg = [x for c in (1, 2, 3, 4) for x in per.get(c, [])]
    tp, fp = sum(pos), sum(neg)
    out["cat5_recall"] = tp / len(pos) if pos else None
    out["cat1-4_false_abstain"] = fp / len(neg) if neg else None
    out["precision"] = tp / (tp + fp) if tp + fp else None
    return out


def point(gap: float, named: float, cosine: float, unknown: str = "all") -> SimpleNamespace:
    """A FactsSettings-like object for :func:`decide`."""
    return SimpleNamespace(
        abstain_gap=gap, abstain_named_max=named, abstain_min_cosine=cosine, abstain_unknown_entities=unknown
    )


def sweep(rows: list[dict[str, Any]], max_false: float) -> tuple[SimpleNamespace, dict[str, Any]]:
    """The grid point with the highest cat-5 abstain rate on ``rows`` whose categories 1-4
    abstain at most ``max_false`` (ties: the lower false rate, then the larger margins)."""
    best = None
    for unknown, gap, named, cos in itertools.product(("all", "any", "off"), GAPS, NAMED_MAX, COSINES):
        p = point(gap, named, cos, unknown)
        m = rates(rows, lambda r, p=p: decide(r["signals"], p)[0])
        if m["cat1-4_false_abstain"] is None or m["cat1-4_false_abstain"] > max_false:
            continue
        key = (m["cat5_recall"], -m["cat1-4_false_abstain"], gap, -named, -cos)
        if best is None or key > best[0]:
            best = (key, p, m)
    assert best is not None, "no grid point keeps categories 1-4 under the limit"
    return best[1], best[2]


def _fmt(name: str, m: dict[str, Any]) -> str:
    cats = "  ".join(
        f"cat{c} {m[c]['abstain']:.3f} (n={m[c]['n']})" for c in ("1", "2", "3", "4", "5") if c in m
    )
    prec = "-" if m["precision"] is None else f"{m['precision']:.3f}"
    return (
        f"{name:<34} cat5 recall {m['cat5_recall']:.3f}  cat1-4 false {m['cat1-4_false_abstain']:.3f}  "
        f"precision {prec}\n{'':<34} {cats}"
    )


def report(rows: list[dict[str, Any]], max_false: float) -> str:
    """The text report: the shipped flag, then the calibrated point on each half and on all."""
    from memlane.settings import FactsSettings

    shipped = FactsSettings()
    flag = lambda r: decide(r["signals"], shipped)[0]  # noqa: E731 - the defaults, on the signals
    lines = lme_lines([r for r in rows if r["dataset"] == "longmemeval"], flag)
    loco = [r for r in rows if r["dataset"] == "locomo"]
    if not loco:
        return "\n".join(lines)
    cal = [r for r in loco if r["half"] == "calibration"]
    held = [r for r in loco if r["half"] == "held-out"]
    lines.append(f"LoCoMo: {len(loco)} questions ({len(cal)} calibration, {len(held)} held-out)")
    lines.append(_fmt("default settings, all", rates(loco, flag)))
    lines.append(_fmt("default settings, held-out", rates(held, flag)))
    ms = sorted(r["abstain_ms"] for r in loco if r["abstain_ms"] is not None)
    if ms:
        lines.append(f"abstain step: p50 {ms[len(ms) // 2]:.2f} ms, p95 {ms[int(0.95 * len(ms))]:.2f} ms")
    p, m = sweep(cal, max_false)
    lines.append(
        f"calibrated on the calibration half (cat 1-4 <= {max_false:.1%}): abstain_gap={p.abstain_gap} "
        f"abstain_named_max={p.abstain_named_max} abstain_min_cosine={p.abstain_min_cosine} "
        f"unknown_entities={p.abstain_unknown_entities}"
    )
    chosen = lambda r: decide(r["signals"], p)[0]  # noqa: E731
    lines.append(_fmt("calibration half", m))
    lines.append(_fmt("held-out half", rates(held, chosen)))
    lines.append(_fmt("all", rates(loco, chosen)))
    # Each signal alone, at the chosen point, on all: what each contributes.
    for label, q in (
        ("unknown entities only", point(2.0, -1.0, -9.0, "all")),
        ("wrong subject only", point(p.abstain_gap, p.abstain_named_max, -9.0, "off")),
        ("cosine floor only", point(2.0, -1.0, p.abstain_min_cosine, "off")),
    ):
        lines.append(_fmt(label + ", all", rates(loco, lambda r, q=q: decide(r["signals"], q)[0])))
    lines += lme_lines(
        [r for r in rows if r["dataset"] == "longmemeval"], chosen, "the LoCoMo-calibrated point"
    )
    return "\n".join(lines)


def lme_lines(lme: list[dict[str, Any]], flag, name: str = "default settings") -> list[str]:
    """LongMemEval: how many ``_abs`` questions abstain, and how many answerable ones do."""
    if not lme:
        return []
    abs_ = [flag(r) for r in lme if r["category"] == "abs"]
    ans = [flag(r) for r in lme if r["category"] != "abs"]
    ms = sorted(r["abstain_ms"] for r in lme if r["abstain_ms"] is not None)
    return [
        f"LongMemEval ({name}): _abs abstain {sum(abs_)}/{len(abs_)}, answerable abstain "
        f"{sum(ans)}/{len(ans)}" + (f"; abstain step p50 {ms[len(ms) // 2]:.2f} ms" if ms else "")
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.abstention", description=__doc__.split("\n")[0])
    ap.add_argument("locomo", type=Path, nargs="?")
    ap.add_argument("--data-dir", type=Path, help="The LoCoMo banks (a Memlane data dir).")
    ap.add_argument("--lme", type=Path, help="A LongMemEval file whose banks are in --lme-data-dir.")
    ap.add_argument("--lme-data-dir", type=Path)
    ap.add_argument(
        "--max-false",
        type=float,
        default=0.035,
        help="Cat 1-4 abstain rate allowed on the calibration half (default 0.035: held-out runs 1-2 points higher).",
    )
    ap.add_argument("--signals", type=Path, help="Write the per-question rows (JSON Lines).")
    ap.add_argument("--from-signals", type=Path, help="Sweep rows written by --signals; no recall.")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.from_signals:
        rows = [json.loads(line) for line in args.from_signals.read_text().splitlines() if line.strip()]
        for r in rows:  # recompute with this version of the signals (the probe's answers kept)
            if "top" in r:
                unknown = set(r["signals"]["unknown_entities"])
                r["signals"] = signals(
                    r["question"], r["top"], r["signals"]["top_cosine"], lambda n, u=unknown: n not in u
                )
    else:
        if (args.locomo is None or args.data_dir is None) and args.lme is None:
            ap.error("give the LoCoMo file and --data-dir, or --lme (or --from-signals)")
        rows = collect_locomo(args.locomo, args.data_dir) if args.locomo is not None else []
        if args.lme is not None:
            rows += collect_lme(args.lme, args.lme_data_dir or args.data_dir)
        if args.signals:
            args.signals.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(report(rows, args.max_false))
    print(f"wall {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
