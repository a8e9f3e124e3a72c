"""What the cross-encoder costs a LongMemEval recall at a budget, and what it buys: per config
(settings overrides, as benchmarks/recall_sweep.py's), the whole recall's p50 / p95, the rerank
stage's share, the pairs and characters the cross-encoder read, and the evidence figures, on
banks an eval run built.

    PYTHONPATH=. .venv/bin/python benchmarks/rerank_cost.py ../shared/data/longmemeval_s_dev60.json \\
        --data-dir D --limit 7 --config base: --config c500:recall.rerank_text_chars=500 \\
        --config b16:batch=16 [--repeat 2] [--out rows.jsonl]

Every question's bank gets one untimed recall first (the bank's load is not the cross-encoder's
cost), then each config is recalled ``--repeat`` times, config after config on the same bank, so
configs meet the same load on this shared machine. The cross-encoder is not memoised (its time is
what is measured). ``batch=N`` (not a setting) runs N pairs a forward pass
(memlane/models/onnx_cross_encoder.py's BATCH); ``recall.ranker=fused`` reads the fused order
instead of the learned ranker.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from benchmarks.recall_sweep import LME_METRICS, apply, lme_items, parse_config, scores_of
from evals.harness import RECALL_TOKENS, result_turns


class Timed:
    """The real cross-encoder, recording each call's pairs, characters and seconds."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[tuple[int, int, float]] = []

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        start = time.perf_counter()
        out = self.inner.rerank(query, passages, prior_ranks)
        self.calls.append((len(passages), sum(map(len, passages)), time.perf_counter() - start))
        return out


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--limit", type=int, help="the file's first N questions (banks must exist)")
    ap.add_argument("--budget", default="high")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--config", action="append", required=True, help="name:area.field=value,...")
    ap.add_argument("--out", type=Path, help="per-question rows (JSON lines)")
    args = ap.parse_args(argv)

    import memlane.models.onnx_cross_encoder as onnx_cross_encoder
    from memlane.engine import Memory
    from memlane.models.onnx_cross_encoder import OnnxCrossEncoder
    from memlane.settings import Settings

    settings = Settings(data_dir=args.data_dir)
    reranker = Timed(OnnxCrossEncoder("cross-encoder", threads=settings.models.torch_threads))
    configs = [parse_config(c) for c in args.config]
    items = list(lme_items(args.path, "all"))[: args.limit]
    batch = onnx_cross_encoder.BATCH
    sums: dict[str, dict[str, list[float]]] = {n: defaultdict(list) for n, _ in configs}
    lat: dict[str, list[float]] = defaultdict(list)
    stage: dict[str, dict[str, list[float]]] = {n: defaultdict(list) for n, _ in configs}
    cross: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    out = args.out.open("w") if args.out else None
    t0 = time.perf_counter()
    with Memory(settings, reranker=reranker) as memory:
        for bank_id, qid, category, q, when, item in items:
            if not memory.store.count_units(bank_id):
                raise SystemExit(f"no bank {bank_id} for question {qid} under {args.data_dir}")
            memory.recall(bank_id, q, budget=args.budget, max_tokens=RECALL_TOKENS, reference_time=when)
            row: dict[str, Any] = {"id": qid, "category": category, "scores": {}, "ms": {}}
            for _ in range(args.repeat):
                for name, overrides in configs:
                    overrides = dict(overrides)
                    onnx_cross_encoder.BATCH = int(overrides.pop("batch", batch))
                    old = apply(memory.settings, overrides)
                    reranker.calls.clear()
                    try:
                        start = time.perf_counter()
                        res = memory.recall(
                            bank_id, q, budget=args.budget, max_tokens=RECALL_TOKENS, reference_time=when
                        )
                        ms = (time.perf_counter() - start) * 1000
                    finally:
                        apply(memory.settings, old)
                    lat[name].append(ms)
                    cross[name].extend(reranker.calls)
                    row["ms"].setdefault(name, []).append(round(ms, 1))
                    for k, v in res.timings_ms.items():
                        stage[name][k].append(v)
                    got = scores_of("longmemeval", item, result_turns(res))
                    row["scores"][name] = got
            for name, _ in configs:
                for m, v in row["scores"][name].items():
                    sums[name][m].append(v)
            if out:
                out.write(json.dumps(row) + "\n")
            memory.derived.evict(bank_id)
            print(f"  {qid} done, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if out:
        out.close()
    print(f"{args.path.name}: {len(items)} questions, budget {args.budget}, repeat {args.repeat}")
    print(
        "| config | recall p50 / p95 ms | rerank stage mean ms | pairs / chars per call | cross-encoder s per call | "
        + " | ".join(LME_METRICS)
        + " |"
    )
    print("| --- |" + " ---: |" * (4 + len(LME_METRICS)))
    for name, _ in configs:
        calls = cross[name]
        pairs = statistics.mean(c[0] for c in calls) if calls else 0.0
        chars = statistics.mean(c[1] for c in calls) if calls else 0.0
        secs = statistics.mean(c[2] for c in calls) if calls else 0.0
        rr = statistics.mean(stage[name]["rerank"]) if stage[name]["rerank"] else 0.0
        cells = [f"{statistics.mean(sums[name][m]):.4f}" if sums[name][m] else "" for m in LME_METRICS]
        print(
            f"| {name} | {pct(lat[name], 0.5):.0f} / {pct(lat[name], 0.95):.0f} | {rr:.0f} | "
            f"{pairs:.1f} / {chars:.0f} | {secs:.2f} | " + " | ".join(cells) + " |"
        )
    print("\nMean ms per stage (timings_ms):")
    for name, _ in configs:
        parts = ", ".join(f"{k} {statistics.mean(v):.0f}" for k, v in sorted(stage[name].items()))
        print(f"  {name}: {parts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
