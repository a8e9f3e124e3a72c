"""An HNSW graph over a bank index's dense rows: the dense search of big banks.

A thin wrapper so :class:`memlane.recall.index.BankIndex` sees three calls: ``add`` rows
(labels are the index's row numbers; in the graph over chunk centroids, which
memlane/recall/dense.py keeps beside it for the chunk prior, chunk numbers), ``search`` a
query for the nearest rows, ``len``. The
index keeps deletions itself (its ``alive`` column): a dead or replaced row stays in the graph
and is dropped when candidates are masked; the index rebuilds the graph when too many are dead.

Library: hnswlib (ANN_NOTE below has the measurements behind the choice).
"""

from __future__ import annotations

import threading

import numpy as np

#: Graph degree and build-time beam width: the usual HNSW defaults (M=16, ef_construction=128),
#: the parameters the library comparison was run with (benchmarks/ann_libs.py).
CONNECTIVITY = 16
EXPANSION_ADD = 128

# ANN_NOTE: why hnswlib. `python -m benchmarks.ann_libs --size 100000 --vectors random`
# (Nov 2026, this 2-core machine shared with 4 other agents, load average 5-9; the libraries
# ran one after another, M=16, ef_construction=128, 2 build threads, 1 query thread):
#   library   build 90k   add 100 (1 thread)   top-100 p50/p95 at ef=128   index RSS
#   hnswlib     85 s         173 ms               0.80 / 0.98 ms              174 MB
#   usearch    254 s         248 ms               2.62 / 3.23 ms              178 MB
#   faiss      391 s        1243 ms               0.97 / 41 ms                174 MB
# (exact matrix product, same run: 34 / 341 ms). Recall@100 was alike (0.12 / 0.21 / 0.35
# at ef 128 / 256 / 512 for all three): random 384-d vectors have no neighbourhoods. On
# vectors with them (`--vectors composed`: the engine benchmark's index mode, sums of real
# phrase embeddings plus noise, real query embeddings) hnswlib found 0.9927 of the exact
# top-100 at ef=128 and 0.9998 at ef=256 (p50 0.51 / 0.84 ms, under load average 14). FAISS
# (already installed: milvus-lite depends on it) has no incremental delete and was slowest
# to build and add; usearch was slower in every column here. hnswlib builds from source.


class HnswIndex:
    """Inner-product HNSW over unit vectors, labelled by row number. Thread-safe."""

    def __init__(self, dim: int, *, threads: int = 1) -> None:
        import hnswlib

        self.dim = dim
        self.threads = threads
        self._index = hnswlib.Index(space="ip", dim=dim)
        self._index.init_index(max_elements=1024, ef_construction=EXPANSION_ADD, M=CONNECTIVITY)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self._index.get_current_count())

    def add(self, rows: np.ndarray, vectors: np.ndarray) -> None:
        """Add ``vectors`` under the labels ``rows`` (new row numbers, never reused); a label
        already present has its vector replaced (hnswlib updates the element in place: the
        chunk graph's centroid of a chunk that gained a row)."""
        if len(rows) == 0:
            return
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._lock:
            need = len(self) + len(rows)
            cap = self._index.get_max_elements()
            if need > cap:  # grow by doubling, as the index's own arrays do
                self._index.resize_index(max(need, 2 * cap))
            self._index.add_items(vecs, np.asarray(rows, dtype=np.int64), num_threads=self.threads)

    def search(self, query: np.ndarray, k: int, ef: int) -> np.ndarray:
        """Row numbers of (about) the ``k`` rows nearest ``query`` by inner product, searching
        with a beam of ``ef`` (>= k)."""
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        with self._lock:
            k = min(k, len(self))
            if k <= 0:
                return np.zeros(0, dtype=np.int64)
            self._index.set_ef(max(ef, k))
            labels, _ = self._index.knn_query(q, k=k, num_threads=1)
        return np.asarray(labels[0], dtype=np.int64)
