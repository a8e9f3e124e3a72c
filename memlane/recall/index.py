"""In-process search over one bank: a dense matrix, BM25 postings and the scalar columns the
filters need. Derived data, like the graph: built from the store of record and kept in step
with this process's writes; the engine reloads it when the bank's revision token changes.

Why: Milvus Lite searches in pure Python and its cost grows with rows and hits. At 10k units a
dense top-100 search took 47 ms p50 and a whole recall 109 ms p50 / 167 ms p95 (memlane bench
engine, Nov 2026), against a 50 ms p95 target. A 10k x 384 matrix product is under 1 ms. With
a Milvus server (C++, segment pruning) ``search_backend="milvus"`` searches the store directly.

:class:`BankIndex` holds the lock and the HNSW graphs' life cycle, and composes three parts:
the rows (memlane/recall/index_rows.py), dense search (memlane/recall/dense.py) and the BM25
postings (memlane/recall/bm25.py).

Threads: a reader-writer lock (memlane/recall/rwlock.py). Searches share it, so a recall's
semantic, lexical and temporal channels run side by side (with one lock the lexical search
waited for the dense one: most of a 1M bank's distance from a small one, issue 38); writes
hold it alone. What a search computes lazily is safe among readers: the chunk centroids are
published as one tuple (memlane/recall/dense.py), a graph build is started under a small mutex
of its own, and the BM25 postings' numpy cache holds values any reader would compute alike.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Iterable, Sequence

import numpy as np

from memlane.interfaces import Hit, UnitFilter
from memlane.recall.bm25 import Postings, combined, query_terms, unit_tokens
from memlane.recall.dense import AnnGraphs, DenseSearch
from memlane.recall.index_rows import IndexRows
from memlane.recall.rwlock import RWLock
from memlane.records import MemoryUnit, UnitSlots
from memlane.units import CANDIDATE_FIELDS

#: Live units from which dense search goes through the HNSW graph (RecallSettings.ann_threshold
#: overrides it). At 100k the graph did not pay (`memlane bench engine --size 0 --index-size
#: 10000 --index-size 100000 --queries 40`, Nov 2026, load average ~12 on 2 cores): recall
#: p50/p95 exact 460/860 ms vs graph 404/1257 ms (noise of the load), for a 138 s build and
#: +173 MB; an exact top-100 over 100k rows was 34 ms p50 against the graph's 0.8 ms
#: (benchmarks/ann_libs.py). At 1M it does (benchmarks/big_bank.py, one bank loaded from a
#: Milvus server, 27 Nov 2026): top-10 exact 168 / 568 ms p50 / p95 against the graph's 5.3 /
#: 8.8 ms at recall@10 1.0, the whole recall 869 / 1010 ms against 619 / 751 ms, for a 766 s
#: build (in the background) and +1.7 GB; at 10k both were under 1.2 ms. 200k (the exact
#: product is linear in rows: ~34 ms there by the 1M figure) stays where the graph starts.
DEFAULT_ANN_THRESHOLD = 200_000
#: Batches from this size take the column-at-a-time path (bulk_load).
BULK_MIN = 64
_TIME_KEYS = ("occurred_start", "occurred_end", "mentioned_at")


def _check_embedded(units: Sequence[MemoryUnit]) -> None:
    for u in units:
        if u.embedding is None:
            raise ValueError(f"unit {u.id!r} has no embedding")


class BankIndex:
    """Dense, lexical and time search over one bank's units. Thread-safe."""

    def __init__(
        self,
        dim: int,
        revision: str = "",
        *,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
        ann_background: bool = True,
        context_weight: float = 1.0,
    ) -> None:
        """``ann_threshold``: live units from which dense search uses the HNSW graph.
        ``ann_background``: build the graph in a thread (exact search answers meanwhile);
        False builds it within the first search that needs it (tests, benchmarks)."""
        if ann_threshold < 1:
            raise ValueError(f"ann_threshold must be >= 1, got {ann_threshold}")
        self.dim = dim
        self.revision = revision
        self.ann_threshold = ann_threshold
        self.ann_background = ann_background
        self._lock = RWLock()
        self.rows = IndexRows(dim)
        # BM25 over two fields: the unit's text, and its context (the neighbouring turns),
        # weighted by ``context_weight`` (see :meth:`search_lexical`).
        self.lexical = Postings()
        self.context = Postings()
        self.context_weight = context_weight
        self.dense = DenseSearch(self.rows)
        # The HNSW graphs once built (None below the threshold): over rows [0, rows.n), and
        # over the chunk centroids (labelled by chunk number, for the chunk prior); a new
        # generation invalidates a build in flight (the rows it read were renumbered). Set
        # under the write lock; the start of a build (``_ann_building``) under ``_ann_state``
        # too, since searches (readers, side by side) start it.
        self._ann: AnnGraphs | None = None
        self._ann_building = False
        self._ann_gen = 0
        self._ann_state = threading.Lock()

    def __len__(self) -> int:
        return self.rows.alive_n

    def unit_ids(self) -> list[str]:
        """The ids of the units the index holds (what ``memlane doctor`` compares with the store)."""
        with self._lock.read():
            return list(self.rows.pos)

    # writes ---------------------------------------------------------------------------------
    def upsert(self, units: Sequence[MemoryUnit]) -> None:
        """Add units (with embeddings); a unit already present is replaced. Batches of
        BULK_MIN units or more take :meth:`bulk_load`'s column-at-a-time path."""
        if len(units) >= BULK_MIN:
            self.bulk_load(units)
            return
        _check_embedded(units)
        tokens = [unit_tokens(u) for u in units]
        with self._lock.write():
            self._remove([u.id for u in units if u.id in self.rows.pos])
            lo = self.rows.append(units, [(len(t), len(c)) for t, c in tokens])
            self._post(lo, tokens)
            self._ann_extend()

    def bulk_load(self, units: Sequence[MemoryUnit]) -> None:
        """:meth:`upsert` for large batches (a cold load, a backfill): the same rows, written a
        column at a time (one array per column, one pass over the terms), the graph extended
        once. A unit id given twice keeps its last version, as two upserts would."""
        units = list({u.id: u for u in units}.values())
        _check_embedded(units)
        if not units:
            return
        tokens = [unit_tokens(u) for u in units]
        with self._lock.write():
            self._remove([u.id for u in units if u.id in self.rows.pos])
            lo = self.rows.append_bulk(units, [(len(t), len(c)) for t, c in tokens])
            self._post(lo, tokens)
            self._ann_extend()

    def remove(self, ids: Iterable[str]) -> None:
        """Drop the units ``ids`` (absent ones are ignored)."""
        with self._lock.write():
            self._remove([i for i in ids if i in self.rows.pos])
            if self.rows.n > 1000 and self.rows.alive_n < self.rows.n // 2:
                self._compact()

    def _post(self, lo: int, tokens: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> None:
        self.lexical.add(lo, [t for t, _ in tokens])
        self.context.add(lo, [c for _, c in tokens])

    def _remove(self, ids: list[str]) -> None:
        dead = self.rows.remove(ids)
        self.lexical.remove(dead)
        self.context.remove(dead)

    def _compact(self) -> None:
        """Rebuild without dead rows (after many deletes or replacements); the graphs go with
        the old row numbers, and the next search that needs them rebuilds them."""
        kept = self.rows.compact()
        self.lexical.compact(kept)
        self.context.compact(kept)
        self._ann = None
        self._ann_building = False
        self._ann_gen += 1

    # the graph ------------------------------------------------------------------------------
    @property
    def ann_active(self) -> bool:
        """Whether dense search goes through the HNSW graph right now."""
        return self._ann is not None

    def _ann_extend(self) -> None:
        """Add the rows written since the graph was built (a replaced unit's old row stays in
        the graph, dead, and is masked out); the chunk graph takes their chunks' centroids at
        the next search that needs it (:meth:`DenseSearch.through_graph`). Too many dead rows:
        drop the graphs, so the next search rebuilds them over the live ones (after a
        compaction). Caller holds the write lock."""
        ann, rows = self._ann, self.rows
        if ann is None:
            return
        if rows.n - rows.alive_n > 0.25 * rows.n:
            self._compact()
            return
        have = len(ann.units)
        if have < rows.n:
            ann.units.add(np.arange(have, rows.n), rows.vec[have : rows.n])

    def _ann_for_search(self) -> tuple[AnnGraphs | None, bool]:
        """The graphs a search goes through (None: exact), and whether this search is to build
        them first (``ann_background=False``: it releases its read, builds, and reads again).
        Caller holds a read: searches start a build under ``_ann_state``, so only one does."""
        if self.rows.alive_n < self.ann_threshold:
            return None, False  # exact (a graph built earlier is kept in step, for a bank that grows back)
        if self._ann is None:
            with self._ann_state:
                if not self._ann_building:
                    self._ann_building = True
                    if not self.ann_background:
                        return None, True
                    threading.Thread(target=self._build_ann, args=(self._ann_gen,), daemon=True).start()
        return self._ann, False

    def build_ann(self) -> None:
        """Build the HNSW graphs over the current rows now (whatever the size)."""
        with self._lock.read(), self._ann_state:
            self._ann_building = True
            gen = self._ann_gen
        self._build_ann(gen)

    def _build_ann(self, gen: int) -> None:
        """Build over the rows (and chunk centroids) present at the start, outside the lock
        (rows are append-only and never change in place, so the snapshot stays valid while
        writes go on), then add the rows written meanwhile and publish under the write lock,
        unless a compaction renumbered the rows."""
        graphs = None
        try:
            with self._lock.read():
                if gen != self._ann_gen:
                    return
                n0, vec = self.rows.n, self.rows.vec
                centroids = self.dense.chunk_centroids()[1]
            graphs = AnnGraphs.build(self.dim, vec[:n0], centroids, n0, threads=min(2, os.cpu_count() or 1))
        finally:
            with self._lock.write():
                if gen == self._ann_gen:
                    if graphs is not None:
                        self._ann = graphs
                        self._ann_extend()
                    self._ann_building = False

    # search ---------------------------------------------------------------------------------
    def search_dense(
        self, vector: np.ndarray, limit: int, flt: UnitFilter | None = None, chunk_prior: float = 0.0
    ) -> list[Hit]:
        """Cosine similarity to ``vector``, plus ``chunk_prior`` times its similarity to the
        centroid of the unit's chunk (the consecutive turns it was retained with), so a turn
        that only makes sense in its exchange ("Yes, last Friday!") is found through it.

        Exact below ``ann_threshold`` live units; from there through the HNSW graph (see
        :meth:`DenseSearch.through_graph`), exact again when the graph is not built yet or the
        filter is selective."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        with self._lock.read():
            ann, build = self._ann_for_search()
            if not build:
                return self._search_dense(q, limit, flt, chunk_prior, ann)
            gen = self._ann_gen
        # No read -> write upgrade: the read is released, the graphs built (published under
        # the write lock), and the search made under a new read.
        self._build_ann(gen)
        with self._lock.read():
            ann = self._ann if self.rows.alive_n >= self.ann_threshold else None
            return self._search_dense(q, limit, flt, chunk_prior, ann)

    def _search_dense(
        self, q: np.ndarray, limit: int, flt: UnitFilter | None, chunk_prior: float, ann: AnnGraphs | None
    ) -> list[Hit]:
        mask = self.rows.mask(flt)
        if ann is not None:
            hits = self.dense.through_graph(ann, q, limit, mask, chunk_prior)
            if hits is not None:
                return hits
        return self.dense.exact(q, limit, mask, chunk_prior)

    def search_lexical(self, text: str, limit: int, flt: UnitFilter | None = None) -> list[Hit]:
        """BM25 of the units' text plus ``context_weight`` times BM25 of their context, each
        field with its own length norm (memlane/recall/bm25.py). One field of both, as before,
        let a short reply outrank the turn it answers on that turn's words."""
        terms = query_terms(text)
        with self._lock.read():
            rows = self.rows
            if not terms or not rows.alive_n:
                return []
            at, scores = combined(*self._field_scores(terms), self.context_weight)
            keep = rows.mask(flt)[at]
            return rows.top_of(at[keep], scores[keep], limit)

    def lexical_parts(self, text: str, ids: Sequence[str]) -> dict[str, tuple[float, float]]:
        """Each present id's BM25 of its text and of its context for ``text`` (0.0 where no
        term occurs): what the learned ranker reads beside the lexical channel's sum."""
        terms = query_terms(text)
        with self._lock.read():
            rows = self.rows
            out = {i: (0.0, 0.0) for i in ids if i in rows.pos}
            if not terms or not out:
                return out
            (at_t, s_t), (at_c, s_c) = self._field_scores(terms)
            text_s = dict(zip(at_t.tolist(), s_t.tolist()))
            ctx_s = dict(zip(at_c.tolist(), s_c.tolist()))
            return {i: (text_s.get(rows.pos[i], 0.0), ctx_s.get(rows.pos[i], 0.0)) for i in out}

    def _field_scores(
        self, terms: set[str]
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """BM25 of ``terms`` over the text field and the context field. Caller holds a read."""
        rows = self.rows
        n, alive = rows.n, rows.alive_n
        text = self.lexical.scores(terms, n, rows.cols["dl"], alive, max(rows.alive_len / alive, 1e-9))
        ctx_avg = rows.alive_ctx_len / alive
        context = (
            self.context.scores(terms, n, rows.cols["dlc"], alive, ctx_avg)
            if ctx_avg > 0
            else (np.zeros(0, dtype=np.int64), np.zeros(0))
        )
        return text, context

    def search_time(self, start: float, end: float, limit: int, flt: UnitFilter | None = None) -> list[Hit]:
        """Units whose occurrence interval overlaps [start, end], nearest middle first, with
        their time fields (epoch seconds)."""
        with self._lock.read():
            rows = self.rows
            n, c = rows.n, rows.cols
            mask = rows.mask(flt) & (c["t_start"][:n] <= end) & (c["t_end"][:n] >= start)
            gap = -np.abs((c["t_start"][:n] + c["t_end"][:n]) - (start + end))
            hits = rows.top(gap, mask, limit)
            for h in hits:
                i = rows.pos[h.id]
                h.score = 0.0
                h.fields = {
                    k: (None if math.isnan(v) else math.floor(v))
                    for k, v in zip(_TIME_KEYS, (c["occ_start"][i], c["occ_end"][i], c["mentioned"][i]))
                }
            return hits

    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """Each present id's vector (a copy)."""
        with self._lock.read():
            pos, vec = self.rows.pos, self.rows.vec
            return {i: vec[pos[i]].copy() for i in ids if i in pos}

    def unit_slots(self, ids: Iterable[str]) -> dict[str, UnitSlots]:
        """Each present id's stored slot signals, where it has some."""
        with self._lock.read():
            pos, rows = self.rows.pos, self.rows
            found = {i: rows.slots_at(pos[i]) for i in ids if i in pos}
        return {i: s for i, s in found.items() if s is not None}

    def mentioned_at(self, ids: Iterable[str]) -> dict[str, float]:
        """Each present id's mention time (epoch seconds)."""
        with self._lock.read():
            pos, mentioned = self.rows.pos, self.rows.cols["mentioned"]
            return {i: float(mentioned[pos[i]]) for i in ids if i in pos}

    def candidates(self, ids: Sequence[str], flt: UnitFilter | None = None) -> dict[str, dict]:
        """The fields (as :func:`memlane.units.unit_fields`, less ``context``) of each id that
        exists and passes ``flt``. The values are shared: callers must not modify them."""
        with self._lock.read():
            rows = self.rows
            found = [(uid, rows.pos[uid]) for uid in ids if uid in rows.pos]
            at = np.fromiter((i for _, i in found), dtype=np.int64, count=len(found))
            keep = rows.mask(flt, at)
            return {
                uid: dict(zip(CANDIDATE_FIELDS, rows.fields[i])) for (uid, i), ok in zip(found, keep) if ok
            }
