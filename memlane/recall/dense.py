"""Dense search over a bank index's rows (memlane/recall/index.py): exact (a matrix product),
or the HNSW graph's candidates re-scored exactly, both with the chunk prior.

Big banks: from ``ann_threshold`` live units (RecallSettings.ann_threshold) the bank index asks
the graph (memlane/recall/ann.py) for candidates, and a second graph over the chunk centroids
for the chunks the prior could raise (:class:`AnnGraphs`); below it, and for selective
filters, the search stays exact (see :meth:`DenseSearch.through_graph`), untouched by them.
"""

from __future__ import annotations

import math
import threading

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


class AnnGraphs:
    """The HNSW graphs of a big bank, one life cycle (built, extended, dropped together by the
    bank index): ``units`` over the rows, labelled by row number, and ``chunks`` over the chunk
    centroids, labelled by chunk number (the chunk prior's candidates without a product over
    every centroid). The rows written after the build reach ``units`` with each write; their
    chunks' centroids reach ``chunks`` at the next search that needs them (``chunks_upto``:
    the rows whose chunks are in, under ``lock``, since searches run side by side)."""

    def __init__(self, units: HnswIndex, chunks: HnswIndex, chunks_upto: int) -> None:
        self.units = units
        self.chunks = chunks
        self.chunks_upto = chunks_upto
        self.lock = threading.Lock()

    @classmethod
    def build(
        cls, dim: int, vectors: np.ndarray, centroids: np.ndarray, n: int, *, threads: int
    ) -> AnnGraphs:
        """Both graphs over rows [0, n) (``vectors``) and their chunks' ``centroids``."""
        units = HnswIndex(dim, threads=threads)
        units.add(np.arange(n), vectors[:n])
        chunks = HnswIndex(dim, threads=threads)
        chunks.add(np.arange(len(centroids)), centroids)
        return cls(units, chunks, n)


class DenseSearch:
    """Cosine similarity over ``rows``, plus ``chunk_prior`` times the similarity of the unit's
    chunk centroid. The bank index calls it under its lock: a read (searches side by side) or
    the write; the centroids it computes lazily are published as one tuple with the rows'
    version they were computed at, so a search never pairs one version with another's arrays."""

    def __init__(self, rows: IndexRows) -> None:
        self.rows = rows
        # (the rows' version the centroids were computed at, the centroids)
        self._centroids: tuple[int, Centroids] | None = None

    def exact(self, q: np.ndarray, limit: int, mask: np.ndarray, chunk_prior: float) -> list[Hit]:
        """Every row of ``mask`` scored."""
        rows, n = self.rows, self.rows.n
        passing = np.flatnonzero(mask)
        if passing.size * 4 < n:
            # A selective filter: score only the rows it passes (a gather of few rows beats
            # a product over all of them).
            scores = rows.vec[passing] @ q
            if chunk_prior:
                groups, centroids, _, _ = self.chunk_centroids()
                scores += chunk_prior * (centroids[groups[passing]] @ q)
            return rows.top_of(passing, scores, limit)
        scores = rows.vec[:n] @ q
        if chunk_prior:
            groups, centroids, _, _ = self.chunk_centroids()
            scores = scores + chunk_prior * (centroids @ q)[groups]
        return rows.top(scores, mask, limit)

    def through_graph(
        self, ann: AnnGraphs, q: np.ndarray, limit: int, mask: np.ndarray, chunk_prior: float
    ) -> list[Hit] | None:
        """Candidates from the graph, re-scored exactly; None asks for the exact search.

        The graph ranks by the unit's own similarity only. To keep the chunk prior's hits, the
        candidates also take every unit of the ``limit`` chunks whose centroids are nearest
        the query, found through the chunk graph (an exact product over every centroid, 1/8
        of the rows, was 23 / 37 ms p50 / p95 of a search at 1M units, 125k chunks, on the
        2-core machine under load, 27 Nov 2026), so a unit raised by its chunk is
        found whatever its own rank; then all candidates are scored exactly as the exact
        search scores them (the prior from their chunks' centroids only). Filters: the graph
        is asked for OVERSAMPLE x limit / (share of rows passing), and a filter too selective
        for ANN_MAX_CANDIDATES, or candidates that leave fewer than ``limit`` passing rows, go
        to the exact search."""
        rows, n = self.rows, self.rows.n
        passing = int(np.count_nonzero(mask))
        if passing == 0 or limit <= 0:
            return []
        want = math.ceil(limit * ANN_OVERSAMPLE * n / passing)
        if want > ANN_MAX_CANDIDATES:
            return None
        cand = ann.units.search(q, want, max(ANN_EF, want))
        cand = cand[(cand >= 0) & (cand < n)]
        if chunk_prior:
            groups, centroids, order, starts = self.chunk_centroids()
            chunks = self._near_chunks(ann, q, limit, groups, centroids)
            members = [order[starts[c] : starts[c + 1]] for c in chunks.tolist()]
            cand = np.unique(np.concatenate([cand, *members]))
        else:
            cand = np.unique(cand)
        cand = cand[mask[cand]]
        if cand.size < min(limit, passing):
            return None
        scores = rows.vec[cand] @ q
        if chunk_prior:
            scores += chunk_prior * (centroids[groups[cand]] @ q)
        return rows.top_of(cand, scores, limit)

    def _near_chunks(
        self, ann: AnnGraphs, q: np.ndarray, limit: int, groups: np.ndarray, centroids: np.ndarray
    ) -> np.ndarray:
        """The numbers of (about) the ``limit`` chunks whose centroids are nearest ``q``, from
        the chunk graph, after it takes the centroids of the chunks written to since (a chunk
        that gained a row is updated in place). A chunk that only lost rows keeps its old
        centroid in the graph until the graphs are rebuilt: it only steers which chunks are
        candidates, the prior itself is computed from the current centroids."""
        n = self.rows.n
        with ann.lock:
            if ann.chunks_upto < n:
                touched = np.unique(groups[ann.chunks_upto : n])
                ann.chunks.add(touched, centroids[touched])
                ann.chunks_upto = n
        k = min(limit, len(centroids))
        found = ann.chunks.search(q, k, max(ANN_EF, k))
        return found[(found >= 0) & (found < len(centroids))]

    def chunk_centroids(self) -> Centroids:
        """Each row's chunk number, the unit-length mean vector of each chunk's live units,
        and the rows ordered by chunk with each chunk's start in that order (chunk c's rows are
        ``order[starts[c]:starts[c + 1]]``); computed on first use after a write (10k units in
        chunks of 8: about 5 ms). Chunks are numbered in the order of their first row, so
        appends and removals keep the numbers (a compaction renumbers them, and the graphs go
        with it). Readers side by side may compute it twice: the same arrays, published as
        one tuple."""
        rows = self.rows
        cached = self._centroids
        if cached is None or cached[0] != rows.version:
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
            cached = self._centroids = (rows.version, (groups, centroids, order, starts))
        return cached[1]
