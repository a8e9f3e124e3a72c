"""Knowledge-update benchmark on real phrasings: LongMemEval's ``knowledge-update`` questions
(issue 24 item 7).

The synthetic benchmark (:mod:`benchmarks.knowledge_update`) shares its statement template
with the slot patterns' tests, so it checks the resolution machinery, not how often people's
own words fill a slot. Here the statements are the ones LongMemEval's annotators wrote: each
knowledge-update question names two or more answer sessions that state a value at different
times ("I've had Luna for about 6 months" ... "for about 9 months now"). The file is dev data,
read at run time from a path argument and never copied into the repository.

Per question, one bank holds its answer sessions (``--distractors N`` adds the first N other
sessions of its haystack, ``-1`` all of them); the bank is retained, consolidated and the
question recalled at the question date, once with ``facts.resolve="auto"`` and once with
``"off"`` (the second engine reuses the first one's vectors, as the synthetic benchmark does).

* **target session**: the answer session whose ``has_answer`` turns contain the gold answer
  when exactly one does (a question about the earlier value, "my previous status before the
  current one", targets the earlier session), else the latest answer session.
* ``target_session_first``: the target session ranks above every other answer session (the
  sessions in recall's turn ranking, :func:`evals.harness.result_turns`).
* ``target_evidence_first``: the first ``has_answer`` turn in that ranking is the target
  session's (stricter: a session can win on a turn that does not state the value).
* **slot coverage**: how many ``has_answer`` turns any rule of ``memlane/facts/patterns.py``
  fills a slot from (:func:`~memlane.facts.patterns.find_slot`, the speaker as subject), and
  how many slotted memories the banks hold and resolution invalidated.

Run: ``python -m benchmarks.knowledge_update_lme [path] [--distractors 0] [--out ku_lme.json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from memlane.ingest.longmemeval import LMEQuestion

DEFAULT_PATH = Path("../shared/data/longmemeval_s_dev60.json")
CONFIGS = ("auto", "off")
KNOWLEDGE_UPDATE = "knowledge-update"
RECALL_TOKENS = 65536  # as evals/harness.py: deep enough to rank every answer session
METRICS = ("target_session_first", "target_evidence_first")


def select(questions: Sequence[LMEQuestion], distractors: int = 0) -> list[LMEQuestion]:
    """The knowledge-update questions with at least two answer sessions, each haystack cut to
    its answer sessions plus the first ``distractors`` other sessions (``-1``: all)."""
    out = []
    for q in questions:
        answer = set(q.answer_session_ids)
        if q.question_type != KNOWLEDGE_UPDATE or q.abstention or len(answer) < 2:
            continue
        others = list(
            dict.fromkeys(t.session_id for t in q.turns if q.original_session(t.session_id) not in answer)
        )
        keep = set(others if distractors < 0 else others[:distractors])
        turns = [t for t in q.turns if t.session_id in keep or q.original_session(t.session_id) in answer]
        out.append(dataclasses.replace(q, turns=turns))
    return out


def target_session(q: LMEQuestion) -> str:
    """The answer session that states the gold answer (the only one whose evidence turns
    contain it), else the latest answer session (the file's session order breaks date ties)."""
    evidence = set(q.evidence_turns)
    answer = q.answer.strip().lower()
    stating = {
        q.original_session(t.session_id)
        for t in q.turns
        if t.turn_id in evidence and answer and answer in t.text.lower()
    }
    if len(stating) == 1:
        return stating.pop()
    order = {q.original_session(s): (when, i) for i, (s, when) in enumerate(q.session_dates.items())}
    return max(dict.fromkeys(q.answer_session_ids), key=lambda s: order[s])


def score(q: LMEQuestion, ranked: Sequence[str]) -> dict[str, Any]:
    """:data:`METRICS` for one question's turn ranking (best first), with where things ranked."""
    from evals.metrics import session_of

    target = target_session(q)
    sessions = list(dict.fromkeys(q.original_session(session_of(t)) for t in ranked))
    rank = {s: i for i, s in enumerate(sessions)}
    others = [s for s in dict.fromkeys(q.answer_session_ids) if s != target]
    first_evidence = next((t for t in ranked if t in set(q.evidence_turns)), None)
    first_session = q.original_session(session_of(first_evidence)) if first_evidence else None
    return {
        "target": target,
        "target_session_first": target in rank and all(rank[target] < rank.get(s, len(rank)) for s in others),
        "target_evidence_first": first_session == target,
        "answer_session_ranks": {s: rank.get(s) for s in q.answer_session_ids},
        "first_evidence_turn": first_evidence,
    }


def slot_coverage(questions: Sequence[LMEQuestion]) -> dict[str, Any]:
    """How many evidence (``has_answer``) turns, and how many user turns of the answer
    sessions, any slot pattern fills a slot from; the slots found."""
    from memlane.facts.patterns import find_slot

    counts = {"evidence_turns": 0, "evidence_slotted": 0, "answer_session_user_turns": 0, "user_slotted": 0}
    found = []
    for q in questions:
        evidence = set(q.evidence_turns)
        answer = set(q.answer_session_ids)
        for t in q.turns:
            slot = find_slot(t.text, t.speaker)
            if t.turn_id in evidence:
                counts["evidence_turns"] += 1
                counts["evidence_slotted"] += slot is not None
            if t.speaker == "user" and q.original_session(t.session_id) in answer:
                counts["answer_session_user_turns"] += 1
                counts["user_slotted"] += slot is not None
            if slot is not None and (t.turn_id in evidence or q.original_session(t.session_id) in answer):
                found.append(
                    {
                        "turn": t.turn_id,
                        "evidence": t.turn_id in evidence,
                        "slot": slot.predicate,
                        "value": slot.object,
                    }
                )
    return {**counts, "slots": found}


def _all_units(memory, bank_id: str) -> list[Any]:
    """Every memory of the bank, invalidated ones included (list_memories pages by 1000)."""
    units: list[Any] = []
    while True:
        page, total = memory.browse.list_memories(
            bank_id, offset=len(units), limit=1000, include_invalid=True
        )
        units += page
        if not page or len(units) >= total:
            return units


def run_config(
    questions: Sequence[LMEQuestion], data_dir: Path, resolve: str, embedder=None
) -> dict[str, Any]:
    """Retain, consolidate and ask every question on a fresh ``data_dir`` with
    ``facts.resolve=resolve``; timings, slotted/invalidated memory counts and one row each."""
    from benchmarks.knowledge_update import MemoEmbedder
    from evals.harness import result_turns
    from memlane.engine import Memory
    from memlane.settings import Settings

    memory = Memory(Settings(data_dir=data_dir, facts={"resolve": resolve}), embedder=embedder)
    rows: list[dict[str, Any]] = []
    slotted = invalidated = 0
    try:
        if isinstance(embedder, MemoEmbedder):
            embedder.reuse = True
        t0 = time.perf_counter()
        for q in questions:
            memory.retain(q.bank_id, q.documents)
        retain_s = time.perf_counter() - t0
        memory.wait_background()
        t0 = time.perf_counter()
        for q in questions:
            memory.consolidate(q.bank_id)
        consolidate_s = time.perf_counter() - t0
        if isinstance(embedder, MemoEmbedder):
            embedder.reuse = False  # every engine embeds its queries itself
        for q in questions:
            with_slot = [u for u in _all_units(memory, q.bank_id) if (u.metadata or {}).get("slot")]
            slotted += len(with_slot)
            invalidated += sum(1 for u in with_slot if u.invalid_at is not None)
            result = memory.recall(
                q.bank_id, q.question, max_tokens=RECALL_TOKENS, reference_time=q.question_date
            )
            rows.append(
                {
                    "id": q.question_id,
                    "question": q.question,
                    "answer": q.answer,
                    **score(q, result_turns(result)),
                }
            )
            memory.derived.evict(q.bank_id)
    finally:
        memory.close()
    summary = {m: sum(r[m] for r in rows) / len(rows) if rows else None for m in METRICS}
    return {
        "resolve": resolve,
        "retain_s": round(retain_s, 1),
        "consolidate_s": round(consolidate_s, 1),
        "slotted_memories": slotted,
        "slotted_invalidated": invalidated,
        "summary": summary,
        "rows": rows,
    }


def run_benchmark(
    path: Path, distractors: int = 0, configs: Sequence[str] = CONFIGS, work_dir: Path | None = None
) -> dict[str, Any]:
    """Select the questions, measure slot coverage and run every config (one data dir each
    under ``work_dir``, default a temporary directory removed afterwards)."""
    from benchmarks.knowledge_update import MemoEmbedder
    from memlane.ingest.longmemeval import load_longmemeval
    from memlane.models.embedder import build_embedder

    t_all = time.perf_counter()
    questions = select(load_longmemeval(path), distractors)
    report: dict[str, Any] = {
        "benchmark": "knowledge_update_lme",
        "dataset": path.name,
        "questions": len(questions),
        "distractors": distractors,
        "turns": sum(len(q.turns) for q in questions),
        "coverage": slot_coverage(questions),
        "configs": {},
    }
    from memlane.settings import Settings

    embedder = MemoEmbedder(build_embedder(Settings()))
    owned = work_dir is None
    root = Path(tempfile.mkdtemp(prefix="memlane-ku-lme-")) if work_dir is None else Path(work_dir)
    try:
        for resolve in configs:
            shutil.rmtree(root / resolve, ignore_errors=True)
            report["configs"][resolve] = run_config(questions, root / resolve, resolve, embedder)
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)
    report["wall_s"] = round(time.perf_counter() - t_all, 1)
    return report


def format_report(report: dict[str, Any]) -> str:
    """The figures as text: coverage, then each config's shares and timings."""
    c = report["coverage"]
    lines = [
        f"LongMemEval knowledge-update, real phrasings: {report['questions']} questions, "
        f"{report['turns']} turns ({report['distractors']} distractor sessions each; -1 = whole haystack)",
        f"slot coverage: {c['evidence_slotted']} of {c['evidence_turns']} has_answer turns fill a slot; "
        f"{c['user_slotted']} of {c['answer_session_user_turns']} user turns of the answer sessions",
    ]
    for name, r in report["configs"].items():
        shares = ", ".join(f"{m} {v:.3f}" if v is not None else f"{m} -" for m, v in r["summary"].items())
        lines.append(
            f"resolve={name}: {shares}; slotted memories {r['slotted_memories']} "
            f"({r['slotted_invalidated']} invalidated); retain {r['retain_s']} s, consolidate {r['consolidate_s']} s"
        )
    lines.append(f"wall {report['wall_s']} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, nargs="?", default=DEFAULT_PATH, help="A LongMemEval JSON file")
    parser.add_argument(
        "--distractors", type=int, default=0, help="Other haystack sessions per bank (-1: all)"
    )
    parser.add_argument("--configs", default=",".join(CONFIGS), help="facts.resolve values, comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="Write the report (with every row) as JSON")
    parser.add_argument("--work-dir", type=Path, default=None, help="Keep the data dirs here")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        print(
            f"skipped: {args.path} not found (LongMemEval dev data is not in the repository; give its path)",
            file=sys.stderr,
        )
        return 0
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    report = run_benchmark(args.path, args.distractors, configs, args.work_dir)
    print(format_report(report))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
