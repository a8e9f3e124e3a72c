"""Dense search over a bank index's rows (memlane/recall/index.py): exact (a matrix product),
or the HNSW graph's candidates re-scored exactly, both with the chunk prior.

Big banks: from ``ann_threshold`` live units (RecallSettings.ann_threshold) the bank index asks
the graph (memlane/recall/ann.py) for candidates; below it, and for selective filters, the
search stays exact (see :meth:`DenseSearch.through_graph`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse import csr_matrix

from memlane.interfaces import Hit
from memlane.recall.ann import HnswIndex
from memlane.recall.index_rows import IndexRows
from memlane.units import CANDIDATE_FIELDS

#: The graph is asked for OVERSAMPLE x limit / (share of rows passing the filter) candidates ...
ANN_OVERSAMPLE = 2.0
#: ... and at most this many: a filter that passes so few rows that more would be needed is
#: answered exactly over the rows it passes (cheap: they are few).
ANN_MAX_CANDIDATES = 2000
#: Beam width of a graph search (at least the number of candidates asked for).
ANN_EF = 256
_CHUNK = CANDIDATE_FIELDS.index("chunk_id")

Centroids = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class DenseSearch:
    """Cosine similarity over ``rows``, plus ``chunk_prior`` times the similarity of the unit's
    chunk centroid. Not thread-safe: the bank index calls it under its lock."""

    def __init__(self, rows: IndexRows) -> None:
        self.rows = rows
        self._centroids: Centroids | None = None
        self._version = -1  # the rows' version the centroids were computed at

    def exact(self, q: np.ndarray, limit: int, mask: np.ndarray, chunk_prior: float) -> list[Hit]:
        """Every row of ``mask`` scored."""
        rows, n = self.rows, self.rows.n
        passing = np.flatnonzero(mask)
        if passing.size * 4 < n:
            # A selective filter: score only the rows it passes (a gather of few rows beats
            # a product over all of them).
            scores = rows.vec[passing] @ q
            if chunk_prior:
                groups, centroids, _, _ = self._chunk_centroids()
                scores += chunk_prior * (centroids[groups[passing]] @ q)
            return rows.top_of(passing, scores, limit)
        scores = rows.vec[:n] @ q
        if chunk_prior:
            groups, centroids, _, _ = self._chunk_centroids()
            scores = scores + chunk_prior * (centroids @ q)[groups]
        return rows.top(scores, mask, limit)

    def through_graph(
        self, ann: HnswIndex, q: np.ndarray, limit: int, mask: np.ndarray, chunk_prior: float
    ) -> list[Hit] | None:
        """Candidates from the graph, re-scored exactly; None asks for the exact search.

        The graph ranks by the unit's own similarity only. To keep the chunk prior's hits, the
        candidates also take every unit of the ``limit`` chunks whose centroids are nearest
        the query (an exact product over the centroids, 1/8 of the rows), so a unit raised by
        its chunk is found whatever its own rank; then all candidates are scored exactly as
        the exact search scores them. Filters: the graph is asked for
        OVERSAMPLE x limit / (share of rows passing), and a filter too selective for
        ANN_MAX_CANDIDATES, or candidates that leave fewer than ``limit`` passing rows, go
        to the exact search."""
        rows, n = self.rows, self.rows.n
        passing = int(np.count_nonzero(mask))
        if passing == 0 or limit <= 0:
            return []
        want = math.ceil(limit * ANN_OVERSAMPLE * n / passing)
        if want > ANN_MAX_CANDIDATES:
            return None
        cand = ann.search(q, want, max(ANN_EF, want))
        cand = cand[(cand >= 0) & (cand < n)]
        if chunk_prior:
            groups, centroids, order, starts = self._chunk_centroids()
            near = centroids @ q
            top = min(limit, near.size)
            chunks = np.argpartition(-near, top - 1)[:top] if top < near.size else np.arange(near.size)
            members = [order[starts[c] : starts[c + 1]] for c in chunks]
            cand = np.unique(np.concatenate([cand, *members]))
        else:
            cand = np.unique(cand)
        cand = cand[mask[cand]]
        if cand.size < min(limit, passing):
            return None
        scores = rows.vec[cand] @ q
        if chunk_prior:
            scores += chunk_prior * near[groups[cand]]
        return rows.top_of(cand, scores, limit)

    def _chunk_centroids(self) -> Centroids:
        """Each row's chunk number, the unit-length mean vector of each chunk's live units,
        and the rows ordered by chunk with each chunk's start in that order (chunk c's rows are
        ``order[starts[c]:starts[c + 1]]``); computed on first use after a write (10k units in
        chunks of 8: about 5 ms)."""
        rows = self.rows
        if self._centroids is None or self._version != rows.version:
            n = rows.n
            numbers: dict[str, int] = {}
            groups = np.fromiter(
                (numbers.setdefault(rows.fields[i][_CHUNK] or rows.ids[i], len(numbers)) for i in range(n)),
                dtype=np.int64,
                count=n,
            )
            alive = np.flatnonzero(rows.cols["alive"][:n] > 0)
            # Sum per chunk as a sparse (chunks x rows) product: np.add.at took 38 ms at 10k.
            member = csr_matrix(
                (np.ones(alive.size, dtype=np.float32), (groups[alive], alive)), shape=(len(numbers), n)
            )
            centroids = np.asarray(member @ rows.vec[:n], dtype=np.float32)
            centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
            order = np.argsort(groups, kind="stable")
            starts = np.searchsorted(groups[order], np.arange(len(numbers) + 1))
            self._centroids = (groups, centroids, order, starts)
            self._version = rows.version
        return self._centroids
