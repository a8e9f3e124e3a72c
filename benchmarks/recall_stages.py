"""Where a whole recall's time goes at a bank size: the median of each stage's milliseconds
(``RecallResult.timings_ms``) over templated queries, per size.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/recall_stages.py 10000,1000000 [--ann]``

The engine benchmark's index mode (benchmarks/engine.py): synthetic memories with vectors
composed from real phrase embeddings go straight into an in-process BankIndex over an empty
bank of a Milvus Lite store in a temporary directory; 25 recalls per size, the first 5 warm-up.
Dense search is exact at every size, or with ``--ann`` takes the path the engine chooses: the
HNSW graph from ``recall.ann_threshold`` live memories (built here before the recalls, its
build time printed), exact below it. Each line also has the whole recall's p50 / p95, and a
second line each stage's p95.

Before / after a change, the same script over two checkouts (the engine line says which ran):
``git worktree add /tmp/before HEAD`` then ``PYTHONPATH=/tmp/before .venv/bin/python
benchmarks/recall_stages.py ...`` beside ``PYTHONPATH=. ...``, alternated.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import memlane
from benchmarks.engine import bench_queries, phrase_vectors, synthetic_batches, trim_heap
from memlane.derived import node_of
from memlane.engine import Memory
from memlane.recall.index import BankIndex
from memlane.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", help="Comma-separated bank sizes (memories).")
    ap.add_argument("--ann", action="store_true", help="The graph from recall.ann_threshold, as the engine.")
    args = ap.parse_args()
    # Which tree's engine runs (a before/after pair points PYTHONPATH at two checkouts).
    print("engine:", os.path.dirname(os.path.dirname(memlane.__file__)), flush=True)
    memory = Memory(Settings(data_dir=tempfile.mkdtemp(prefix="memlane-stages-")))
    threshold = memory.settings.recall.ann_threshold if args.ann else 1 << 62
    phrases = phrase_vectors(memory.embedder)
    queries = bench_queries(25)
    for size in [int(x) for x in args.sizes.split(",") if x.strip()]:
        bank = f"b{size}"
        memory.create_bank(bank)
        index = BankIndex(
            memory.embedder.dim,
            revision=memory.store.get_revision(bank),
            ann_threshold=threshold,
            ann_background=False,
        )
        nodes = []
        for units in synthetic_batches(bank, size, memory.embedder.dim, 5000, phrases=phrases):
            index.bulk_load(units)
            nodes.extend(node_of(u) for u in units)
        memory.derived.graph.rebuild(bank, nodes)
        del nodes
        built = ""
        if len(index) >= threshold:
            t0 = time.perf_counter()
            index.build_ann()
            built = f" graph built in {time.perf_counter() - t0:.0f} s"
        # No public way to hand DerivedState an index built elsewhere (as benchmarks/engine.py)
        memory.derived._indexes[bank] = index
        trim_heap()
        stages: dict[str, list[float]] = {}
        whole: list[float] = []
        for k, query in enumerate(queries):
            t0 = time.perf_counter()
            result = memory.recall(bank, query, max_tokens=1024)
            if k >= 5:
                whole.append((time.perf_counter() - t0) * 1000)
                for stage, ms in result.timings_ms.items():
                    stages.setdefault(stage, []).append(ms)
        p50, p95 = np.percentile(whole, [50, 95])
        path = "graph" if index.ann_active else "exact"
        print(size, path, {s: round(statistics.median(v), 1) for s, v in stages.items()}, flush=True)
        tails = {s: round(float(np.percentile(v, 95)), 1) for s, v in stages.items()}
        print(size, path, "p95", tails, flush=True)
        print(f"{size} {path}: whole recall p50 / p95 {p50:.1f} / {p95:.1f} ms{built}", flush=True)
        memory.derived.drop(bank)
        del index
        trim_heap()
    memory.close()


if __name__ == "__main__":
    main()
