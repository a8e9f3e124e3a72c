"""LoCoMo retrieval eval: evidence recall@k at turn and session level, Memlane vs baselines.

Each conversation goes into its own bank. For every question of categories 1-4, recall runs and
the returned memories are turned into a ranking of source turns (a turn takes the rank of the
first memory that carries it). Baselines in the same run rank the same units by plain BM25 and
by plain dense similarity, straight from the store, with no fusion, graph or boosts.
Questions whose evidence normalises to nothing (4 in LoCoMo) are left out of the averages.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from memlane.eval.locomo_data import load_locomo_questions
from memlane.eval.metrics import mean, ranked_turns, recall_at_k, session_recall_at_k

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SYSTEMS = ("memlane", "bm25", "dense")
# Deep enough that every system returns well over the largest k distinct turns.
RECALL_TOKENS = 8192
BASELINE_DEPTH = 100


def default_locomo_path() -> Path:
    """../shared/data/locomo10.json next to the repository."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo10.json"


def _bank_id(sample_id: str) -> str:
    return f"locomo-{sample_id}"


def _turns_of(hits_fields: Sequence[dict[str, Any]]) -> list[str]:
    return ranked_turns([list(f.get("source_turns") or ()) for f in hits_fields])


def run_locomo(memory, path: Path, *, ks: Sequence[int] = (5, 10), limit: int | None = None,
               progress: bool = True, reuse_banks: bool = False) -> dict[str, Any]:
    """Ingest each conversation into its own bank and score recall; returns the report dict.
    ``reuse_banks`` skips retain for banks that already hold memories (for tuning recall
    settings against banks built by an earlier run of the same code)."""
    from memlane.ingest import load_conversations

    t0 = time.perf_counter()
    conversations = load_conversations(path, format="locomo")
    questions = load_locomo_questions(path, categories=(1, 2, 3, 4))
    if limit is not None:
        conversations = conversations[:limit]
    bar = _progress(progress)

    ingest_s = 0.0
    scores: dict[str, dict[str, list[float]]] = {s: defaultdict(list) for s in SYSTEMS}
    per_cat: dict[str, dict[int, dict[str, list[float]]]] = {
        s: defaultdict(lambda: defaultdict(list)) for s in SYSTEMS}
    latencies: list[float] = []
    skipped = 0
    n_questions = 0
    with bar:
        total_turns = sum(len(c.turns) for c in conversations)
        total_q = sum(len(questions.get(c.document_id, [])) for c in conversations)
        t_ingest = bar.add_task("retain", total=total_turns)
        t_query = bar.add_task("recall", total=total_q)
        for conv in conversations:
            bank = _bank_id(conv.document_id)
            start = time.perf_counter()
            if reuse_banks and memory.store.count_units(bank):
                bar.advance(t_ingest, len(conv.turns))
            else:
                memory.retain(bank, [(conv.document_id, conv.turns)],
                              progress=lambda n: bar.advance(t_ingest, n))
            ingest_s += time.perf_counter() - start
            for qa in questions.get(conv.document_id, []):
                bar.advance(t_query, 1)
                relevant = set(qa.evidence)
                if not relevant:
                    skipped += 1
                    continue
                n_questions += 1
                start = time.perf_counter()
                result = memory.recall(bank, qa.question, max_tokens=RECALL_TOKENS)
                latencies.append((time.perf_counter() - start) * 1000)
                vector = memory.embedder.embed([qa.question])
                rankings = {
                    "memlane": ranked_turns([m.unit.source_turns for m in result.memories]),
                    "bm25": _turns_of([h.fields for h in memory.store.search_lexical(
                        bank, qa.question, BASELINE_DEPTH, fields=["source_turns"])]),
                    "dense": _turns_of([h.fields for h in memory.store.search_dense(
                        bank, vector, BASELINE_DEPTH, fields=["source_turns"])[0]]),
                }
                for system, ranked in rankings.items():
                    for k in ks:
                        for key, value in ((f"turn_recall@{k}", recall_at_k(ranked, relevant, k)),
                                           (f"session_recall@{k}", session_recall_at_k(ranked, relevant, k))):
                            scores[system][key].append(value)
                            per_cat[system][qa.category][key].append(value)

    def summary(system: str) -> dict[str, Any]:
        out: dict[str, Any] = {key: round(mean(v), 4) for key, v in scores[system].items()}
        out["per_category"] = {
            str(cat): {"name": CATEGORY_NAMES[cat], "questions": len(next(iter(vals.values()))),
                       **{key: round(mean(v), 4) for key, v in vals.items()}}
            for cat, vals in sorted(per_cat[system].items())}
        return out

    report = summary("memlane")
    report["baselines"] = {"bm25": summary("bm25"), "dense": summary("dense")}
    latencies.sort()
    report.update({
        "conversations": len(conversations), "questions": n_questions,
        "skipped_no_evidence": skipped, "ks": list(ks),
        "recall_ms_p50": round(latencies[len(latencies) // 2], 1) if latencies else None,
        "recall_ms_p95": round(latencies[int(len(latencies) * 0.95)], 1) if latencies else None,
        "ingest_s": round(ingest_s, 1), "wall_s": round(time.perf_counter() - t0, 1),
    })
    return report


def format_report(report: dict[str, Any]) -> str:
    """A plain-text table: rows are systems x categories, columns the metrics."""
    keys = [f"{m}@{k}" for m in ("turn_recall", "session_recall") for k in report["ks"]]
    lines = [f"LoCoMo evidence recall: {report['conversations']} conversations, "
             f"{report['questions']} questions (categories 1-4; {report['skipped_no_evidence']} "
             f"without evidence skipped), wall {report['wall_s']}s, ingest {report['ingest_s']}s, "
             f"recall p50 {report['recall_ms_p50']} ms / p95 {report['recall_ms_p95']} ms",
             f"{'system':<9}{'category':<14}{'n':>5}  " + "  ".join(f"{k:>17}" for k in keys)]
    systems = {"memlane": report, **report["baselines"]}
    for name, data in systems.items():
        rows = [("all", report["questions"], data)]
        rows += [(f"{c} {v['name']}", v["questions"], v) for c, v in data["per_category"].items()]
        for label, n, values in rows:
            lines.append(f"{name:<9}{label:<14}{n:>5}  " + "  ".join(f"{values[k]:>17.4f}" for k in keys))
    return "\n".join(lines)


def _progress(enabled: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), disable=not enabled)
