"""LongMemEval retrieval eval (and QA with a judge): one bank per question, Memlane beside
BM25-only and dense-only baselines (and any channel ablations, :mod:`evals.systems`) on the
same bank.

Each question's haystack is retained into its own bank, ``bank_id_for(question_id)`` (the
question id itself when it is a valid bank id: the bank ``memlane backfill`` writes); the
question is recalled with its question date as the **reference time**, recall's "now" (so
"last week" means the week before the question, and recency counts back from it), and every
system's ranking is turned into a ranking of source turns. The question date is not a validity
cut-off (``as_of``): answer sessions often fall later on the question's own day, and a cut-off
at the question's time would hide them.

Metrics per question and system (k in 1, 3, 5, 10, 30, 50 by default):

* ``turn_recall_any@k``, ``turn_recall_all@k``, ``turn_ndcg_any@k``: against the turns with
  ``has_answer`` true, the corpus being every retained turn of the haystack;
* ``session_recall_any@k``, ``session_recall_all@k``, ``session_ndcg_any@k``: the official
  turn-to-session conversion of the same ranking (see
  :func:`evals.metrics.session_scores_from_turns`);
* those six are the official metrics and, as in the official averages, abstention questions
  (``_abs``) have none of them;
* ``answer_session_recall_any@k``: whether any of the file's ``answer_session_ids`` is among
  the first k distinct sessions, for every question that names answer sessions (abstention
  questions included);
* ``latest_answer_session_first`` (issue 13, facts that change): for a ``knowledge-update``
  question with two or more answer sessions, 1.0 when the most recent answer session (by the
  haystack session dates) is ranked above every older answer session in the same distinct
  session ranking, else 0.0; a session not retrieved ranks below every retrieved one (see
  :func:`latest_answer_session_first`). No ``@k``: it reads the whole ranking.

Differences from the official retrieval script, on purpose: its corpus holds user turns only
(and session texts made of user turns); a Memlane bank holds every turn, so our corpus and
turn-level gold include assistant turns (``single-session-assistant`` questions have their
evidence there). Rankings come from the systems here, not from the official retrievers.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from evals.harness import (
    QA_TOKENS,
    SYSTEMS,
    consolidate,
    percentile,
    progress_bar,
    qa_for,
    qa_systems,
    rank_all,
    spread,
)
from evals.metrics import (
    OFFICIAL_KS,
    recall_any_at_k,
    retrieval_scores,
    session_of,
    session_scores_from_turns,
)
from evals.report import QuestionLog, build_report
from evals.systems import parse_systems
from memlane.ingest.longmemeval import LMEQuestion, load_longmemeval

HEADLINE = "session_recall_any@5"
# The metrics ``beats_best_baseline`` gives a verdict on (those whose k the run has).
HEADLINE_METRICS = (
    "session_recall_any@5",
    "session_recall_all@5",
    "session_ndcg_any@10",
    "turn_recall_all@10",
)


KNOWLEDGE_UPDATE = "knowledge-update"
LATEST_FIRST = "latest_answer_session_first"


def latest_answer_session_first(
    sessions: Sequence[str], answer_sessions: Sequence[str], dates: dict[str, tuple[Any, int]]
) -> float | None:
    """1.0 when the most recent of ``answer_sessions`` is ranked above every older one in
    ``sessions`` (distinct session ids, best first), else 0.0; None with fewer than two
    answer sessions (nothing to order).

    ``dates`` maps a session id to a sort key, ``(date, haystack position)``: the latest key is
    the most recent session (the position breaks ties between sessions of one date, the
    haystack being in time order). A session missing from ``sessions`` ranks below every
    ranked one, so a latest session not retrieved scores 0.0 whatever the older ones do.
    Raises KeyError for an answer session without a date (a file the reader would refuse)."""
    gold = list(dict.fromkeys(answer_sessions))
    if len(gold) < 2:
        return None
    latest = max(gold, key=lambda s: dates[s])
    rank = {s: i for i, s in enumerate(dict.fromkeys(sessions))}
    if latest not in rank:
        return 0.0
    return float(all(rank[latest] < rank.get(s, len(rank)) for s in gold if s != latest))


def _session_keys(q: LMEQuestion) -> dict[str, tuple[Any, int]]:
    """``{file session id: (date, haystack position)}``; a session id repeated in a haystack
    (the reader's ``#n`` copies) takes its latest copy."""
    keys: dict[str, tuple[Any, int]] = {}
    for pos, (sid, when) in enumerate(q.session_dates.items()):
        orig = q.original_session(sid)
        keys[orig] = max(keys.get(orig, (when, pos)), (when, pos))
    return keys


def score_question(q: LMEQuestion, ranked: Sequence[str], ks: Sequence[int]) -> dict[str, float]:
    """Every metric of one system's turn ranking for one question (see the module doc)."""
    scores: dict[str, float] = {}
    if not q.abstention:
        corpus = q.corpus_turns
        for k in ks:
            for name, v in retrieval_scores(ranked, q.evidence_turns, corpus, k).items():
                scores[f"turn_{name}"] = v
            for name, v in session_scores_from_turns(ranked, q.evidence_turns, corpus, k).items():
                scores[f"session_{name}"] = v
    if q.answer_session_ids:
        sessions = list(dict.fromkeys(q.original_session(session_of(t)) for t in ranked))
        for k in ks:
            scores[f"answer_session_recall_any@{k}"] = recall_any_at_k(sessions, q.answer_session_ids, k)
        if q.question_type == KNOWLEDGE_UPDATE:
            first = latest_answer_session_first(sessions, q.answer_session_ids, _session_keys(q))
            if first is not None:
                scores[LATEST_FIRST] = first
    return scores


def run_longmemeval(
    memory,
    path: str | Path,
    *,
    ks: Sequence[int] = OFFICIAL_KS,
    limit: int | None = None,
    progress: bool = True,
    reuse_banks: bool = False,
    log: QuestionLog | None = None,
    qa_llm=None,
    qa_tokens: int = QA_TOKENS,
    full_context: bool = True,
    qa_window: int | None = None,
    qa_limit: int | None = None,
    sample: int | None = None,
    use_question_date: bool = True,
    systems: Sequence[str] = SYSTEMS,
    command: str | None = None,
    budget: str = "mid",
) -> dict[str, Any]:
    """Run the eval over the first ``limit`` questions of a LongMemEval file (then ``sample`` of
    them spread evenly over the file, which is grouped by type); returns the
    harness report (:func:`evals.report.build_report`). QA runs on ``qa_limit`` questions
    spread over the run when given; the full-context baseline reads the latest ``qa_window``
    tokens of the haystack when given. ``reuse_banks`` skips retain
    for banks that already hold memories; ``log`` receives one row per question; ``qa_llm``
    (an :class:`~memlane.interfaces.LLM`) turns on QA with the official judge prompts;
    ``use_question_date`` makes the question date recall's reference time; ``systems`` are the
    systems compared (parsed specs, :func:`evals.systems.parse_systems`); ``budget`` is every
    recall's budget."""
    from evals.qa import lme_grader, lme_verdict

    systems = parse_systems(systems)
    t0 = time.perf_counter()
    path = Path(path)
    questions = spread(load_longmemeval(path, limit=limit), sample)
    qa_ids = {q.question_id for q in spread(questions, qa_limit)} if qa_llm is not None else set()
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    ingest_s = consolidate_s = 0.0
    reused = 0
    with progress_bar(progress) as bar:
        t_ingest = bar.add_task("retain", total=sum(len(q.turns) for q in questions))
        t_query = bar.add_task("questions", total=len(questions))
        for q in questions:
            bank = q.bank_id
            start = time.perf_counter()
            if reuse_banks and memory.store.count_units(bank):
                reused += 1
                bar.advance(t_ingest, len(q.turns))
            elif q.turns:
                memory.retain(bank, [(q.question_id, q.turns)], progress=lambda n: bar.advance(t_ingest, n))
            else:
                memory.create_bank(bank)  # an empty haystack still gets a (empty) bank
            ingest_s += time.perf_counter() - start
            consolidate_s += consolidate(memory, bank)
            reference = q.question_date if use_question_date else None
            rankings, result, ms, tokens = rank_all(
                memory, bank, q.question, systems=systems, reference_time=reference, budget=budget
            )
            latencies.append(ms)
            row: dict[str, Any] = {
                "id": q.question_id,
                "category": q.question_type,
                "abstention": q.abstention,
                "question": q.question,
                "answer": q.answer,
                "evidence_turns": q.evidence_turns,
                "answer_session_ids": q.answer_session_ids,
                "recall_ms": round(ms, 1),
                "scores": {s: score_question(q, rankings[s], ks) for s in systems},
                "top_turns": {s: rankings[s][:10] for s in systems},
                "tokens": tokens,
            }
            if q.question_id in qa_ids:
                row["qa"] = qa_for(
                    memory,
                    qa_llm,
                    bank_id=bank,
                    question=q.question,
                    result=result,
                    history=q.turns,
                    grade=lme_grader(q.question_type, q.question, q.answer, q.abstention),
                    verdict=lme_verdict,
                    qa_tokens=qa_tokens,
                    question_date=q.question_date,
                    full_context=full_context,
                    qa_window=qa_window,
                )
            rows.append(row)
            if log is not None:
                log.write(row)
            # Banks are many and small: keep only the one in hand in memory.
            memory.derived.evict(bank)
            bar.advance(t_query, 1)

    n_abs = sum(1 for q in questions if q.abstention)
    no_gold = sum(1 for q in questions if not q.abstention and not q.evidence_turns)
    info = {
        "dataset": path.name,
        "questions": len(questions),
        "abstention questions": n_abs,
        "non-abstention questions without has_answer turns": no_gold,
        "ks": ", ".join(map(str, ks)),
        "systems": ", ".join(systems),
        "budget": budget,
        **({"sample": f"{sample} spread over the file"} if sample else {}),
        **(
            {"qa questions": len(qa_ids), "qa window tokens": qa_window or "whole haystack"} if qa_ids else {}
        ),
        "reference time": "question date" if use_question_date else "none (recall's now)",
        "banks reused": reused,
        "recall p50 ms": percentile(latencies, 0.5),
        "recall p95 ms": percentile(latencies, 0.95),
        "retain s": round(ingest_s, 1),
        "consolidate s": round(consolidate_s, 1),
        "wall s": round(time.perf_counter() - t0, 1),
    }
    notes = [
        "turn_* and session_* metrics are LongMemEval's official recall_any, recall_all and "
        "ndcg_any (its DCG, its turn-to-session conversion); abstention (_abs) questions are "
        "excluded from them. answer_session_recall_any covers every question naming answer "
        "sessions, abstention included.",
        f"{LATEST_FIRST}: knowledge-update questions with >= 2 answer sessions; 1 when the most "
        "recent answer session (haystack dates) ranks above every older answer session in the "
        "system's distinct session ranking (a session not retrieved ranks last).",
        "Corpus: every retained turn (user and assistant); the official script indexes user turns only.",
        "Baselines rank the same units straight from the store: bm25 (plain BM25) and dense "
        "(plain cosine with the same embedder), no fusion, graph, time or boosts. An ablation "
        "(e.g. lexical+semantic) is Memlane's recall with only those channels.",
    ]
    if qa_llm is not None:
        notes.append(
            f"QA: Memlane answers from its best {qa_tokens} recalled tokens; "
            "full-context from the whole haystack; same answerer, official judge prompts."
        )
    return build_report(
        benchmark="longmemeval",
        title=f"LongMemEval retrieval ({path.name})",
        systems=systems,
        rows=rows,
        info=info,
        qa_systems=qa_systems(qa_llm is not None, full_context),
        headline=HEADLINE,
        headline_metrics=HEADLINE_METRICS,
        notes=notes,
        command=command,
    )
