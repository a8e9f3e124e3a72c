"""Refresh and cold-bank benchmark (issue 14, parts 2 and 3), each beside its baseline in the
same run.

(a) Refresh: a warm bank of ``--refresh-size`` synthetic memories held by two engines, A and B,
    on one store. A retains one turn (the real retain path: NER, embedding, links); B's next
    recall is timed. B brings its state up to date by the write's delta (memlane/revlog.py)
    or, as the baseline, by a full reload of the bank (the behaviour before: ``_refresh``
    disabled). A third figure, B's recall with no write before it, is the floor.
    Two engines in ONE process sharing one Milvus Lite server (the in-process Lite server both
    engines' clients talk to over gRPC, as the tests' two-engine fixture does): each engine has
    its own store client, index and graph, as two Serve replicas would; what one process does
    not show is two processes' CPU contention (the writes and recalls here alternate).
(b) Cold banks: the first recall of an engine that does not hold the bank, at each of
    ``--cold-sizes``: answered by the store while the bank loads in the background
    (recall.cold_bank="store"), beside waiting for the full load ("wait"), and the warm recall.

Synthetic units with random vectors are written straight to the store (as `memlane bench
engine` does); queries are embedded for real. Run:

    PYTHONPATH=$PWD python benchmarks/refresh_bench.py --refresh-size 10000 --cold-sizes 1000,10000,100000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.engine import _pct, _say, bench_queries, synthetic_batches, synthetic_chunks


def _stats(xs: list[float]) -> dict[str, float]:
    return {
        "n": len(xs),
        "p50_ms": round(_pct(xs, 0.5), 1),
        "p95_ms": round(_pct(xs, 0.95), 1),
        "max_ms": round(max(xs), 1),
    }


def _write_bank(memory, bank: str, size: int) -> float:
    t = time.perf_counter()
    memory.create_bank(bank)
    for units in synthetic_batches(bank, size, memory.embedder.dim):
        memory.store.upsert_units(bank, units)
    memory.store.upsert_chunks(bank, synthetic_chunks(bank, size))
    memory.store.bump_revision(bank)  # a bulk load: says nothing of what changed (full reloads)
    return time.perf_counter() - t


def _turn(i: int) -> dict[str, Any]:
    return {
        "content": f"Riley said the violin recital number {i} moved to the museum hall on Friday.",
        "speaker": "Riley",
        "document_id": f"live-{i}",
        "session_id": f"live-{i}",
        "timestamp": "2026-11-20T10:00:00Z",
    }


def bench_refresh(make, size: int, rounds: int, full_rounds: int) -> dict[str, Any]:
    bank = f"refresh-{size}"
    a, b = make(), make()
    _say(f"(a) writing a bank of {size:,} synthetic memories")
    write_s = _write_bank(a, bank, size)
    t = time.perf_counter()
    b.derived.ensure(bank)
    load_s = time.perf_counter() - t
    a.derived.ensure(bank)
    queries = bench_queries(rounds + full_rounds + 20)
    for q in queries[:10]:
        b.recall(bank, q, max_tokens=1024)

    floor = []
    for q in queries[10 : 10 + rounds]:
        t = time.perf_counter()
        b.recall(bank, q, max_tokens=1024)
        floor.append((time.perf_counter() - t) * 1000)

    def after_writes(n: int, first: int) -> tuple[list[float], list[str], list[float], list[float]]:
        lat, how, write_ms, refresh_ms = [], [], [], []
        for i in range(first, first + n):
            t = time.perf_counter()
            a.retain_items(bank, [_turn(i)])
            a.wait_background()
            write_ms.append((time.perf_counter() - t) * 1000)
            b.derived.last_refresh.pop(bank, None)
            t = time.perf_counter()
            b.derived.ensure(bank)  # what recall does first: timed apart, then the recall
            refresh_ms.append((time.perf_counter() - t) * 1000)
            res = b.recall(bank, queries[i % len(queries)], max_tokens=1024)
            lat.append((time.perf_counter() - t) * 1000)
            how.append(b.derived.last_refresh.get(bank, "none"))
            assert not res.cold
        return lat, how, write_ms, refresh_ms

    _say(f"(a) {rounds} one-turn retains in A, each followed by a recall in B (delta)")
    inc, inc_how, inc_write, inc_refresh = after_writes(rounds, 0)
    _say(f"(a) {full_rounds} more with B reloading in full (the baseline)")
    b.derived._refresh = lambda *args: False  # type: ignore[method-assign]  # the old behaviour
    full, full_how, _, full_refresh = after_writes(full_rounds, rounds)
    a.close()
    b.close()
    return {
        "memories": size,
        "bank_write_s": round(write_s, 1),
        "full_load_s": round(load_s, 2),
        "recall_no_write": _stats(floor),
        "recall_after_write_incremental": {**_stats(inc), "refresh": sorted(set(inc_how))},
        "of_which_refresh_incremental": _stats(inc_refresh),
        "recall_after_write_full_reload": {**_stats(full), "refresh": sorted(set(full_how))},
        "of_which_refresh_full_reload": _stats(full_refresh),
        "retain_1_turn_in_A": _stats(inc_write),
    }


def bench_cold(make, size: int, samples: int) -> dict[str, Any]:
    bank = f"cold-{size}"
    writer = make()
    _say(f"(b) writing a bank of {size:,} synthetic memories")
    write_s = _write_bank(writer, bank, size)
    writer.close()
    queries = bench_queries(samples + 10)
    cold = make(cold_bank="store")
    cold.recall(bank, queries[0], max_tokens=1024)  # models and pools warm up
    cold.derived.wait_warm()
    cold_ms, warm_after_s = [], []
    for q in queries[1 : 1 + samples]:
        cold.derived.evict(bank)
        t = time.perf_counter()
        res = cold.recall(bank, q, max_tokens=1024)
        cold_ms.append((time.perf_counter() - t) * 1000)
        assert res.cold
        cold.derived.wait_warm()  # the background load, timed from the recall's start
        warm_after_s.append(time.perf_counter() - t)
    warm = []
    for q in queries[-2:]:  # the first recalls after a load build lazy parts (graph matrix)
        cold.recall(bank, q, max_tokens=1024)
    for q in queries[1 : 1 + samples]:
        t = time.perf_counter()
        assert not cold.recall(bank, q, max_tokens=1024).cold
        warm.append((time.perf_counter() - t) * 1000)
    cold.close()
    wait_ms = []
    waiting = make(cold_bank="wait")
    for q in queries[1 : 1 + max(1, samples // 2)]:
        waiting.derived.evict(bank)
        t = time.perf_counter()
        waiting.recall(bank, q, max_tokens=1024)
        wait_ms.append((time.perf_counter() - t) * 1000)
    waiting.close()
    return {
        "memories": size,
        "bank_write_s": round(write_s, 1),
        "first_recall_store_answer": _stats(cold_ms),
        "bank_warm_after_s_median": round(statistics.median(warm_after_s), 2),
        "first_recall_wait_for_load": _stats(wait_ms),
        "warm_recall": _stats(warm),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--refresh-size", type=int, default=10_000, help="0 skips (a)")
    p.add_argument("--rounds", type=int, default=40, help="writes followed by a recall, incremental")
    p.add_argument("--full-rounds", type=int, default=10, help="the same with full reloads")
    p.add_argument("--cold-sizes", default="1000,10000,100000", help="comma-separated; empty skips (b)")
    p.add_argument("--cold-samples", type=int, default=5)
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args()

    from memlane.engine import Memory
    from memlane.settings import Settings

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="memlane-refresh-"))
    if data_dir.exists():
        shutil.rmtree(data_dir)
    base = Memory(Settings(data_dir=data_dir))  # loads the models once; every engine shares them
    embedder, reranker, extractor = base.embedder, base.reranker, base.extractor
    base.close()

    def make(**recall: Any) -> Memory:
        s = Settings(data_dir=data_dir)
        s = s.model_copy(update={"recall": s.recall.model_copy(update=recall)})
        return Memory(s, embedder=embedder, reranker=reranker, extractor=extractor)

    report: dict[str, Any] = {}
    try:
        if args.refresh_size:
            report["refresh"] = bench_refresh(make, args.refresh_size, args.rounds, args.full_rounds)
            print(json.dumps({"refresh": report["refresh"]}), flush=True)
        report["cold"] = []
        for size in [int(x) for x in args.cold_sizes.split(",") if x.strip()]:
            report["cold"].append(bench_cold(make, size, args.cold_samples))
            print(json.dumps({"cold": report["cold"][-1]}), flush=True)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
