"""LoCoMo retrieval eval: evidence recall@k at turn and session level, Memlane vs baselines
(and any channel ablations, :mod:`evals.systems`), in the harness report format (and QA with a
judge when an LLM is given).

Each conversation goes into its own bank, named by the ingest's one rule
(:func:`memlane.ingest.bank_id_for` of its ``sample_id``), the bank ``memlane backfill`` writes. For every question of categories 1-4, recall runs and
the returned memories are turned into a ranking of source turns (a turn takes the rank of the
first memory that carries it). Baselines in the same run rank the same units by plain BM25 and
by plain dense similarity, straight from the store, with no fusion, graph or boosts
(:mod:`evals.harness`). Questions whose evidence normalises to nothing (4 in LoCoMo)
are left out of the recall averages (they still get QA).

The report keeps the keys the first version printed (``turn_recall@5``, ``baselines``,
``per_category``, ...) beside the harness keys (``summary``, ``info``, ``qa_summary``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from evals.ablation import ablation_lines
from evals.compare import comparison_text
from evals.harness import (
    SYSTEMS,
    consolidate,
    percentile,
    progress_bar,
    qa_for,
    qa_systems,
    rank_all,
    spread,
)
from evals.locomo_data import load_locomo_questions
from evals.metrics import recall_at_k, session_recall_at_k
from evals.report import ALL, QuestionLog, build_report
from evals.systems import baselines_of, parse_systems

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# Deep enough that every system returns well over the largest k distinct turns (LoCoMo turns
# are short); kept from the first version so its figures stay comparable.
RECALL_TOKENS = 8192
# The metrics ``beats_best_baseline`` gives a verdict on (those whose k the run has).
HEADLINE_METRICS = ("turn_recall@10", "session_recall@5")


def default_locomo_path() -> Path:
    """../shared/data/locomo10.json next to the repository."""
    return Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo10.json"


def _category(cat: int) -> str:
    return f"{cat} {CATEGORY_NAMES[cat]}"


def run_locomo(
    memory,
    path: Path,
    *,
    ks: Sequence[int] = (5, 10),
    limit: int | None = None,
    progress: bool = True,
    reuse_banks: bool = False,
    log: QuestionLog | None = None,
    qa_llm=None,
    qa_tokens: int = 4096,
    full_context: bool = True,
    qa_window: int | None = None,
    qa_limit: int | None = None,
    systems: Sequence[str] = SYSTEMS,
    command: str | None = None,
    budget: str = "mid",
) -> dict[str, Any]:
    """Ingest each conversation into its own bank and score recall; returns the report dict.
    ``reuse_banks`` skips retain for banks that already hold memories (for tuning recall
    settings against banks built by an earlier run or by ``memlane backfill``); ``log`` receives a row
    per question; ``qa_llm`` turns on QA graded by the LoCoMo judge prompt (on ``qa_limit``
    questions spread over the run when given; the full-context baseline reads the latest
    ``qa_window`` tokens when given); ``systems`` are the systems compared
    (:func:`evals.systems.parse_systems`); ``budget`` is every recall's budget."""
    from evals.qa import locomo_grader, locomo_verdict
    from memlane.ingest import load_conversations

    systems = parse_systems(systems)
    t0 = time.perf_counter()
    conversations = load_conversations(path, format="locomo")
    questions = load_locomo_questions(path, categories=(1, 2, 3, 4))
    if limit is not None:
        conversations = conversations[:limit]
    asked = [
        f"{c.document_id}#{i}" for c in conversations for i in range(len(questions.get(c.document_id, [])))
    ]
    qa_ids = set(spread(asked, qa_limit)) if qa_llm is not None else set()

    ingest_s = consolidate_s = 0.0
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    skipped = 0
    with progress_bar(progress) as bar:
        t_ingest = bar.add_task("retain", total=sum(len(c.turns) for c in conversations))
        t_query = bar.add_task(
            "recall", total=sum(len(questions.get(c.document_id, [])) for c in conversations)
        )
        for conv in conversations:
            bank = conv.bank_id  # the backfill's bank of the same sample
            start = time.perf_counter()
            if reuse_banks and memory.store.count_units(bank):
                bar.advance(t_ingest, len(conv.turns))
            else:
                memory.retain(
                    bank, [(conv.document_id, conv.turns)], progress=lambda n: bar.advance(t_ingest, n)
                )
            ingest_s += time.perf_counter() - start
            consolidate_s += consolidate(memory, bank)
            for i, qa in enumerate(questions.get(conv.document_id, [])):
                bar.advance(t_query, 1)
                relevant = set(qa.evidence)
                row_id = f"{conv.document_id}#{i}"
                if not relevant and row_id not in qa_ids:
                    skipped += 1
                    continue
                rankings, result, ms, tokens = rank_all(
                    memory, bank, qa.question, systems=systems, recall_tokens=RECALL_TOKENS, budget=budget
                )
                scores: dict[str, dict[str, float]] = {s: {} for s in systems}
                if relevant:
                    latencies.append(ms)
                    for system, ranked in rankings.items():
                        for k in ks:
                            scores[system][f"turn_recall@{k}"] = recall_at_k(ranked, relevant, k)
                            scores[system][f"session_recall@{k}"] = session_recall_at_k(ranked, relevant, k)
                else:
                    skipped += 1
                row: dict[str, Any] = {
                    "id": row_id,
                    "category": _category(qa.category),
                    "question": qa.question,
                    "answer": qa.answer,
                    "evidence": qa.evidence,
                    "recall_ms": round(ms, 1),
                    "scores": scores,
                    "top_turns": {s: rankings[s][:10] for s in systems},
                    "tokens": tokens,
                }
                if row_id in qa_ids:
                    row["qa"] = qa_for(
                        memory,
                        qa_llm,
                        bank_id=bank,
                        question=qa.question,
                        result=result,
                        history=conv.turns,
                        grade=locomo_grader(qa.question, qa.answer),
                        verdict=locomo_verdict,
                        qa_tokens=qa_tokens,
                        full_context=full_context,
                        qa_window=qa_window,
                    )
                rows.append(row)
                if log is not None:
                    log.write(row)

    n_scored = sum(1 for r in rows if r["scores"]["memlane"])
    info = {
        "dataset": Path(path).name,
        "conversations": len(conversations),
        "questions": n_scored,
        "skipped (no evidence)": skipped,
        "ks": ", ".join(map(str, ks)),
        "systems": ", ".join(systems),
        "budget": budget,
        **({"qa questions": len(qa_ids), "qa window tokens": qa_window or "whole history"} if qa_ids else {}),
        "recall p50 ms": percentile(latencies, 0.5),
        "recall p95 ms": percentile(latencies, 0.95),
        "retain s": round(ingest_s, 1),
        "consolidate s": round(consolidate_s, 1),
        "wall s": round(time.perf_counter() - t0, 1),
    }
    notes = [
        "Evidence recall: the fraction of a question's evidence turns (session recall: "
        "their sessions) among the first k distinct turns (sessions) a system ranks; "
        "categories 1-4; items without evidence are left out of recall.",
        "Baselines rank the same units straight from the store: bm25 (plain BM25) and dense "
        "(plain cosine with the same embedder), no fusion, graph, time or boosts. An ablation "
        "(e.g. lexical+semantic) is Memlane's recall with only those channels.",
    ]
    report = build_report(
        benchmark="locomo",
        title=f"LoCoMo evidence recall ({Path(path).name})",
        systems=systems,
        rows=rows,
        info=info,
        qa_systems=qa_systems(qa_llm is not None, full_context),
        headline=f"turn_recall@{max(ks)}",
        headline_metrics=HEADLINE_METRICS,
        notes=notes,
        command=command,
    )
    report.update(
        _legacy(
            report, ks, len(conversations), n_scored, skipped, latencies, ingest_s, time.perf_counter() - t0
        )
    )
    return report


def _legacy(
    report: dict[str, Any],
    ks: Sequence[int],
    conversations: int,
    questions: int,
    skipped: int,
    latencies: list[float],
    ingest_s: float,
    wall_s: float,
) -> dict[str, Any]:
    """The first version's keys: Memlane's means at top level, the baselines the run has under
    ``baselines``, ``per_category`` keyed by category number."""
    summary = report["summary"]

    def system(name: str) -> dict[str, Any]:
        out: dict[str, Any] = dict(summary.get(ALL, {}).get(name, {}))
        out["per_category"] = {
            cat.split()[0]: {
                "name": cat.split(maxsplit=1)[1],
                "questions": entry["n"].get(f"turn_recall@{ks[0]}", 0),
                **entry.get(name, {}),
            }
            for cat, entry in summary.items()
            if cat != ALL and entry.get(name)
        }
        return out

    legacy = system("memlane")
    legacy["baselines"] = {b: system(b) for b in baselines_of(report["systems"])}
    legacy.update(
        {
            "conversations": conversations,
            "questions": questions,
            "skipped_no_evidence": skipped,
            "ks": list(ks),
            "recall_ms_p50": percentile(latencies, 0.5),
            "recall_ms_p95": percentile(latencies, 0.95),
            "ingest_s": round(ingest_s, 1),
            "wall_s": round(wall_s, 1),
        }
    )
    return legacy


def format_report(report: dict[str, Any]) -> str:
    """A plain-text table (rows: systems x categories, columns: the metrics), then Memlane
    against the best single-channel baseline on the headline metrics."""
    keys = [f"{m}@{k}" for m in ("turn_recall", "session_recall") for k in report["ks"]]
    summary = report["summary"]
    width = max([9, *(len(s) + 1 for s in report["systems"])])
    lines = [
        f"LoCoMo evidence recall: {report['conversations']} conversations, "
        f"{report['questions']} questions (categories 1-4; {report['skipped_no_evidence']} "
        f"without evidence skipped), wall {report['wall_s']}s, ingest {report['ingest_s']}s, "
        f"recall p50 {report['recall_ms_p50']} ms / p95 {report['recall_ms_p95']} ms",
        f"{'system':<{width}}{'category':<14}{'n':>5}  " + "  ".join(f"{k:>17}" for k in keys),
    ]
    for name in report["systems"]:
        for cat, entry in summary.items():
            values = entry.get(name) or {}
            if cat != ALL and not values:
                continue
            n = report["questions"] if cat == ALL else entry["n"].get(f"turn_recall@{report['ks'][0]}", 0)
            lines.append(
                f"{name:<{width}}{cat:<14}{n:>5}  "
                + "  ".join(f"{values[k]:>17.4f}" if k in values else f"{'-':>17}" for k in keys)
            )
    comparison = comparison_text(report)
    if comparison:
        lines += ["", *comparison]
    tree = ablation_lines(report.get("tree_ablation"))
    if tree:
        lines += ["", *tree]
    return "\n".join(lines)
