"""Spreading activation (the graph channel) over one big bank: sparse first hops on vs off.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/spread_hops.py 1000000``

The graph of the engine benchmark's synthetic memories (benchmarks/engine.py: two entities a
memory, temporal neighbours), 60 spreads of 10 random seeds, 2 hops, decay 0.5 (the recall
defaults), each way twice in turn: a gathered hop touching few vertices kept sparse
(``SPARSE_HOP_FACTOR``, memlane/stores/sparse_graph/records.py) or every gathered hop over
every vertex. Prints p50 / p95 ms and whether both ways returned the same lists.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time

import numpy as np

from benchmarks.engine import phrase_vectors, synthetic_batches
from memlane.derived import node_of
from memlane.engine import Memory
from memlane.interfaces import GraphNode
from memlane.settings import Settings
from memlane.stores.sparse_graph import spread as graph_spread

WAYS = {"sparse": graph_spread.SPARSE_HOP_FACTOR, "dense": 1 << 62}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("size", type=int, help="Memories in the bank.")
    args = ap.parse_args()
    memory = Memory(Settings(data_dir=tempfile.mkdtemp(prefix="memlane-spread-")))
    phrases = phrase_vectors(memory.embedder)
    nodes: list[GraphNode] = []
    for units in synthetic_batches("b", args.size, memory.embedder.dim, 5000, phrases=phrases):
        nodes.extend(node_of(u) for u in units)
    graph = memory.derived.graph
    graph.rebuild("b", nodes)
    ids = [n.id for n in nodes]
    del nodes
    print(graph.stats("b"), flush=True)
    rng = random.Random(0)
    seed_sets = [{ids[rng.randrange(len(ids))]: 1.0 / (k + 1) for k in range(10)} for _ in range(60)]
    graph.spread("b", seed_sets[0], hops=2, decay=0.5, limit=100)  # builds the matrix
    answers = {}
    for way in [*WAYS, *WAYS]:
        graph_spread.SPARSE_HOP_FACTOR = WAYS[way]
        ms, got = [], []
        for seeds in seed_sets:
            t0 = time.perf_counter()
            got.append(graph.spread("b", seeds, hops=2, decay=0.5, limit=100))
            ms.append((time.perf_counter() - t0) * 1000)
        answers[way] = got
        p50, p95 = np.percentile(ms, [50, 95])
        print(f"{way}: p50 {p50:.2f} / p95 {p95:.2f} ms", flush=True)
    print("same lists both ways:", answers["sparse"] == answers["dense"])
    memory.close()


if __name__ == "__main__":
    main()
