"""The answer eval: does the top memory answer the question? On the answer set's everyday
histories (:mod:`evals.answers_data`), per kind of question: the top memory's precision
(``precision@1``), the reciprocal rank of the first answering turn within 10 (``mrr@10``) and
whether one is among the first 3 (``hit@3``), for Memlane beside plain BM25 and plain dense of
the same run (:mod:`evals.harness`).

Each history goes into its own bank as one document; a question asked before the history's
last turn gets a bank holding only the turns said by then (what the user's bank held when
they asked). Recall's reference time is the question's ``asked_at``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from evals.answers_data import AnswerHistory, load_answer_set
from evals.compare import comparison_text
from evals.harness import SYSTEMS, consolidate, percentile, progress_bar, rank_all
from evals.report import ALL, QuestionLog, build_report
from evals.systems import parse_systems

HEADLINE_METRICS = ("precision@1", "hit@3", "mrr@10")
# Deep enough for mrr@10 over distinct turns; the histories are small.
RECALL_TOKENS = 8192
BANK_PREFIX = "answers-"


def answer_scores(ranked: Sequence[str], expected: frozenset[str]) -> dict[str, float]:
    """precision@1, hit@3 and mrr@10 of a turn ranking (best first, distinct turns)."""
    first = next((i for i, t in enumerate(ranked[:10], start=1) if t in expected), None)
    return {
        "precision@1": 1.0 if first == 1 else 0.0,
        "hit@3": 1.0 if first is not None and first <= 3 else 0.0,
        "mrr@10": 0.0 if first is None else 1.0 / first,
    }


def _banks(history: AnswerHistory) -> dict[int, str]:
    """The bank id of each prefix length a question of ``history`` needs."""
    out: dict[int, str] = {}
    for q in history.questions:
        n = len(history.turns_before(q.asked_at))
        out[n] = BANK_PREFIX + history.id + ("" if n == len(history.turns) else f"-t{n}")
    return out


def run_answers(
    memory,
    paths: Sequence[Path],
    *,
    systems: Sequence[str] = SYSTEMS,
    budget: str = "mid",
    reuse_banks: bool = False,
    progress: bool = True,
    log: QuestionLog | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Retain every history (each prefix a question needs) and score each question's
    rankings; returns the report dict (:func:`evals.report.build_report`)."""
    systems = parse_systems(systems)
    t0 = time.perf_counter()
    histories = [h for p in paths for h in load_answer_set(Path(p))]
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    retain_s = consolidate_s = 0.0
    with progress_bar(progress) as bar:
        task = bar.add_task("questions", total=sum(len(h.questions) for h in histories))
        for h in histories:
            banks = _banks(h)
            for n, bank in banks.items():
                start = time.perf_counter()
                if not (reuse_banks and memory.store.count_units(bank)):
                    memory.retain(bank, [(h.id, h.turns[:n])])
                retain_s += time.perf_counter() - start
                consolidate_s += consolidate(memory, bank)
            for q in h.questions:
                bank = banks[len(h.turns_before(q.asked_at))]
                rankings, _, ms, _ = rank_all(
                    memory,
                    bank,
                    q.question,
                    systems=systems,
                    reference_time=q.asked_at,
                    recall_tokens=RECALL_TOKENS,
                    budget=budget,
                )
                latencies.append(ms)
                row = {
                    "id": q.id,
                    "category": q.kind,
                    "question": q.question,
                    "answer": q.answer,
                    "expected": sorted(q.expected),
                    "asked_at": q.asked_at.isoformat(),
                    "recall_ms": round(ms, 1),
                    "scores": {s: answer_scores(r, q.expected) for s, r in rankings.items()},
                    "top_turns": {s: r[:5] for s, r in rankings.items()},
                    # why the first turn was wrong, where the set names it as a trap
                    "top_trap": {s: q.traps.get(r[0]) for s, r in rankings.items() if r and r[0] in q.traps},
                }
                rows.append(row)
                if log is not None:
                    log.write(row)
                bar.advance(task, 1)
    info = {
        "files": ", ".join(Path(p).name for p in paths),
        "histories": len(histories),
        "questions": len(rows),
        "systems": ", ".join(systems),
        "budget": budget,
        "recall p50 ms": percentile(latencies, 0.5),
        "recall p95 ms": percentile(latencies, 0.95),
        "retain s": round(retain_s, 1),
        "consolidate s": round(consolidate_s, 1),
        "wall s": round(time.perf_counter() - t0, 1),
    }
    notes = [
        "precision@1: the first turn Memlane returns states the answer; hit@3: one of the first "
        "three does; mrr@10: 1 / the rank of the first that does, within 10 (distinct turns).",
        "Baselines rank the same units straight from the store: bm25 (plain BM25) and dense "
        "(plain cosine with the same embedder).",
    ]
    return build_report(
        benchmark="answers",
        title="Answer precision (the answer set)",
        systems=systems,
        rows=rows,
        info=info,
        headline="precision@1",
        headline_metrics=HEADLINE_METRICS,
        notes=notes,
        command=command,
    )


def format_report(report: dict[str, Any]) -> str:
    """A plain-text table: rows systems x kinds, columns the metrics; then Memlane against the
    best baseline."""
    summary, systems = report["summary"], report["systems"]
    keys = ("precision@1", "hit@3", "mrr@10")
    width = max([9, *(len(s) + 1 for s in systems)])
    info = report["info"]
    lines = [
        f"Answer precision: {info['histories']} histories, {info['questions']} questions, budget "
        f"{info['budget']}, recall p50 {info['recall p50 ms']} ms / p95 {info['recall p95 ms']} ms",
        f"{'system':<{width}}{'kind':<15}{'n':>5}  " + "  ".join(f"{k:>12}" for k in keys),
    ]
    cats = [ALL, *sorted(c for c in summary if c != ALL)]
    for name in systems:
        for cat in cats:
            values = summary.get(cat, {}).get(name) or {}
            if not values:
                continue
            n = summary[cat]["n"].get("precision@1", 0)
            lines.append(
                f"{name:<{width}}{cat:<15}{n:>5}  "
                + "  ".join(f"{values[k]:>12.3f}" if k in values else f"{'-':>12}" for k in keys)
            )
    comparison = comparison_text(report)
    if comparison:
        lines += ["", *comparison]
    return "\n".join(lines)
