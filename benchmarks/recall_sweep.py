"""Recall settings swept over banks an eval run built, on one half of a dev set at a time.

    PYTHONPATH=. .venv/bin/python benchmarks/recall_sweep.py locomo ../shared/data/locomo10.json \
        --data-dir D --half cal --budget high \
        --config none:recall.rerank_high=0 \
        --config ce20:recall.rerank_high=20,recall.rerank_weight=0.5 [--out rows.jsonl]

Every question is recalled once per config, config after config on the same bank (LoCoMo: a
conversation's bank; LongMemEval: the question's), so configs are compared on the same banks
in the same run. The cross-encoder's scores are memoised per (query, passage): configs that
differ only in weight, pool size or the channels' extras pay for each pair once.

Halves: ``cal`` (LoCoMo conversations 0, 2, 4, 6, 8; LongMemEval questions at even places),
``held`` (the others) or ``all``. A threshold or weight is chosen on ``cal``; ``held`` is run
once, after. Banks must exist (``memlane eval ... --data-dir D`` builds them); the embedder
comes from the settings (MEMLANE_MODELS__EMBEDDER), as for the eval.

Prints one table a config: each headline metric per category and overall (the means over
the questions of the half that have the metric).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from evals.harness import RECALL_TOKENS, result_turns
from evals.metrics import recall_at_k, session_recall_at_k

LOCOMO_METRICS = ("turn_recall@10", "session_recall@5", "turn_recall@5")
LME_METRICS = (
    "session_recall_any@5",
    "session_recall_all@5",
    "session_ndcg_any@10",
    "turn_recall_all@10",
    "latest_answer_session_first",
)


class Memoised:
    """The real cross-encoder, each (query, passage) pair scored once per process."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.seen: dict[tuple[str, str], float] = {}
        self.pairs = 0

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        new = [p for p in dict.fromkeys(passages) if (query, p) not in self.seen]
        if new:
            self.pairs += len(new)
            for p, s in zip(new, self.inner.rerank(query, new, list(range(len(new))))):
                self.seen[(query, p)] = s
        return [self.seen[(query, p)] for p in passages]

    def forget(self) -> None:
        self.seen.clear()


def parse_config(spec: str) -> tuple[str, dict[str, Any]]:
    """``name:area.field=value,...`` -> (name, {"area.field": value}); values are JSON or text."""
    name, _, body = spec.partition(":")
    out: dict[str, Any] = {}
    for part in filter(None, body.split(",")):
        key, _, raw = part.partition("=")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return name, out


def apply(settings, overrides: dict[str, Any]) -> dict[str, Any]:
    """Set each ``area.field`` (or ``area.dict_field.key``); returns the old values."""
    old: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = key.split(".")
        area = getattr(settings, parts[0])
        if len(parts) == 3:  # a key of a dict field (recall.channel_weights.semantic)
            d = dict(getattr(area, parts[1]))
            old[key] = d.get(parts[2])
            d[parts[2]] = value
            setattr(area, parts[1], d)
        else:
            old[key] = getattr(area, parts[1])
            setattr(area, parts[1], value)
    return old


def locomo_items(path: Path, half: str):
    from evals.locomo import _category
    from evals.locomo_data import load_locomo_questions
    from memlane.ingest import load_conversations

    conversations = load_conversations(path, format="locomo")
    questions = load_locomo_questions(path, categories=(1, 2, 3, 4))
    for i, conv in enumerate(conversations):
        if (half == "cal" and i % 2) or (half == "held" and not i % 2):
            continue
        for j, qa in enumerate(questions.get(conv.document_id, [])):
            if qa.evidence:
                yield conv.bank_id, f"{conv.document_id}#{j}", _category(qa.category), qa.question, None, qa


def lme_items(path: Path, half: str):
    from memlane.ingest.longmemeval import load_longmemeval

    for i, q in enumerate(load_longmemeval(path)):
        if (half == "cal" and i % 2) or (half == "held" and not i % 2):
            continue
        yield q.bank_id, q.question_id, q.question_type, q.question, q.question_date, q


def scores_of(dataset: str, item, ranked: list[str]) -> dict[str, float]:
    if dataset == "locomo":
        rel = set(item.evidence)
        return {
            "turn_recall@10": recall_at_k(ranked, rel, 10),
            "turn_recall@5": recall_at_k(ranked, rel, 5),
            "session_recall@5": session_recall_at_k(ranked, rel, 5),
        }
    from evals.longmemeval import score_question

    got = score_question(item, ranked, (5, 10))
    return {m: got[m] for m in LME_METRICS if m in got}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", choices=("locomo", "longmemeval"))
    ap.add_argument("path", type=Path)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--half", choices=("cal", "held", "all"), default="cal")
    ap.add_argument("--budget", default="high")
    ap.add_argument("--config", action="append", required=True, help="name:area.field=value,...")
    ap.add_argument("--reranker", default="cross-encoder", help="models.reranker_model for the sweep")
    ap.add_argument("--out", type=Path, help="per-question rows (JSON lines)")
    args = ap.parse_args(argv)

    from memlane.engine import Memory
    from memlane.models.onnx_cross_encoder import OnnxCrossEncoder
    from memlane.settings import Settings

    settings = Settings(data_dir=args.data_dir)
    reranker = Memoised(OnnxCrossEncoder(args.reranker, threads=settings.models.torch_threads))
    configs = [parse_config(c) for c in args.config]
    metrics = LOCOMO_METRICS if args.dataset == "locomo" else LME_METRICS
    items = list((locomo_items if args.dataset == "locomo" else lme_items)(args.path, args.half))
    sums: dict[str, dict[str, dict[str, list[float]]]] = {
        n: defaultdict(lambda: defaultdict(list)) for n, _ in configs
    }
    latency: dict[str, list[float]] = defaultdict(list)
    out = args.out.open("w") if args.out else None
    t0 = time.perf_counter()
    with Memory(settings, reranker=reranker) as memory:
        bank = None
        for n, (bank_id, qid, category, question, when, item) in enumerate(items, start=1):
            if bank_id != bank:
                if bank is not None:
                    memory.derived.evict(bank)
                reranker.forget()
                bank = bank_id
            row: dict[str, Any] = {"id": qid, "category": category, "scores": {}}
            for name, overrides in configs:
                old = apply(memory.settings, overrides)
                try:
                    start = time.perf_counter()
                    res = memory.recall(
                        bank_id, question, budget=args.budget, max_tokens=RECALL_TOKENS, reference_time=when
                    )
                    latency[name].append((time.perf_counter() - start) * 1000)
                finally:
                    apply(memory.settings, old)
                got = scores_of(args.dataset, item, result_turns(res))
                row["scores"][name] = got
                for m, v in got.items():
                    sums[name][category][m].append(v)
                    sums[name]["all"][m].append(v)
            if out:
                out.write(json.dumps(row) + "\n")
            if n % 50 == 0 or n == len(items):
                print(
                    f"  {n}/{len(items)} questions, {time.perf_counter() - t0:.0f} s, {reranker.pairs} pairs",
                    file=sys.stderr,
                )
    if out:
        out.close()
    print(
        f"{args.dataset} {args.half} half, budget {args.budget}, {len(items)} questions, {time.perf_counter() - t0:.0f} s"
    )
    for name, overrides in configs:
        lat = sorted(latency[name])
        p50, p95 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        print(f"\n## {name}  {overrides}  recall p50/p95 {p50:.0f}/{p95:.0f} ms (memoised cross-encoder)")
        cats = sorted(k for k in sums[name] if k != "all") + ["all"]
        print("| category | n | " + " | ".join(metrics) + " |")
        print("| --- | ---: |" + " ---: |" * len(metrics))
        for c in cats:
            vals = sums[name][c]
            n_q = max((len(v) for v in vals.values()), default=0)
            cells = [f"{sum(vals[m]) / len(vals[m]):.4f}" if vals.get(m) else "" for m in metrics]
            print(f"| {c} | {n_q} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
