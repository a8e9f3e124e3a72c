"""In-process search over one bank: a dense matrix, BM25 postings and the scalar columns the
filters need. Derived data, like the graph: built from the store of record and kept in step
with this process's writes; the engine reloads it when the bank's revision token changes.

Why: Milvus Lite searches in pure Python and its cost grows with rows and hits. At 10k units a
dense top-100 search took 47 ms p50 and a whole recall 109 ms p50 / 167 ms p95 (memlane bench
engine, Nov 2026), against a 50 ms p95 target. A 10k x 384 matrix product is under 1 ms. With
a Milvus server (C++, segment pruning) ``search_backend="milvus"`` searches the store directly.

Big banks: from ``ann_threshold`` live units (RecallSettings.ann_threshold) the dense search
asks an HNSW graph (memlane/recall/ann.py) for candidates and re-scores them exactly, chunk
prior included; below it, and for selective filters, it stays exact (see _search_ann).

BM25 uses Milvus's formula and defaults (k1=1.2, b=0.75, idf = ln(1 + (N - n + .5)/(n + .5)))
over the same analysed text (``memlane.stores.lexical.analyze``), so both backends rank alike.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from array import array
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Iterable, Sequence

import numpy as np
from scipy.sparse import csr_matrix

from memlane.interfaces import Hit, UnitFilter
from memlane.model import FactType, MemoryUnit
from memlane.recall.ann import HnswIndex
from memlane.stores.lexical import analyze
from memlane.units import (
    CANDIDATE_FIELDS,
    FACT_CODES,
    TIME_FIELDS,
    effective_interval,
    filter_mask,
    nan_if_none,
    unit_fields,
)

K1, B = 1.2, 0.75
_CHUNK = CANDIDATE_FIELDS.index("chunk_id")
_ENTITIES = CANDIDATE_FIELDS.index("entity_ids")

#: Live units from which dense search goes through the HNSW graph (RecallSettings.ann_threshold
#: overrides it). At 100k the graph did not pay (`memlane bench engine --size 0 --index-size
#: 10000 --index-size 100000 --queries 40`, Nov 2026, load average ~12 on 2 cores): recall
#: p50/p95 exact 460/860 ms vs graph 404/1257 ms (noise of the load), for a 138 s build and
#: +173 MB; an exact top-100 over 100k rows was 34 ms p50 against the graph's 0.8 ms
#: (benchmarks/ann_libs.py). 200k is where the exact product (linear in rows) passes ~70 ms
#: here; a judgement, not a measured crossover: see ANN_NOTE in memlane/recall/ann.py.
DEFAULT_ANN_THRESHOLD = 200_000
#: The graph is asked for OVERSAMPLE x limit / (share of rows passing the filter) candidates ...
ANN_OVERSAMPLE = 2.0
#: ... and at most this many: a filter that passes so few rows that more would be needed is
#: answered exactly over the rows it passes (cheap: they are few).
ANN_MAX_CANDIDATES = 2000
#: Batches from this size take the column-at-a-time path (bulk_load).
BULK_MIN = 64
#: Beam width of a graph search (at least the number of candidates asked for).
ANN_EF = 256
_TIME_KEYS = ("occurred_start", "occurred_end", "mentioned_at")


def _ts(dt) -> float:
    return nan_if_none(None if dt is None else dt.timestamp())


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_PLAIN = tuple(k for k in CANDIDATE_FIELDS if k not in TIME_FIELDS)


def _secs(dt: datetime | None) -> int | None:
    """memlane.units.to_s without its round trip through microseconds (the same floor of an
    exact timedelta): to_s was half of building a row, ~0.5 s of a 10k-unit load profiled."""
    if dt is None:
        return None
    return ((dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)) - _EPOCH) // _SECOND


def _row(unit: MemoryUnit) -> tuple:
    """A unit's CANDIDATE_FIELDS values, as unit_fields gives them (its bank id interned: one
    string for the bank)."""
    plain = unit_fields(unit, _PLAIN)
    plain["bank_id"] = sys.intern(plain["bank_id"])
    return tuple(_secs(getattr(unit, k)) if k in TIME_FIELDS else plain[k] for k in CANDIDATE_FIELDS)


def _tokens(unit: MemoryUnit) -> tuple[str, ...]:
    """The unit's analysed tokens (text and context), interned: one string per term."""
    return tuple(sys.intern(t) for t in analyze(f"{unit.text} {unit.context}").split())


class BankIndex:
    """Dense, lexical and time search over one bank's units. Thread-safe."""

    def __init__(
        self,
        dim: int,
        revision: str = "",
        *,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
        ann_background: bool = True,
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
        self._lock = threading.RLock()
        self._ann_gen = 0
        self._reset()

    def _reset(self) -> None:
        self.ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._vec = np.zeros((0, self.dim), dtype=np.float32)
        cols = (
            "alive",
            "mentioned",
            "valid_from",
            "invalid",
            "occ_start",
            "occ_end",
            "t_start",
            "t_end",
            "ftype",
            "dl",
        )
        self._cols = {c: np.zeros(0) for c in cols}
        self._docs: list[str] = []
        # Each unit's fields, so recall returns memories without a store round trip (the
        # fetch was 12 ms of a 35 ms recall at 1k units on Milvus Lite): the values of
        # CANDIDATE_FIELDS as a tuple (a dict a unit cost ~460 bytes more), made a dict for
        # the few ids a recall asks for. The analysed tokens as a tuple of interned strings
        # (a Counter a unit was ~800 bytes), and postings as machine arrays (two Python int
        # lists cost ~72 bytes an entry, arrays 6). See _row_bytes in the engine benchmark.
        self._rows: list[tuple] = []
        self._tags: list[frozenset[str]] = []
        self._terms: list[tuple[str, ...]] = []
        self._postings: dict[str, tuple[array, array]] = {}
        self._post_np: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._df: Counter = Counter()
        self._n = 0  # rows used (alive or dead)
        self._alive_n = 0
        self._alive_len = 0.0
        self._centroids: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        # The HNSW graph over rows [0, self._n) once built (None below the threshold); a new
        # generation invalidates a build in flight (the rows it read were renumbered).
        self._ann: HnswIndex | None = None
        self._ann_building = False
        self._ann_gen += 1

    def __len__(self) -> int:
        return self._alive_n

    def unit_ids(self) -> list[str]:
        """The ids of the units the index holds (what ``memlane doctor`` compares with the store)."""
        with self._lock:
            return list(self._pos)

    # writes ---------------------------------------------------------------------------------
    def upsert(self, units: Sequence[MemoryUnit]) -> None:
        """Add units (with embeddings); a unit already present is replaced. Batches of
        BULK_MIN units or more take :meth:`bulk_load`'s column-at-a-time path."""
        if len(units) >= BULK_MIN:
            self.bulk_load(units)
            return
        with self._lock:
            self._centroids = None
            self._remove([u.id for u in units if u.id in self._pos])
            self._grow(self._n + len(units))
            for u in units:
                if u.embedding is None:
                    raise ValueError(f"unit {u.id!r} has no embedding")
                i = self._n
                self._n += 1
                self.ids.append(u.id)
                self._pos[u.id] = i
                self._vec[i] = u.embedding
                start, end = effective_interval(u)
                c = self._cols
                c["alive"][i] = 1.0
                c["mentioned"][i] = u.mentioned_at.timestamp()
                c["valid_from"][i] = _ts(u.valid_from)
                c["invalid"][i] = _ts(u.invalid_at)
                c["occ_start"][i] = _ts(u.occurred_start)
                c["occ_end"][i] = _ts(u.occurred_end)
                c["t_start"][i], c["t_end"][i] = start.timestamp(), end.timestamp()
                c["ftype"][i] = FACT_CODES[FactType(u.fact_type).value]
                self._rows.append(_row(u))
                tokens = _tokens(u)
                terms = Counter(tokens)
                c["dl"][i] = len(tokens)
                self._docs.append(u.document_id)
                self._tags.append(frozenset(u.tags))
                self._terms.append(tokens)
                for term, tf in terms.items():
                    pos, tfs = self._postings.setdefault(term, (array("i"), array("I")))
                    pos.append(i)
                    tfs.append(tf)
                    self._post_np.pop(term, None)
                    self._df[term] += 1
                self._alive_n += 1
                self._alive_len += c["dl"][i]
            self._ann_extend()

    def bulk_load(self, units: Sequence[MemoryUnit]) -> None:
        """:meth:`upsert` for large batches (a cold load, a backfill): the same rows, written a
        column at a time (one array per column, one pass over the terms), the graph extended
        once. A unit id given twice keeps its last version, as two upserts would."""
        units = list({u.id: u for u in units}.values())
        for u in units:
            if u.embedding is None:
                raise ValueError(f"unit {u.id!r} has no embedding")
        if not units:
            return
        with self._lock:
            self._centroids = None
            self._remove([u.id for u in units if u.id in self._pos])
            m, lo = len(units), self._n
            hi = lo + m
            self._grow(hi)
            self._vec[lo:hi] = np.asarray([u.embedding for u in units], dtype=np.float32)
            c = self._cols
            c["alive"][lo:hi] = 1.0
            c["mentioned"][lo:hi] = [u.mentioned_at.timestamp() for u in units]
            for col, attr in (
                ("valid_from", "valid_from"),
                ("invalid", "invalid_at"),
                ("occ_start", "occurred_start"),
                ("occ_end", "occurred_end"),
            ):
                c[col][lo:hi] = [_ts(getattr(u, attr)) for u in units]
            spans = [effective_interval(u) for u in units]
            c["t_start"][lo:hi] = [a.timestamp() for a, _ in spans]
            c["t_end"][lo:hi] = [b.timestamp() for _, b in spans]
            c["ftype"][lo:hi] = [FACT_CODES[FactType(u.fact_type).value] for u in units]
            tokens = [_tokens(u) for u in units]
            terms = [Counter(t) for t in tokens]
            dl = np.fromiter((len(t) for t in tokens), dtype=np.float64, count=m)
            c["dl"][lo:hi] = dl
            self.ids.extend(u.id for u in units)
            self._pos.update((u.id, lo + j) for j, u in enumerate(units))
            self._rows.extend(_row(u) for u in units)
            self._docs.extend(u.document_id for u in units)
            self._tags.extend(frozenset(u.tags) for u in units)
            self._terms.extend(tokens)
            postings, df = self._postings, self._df
            for i, counts in enumerate(terms, start=lo):
                for term, tf in counts.items():
                    entry = postings.get(term)
                    if entry is None:
                        entry = postings[term] = (array("i"), array("I"))
                    entry[0].append(i)
                    entry[1].append(tf)
                df.update(counts.keys())
            for term in {t for counts in terms for t in counts}:
                self._post_np.pop(term, None)
            self._n = hi
            self._alive_n += m
            self._alive_len += float(dl.sum())
            self._ann_extend()

    def _ann_extend(self) -> None:
        """Add the rows written since the graph was built (a replaced unit's old row stays in
        the graph, dead, and is masked out). Too many dead rows: drop the graph, so the next
        search rebuilds it over the live ones (after a compaction)."""
        ann = self._ann
        if ann is None:
            return
        if self._n - self._alive_n > 0.25 * self._n:
            self._compact()
            return
        have = len(ann)
        if have < self._n:
            ann.add(np.arange(have, self._n), self._vec[have : self._n])

    def remove(self, ids: Iterable[str]) -> None:
        with self._lock:
            self._remove([i for i in ids if i in self._pos])
            if self._n > 1000 and self._alive_n < self._n // 2:
                self._compact()

    def _remove(self, ids: list[str]) -> None:
        self._centroids = None
        for uid in ids:
            i = self._pos.pop(uid)
            self._cols["alive"][i] = 0.0
            self._alive_n -= 1
            self._alive_len -= self._cols["dl"][i]
            for term in set(self._terms[i]):
                self._df[term] -= 1

    def _grow(self, need: int) -> None:
        cap = self._vec.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap, 256)
        vec = np.zeros((new, self.dim), dtype=np.float32)
        vec[:cap] = self._vec
        self._vec = vec
        for name, col in self._cols.items():
            grown = np.zeros(new)
            grown[:cap] = col
            self._cols[name] = grown

    def _compact(self) -> None:
        """Rebuild without dead rows (after many deletes or replacements)."""
        keep = [i for i in range(self._n) if self._cols["alive"][i]]
        rows = [
            (
                self.ids[i],
                self._vec[i].copy(),
                {k: c[i] for k, c in self._cols.items()},
                self._docs[i],
                self._tags[i],
                self._terms[i],
                self._rows[i],
            )
            for i in keep
        ]
        self._reset()
        self._grow(len(rows))
        for uid, vec, cols, doc, tags, terms, row in rows:
            i = self._n
            self._n += 1
            self.ids.append(uid)
            self._pos[uid] = i
            self._vec[i] = vec
            for k, v in cols.items():
                self._cols[k][i] = v
            self._docs.append(doc)
            self._tags.append(tags)
            self._terms.append(terms)
            self._rows.append(row)
            for term, tf in Counter(terms).items():
                pos, tfs = self._postings.setdefault(term, (array("i"), array("I")))
                pos.append(i)
                tfs.append(tf)
                self._df[term] += 1
            self._alive_n += 1
            self._alive_len += cols["dl"]

    # search ---------------------------------------------------------------------------------
    def _mask(self, flt: UnitFilter | None) -> np.ndarray:
        """Live rows that pass ``flt`` (the rule is memlane.units.filter_mask's)."""
        n, c = self._n, self._cols
        alive = c["alive"][:n] > 0
        if flt is None:
            return alive
        return alive & filter_mask(
            flt,
            fact_code=c["ftype"][:n],
            mentioned=c["mentioned"][:n],
            valid_from=c["valid_from"][:n],
            invalid_at=c["invalid"][:n],
            document_ids=self._docs[:n],
            tags=self._tags[:n],
            entity_ids=lambda: [r[_ENTITIES] or () for r in self._rows[:n]],
        )

    def _top(self, scores: np.ndarray, mask: np.ndarray, limit: int) -> list[Hit]:
        cand = np.flatnonzero(mask)
        if cand.size == 0 or limit <= 0:
            return []
        s = scores[cand]
        if cand.size > limit:
            part = np.argpartition(-s, limit - 1)[:limit]
            cand, s = cand[part], s[part]
        order = np.lexsort((cand, -s))  # score desc, then insertion order for ties
        return [Hit(id=self.ids[i], score=float(s[j])) for j, i in zip(order, cand[order])]

    def search_dense(
        self, vector: np.ndarray, limit: int, flt: UnitFilter | None = None, chunk_prior: float = 0.0
    ) -> list[Hit]:
        """Cosine similarity to ``vector``, plus ``chunk_prior`` times its similarity to the
        centroid of the unit's chunk (the consecutive turns it was retained with), so a turn
        that only makes sense in its exchange ("Yes, last Friday!") is found through it.

        Exact below ``ann_threshold`` live units; from there through the HNSW graph (see
        :meth:`_search_ann`), exact again when the graph is not built yet or the filter is
        selective."""
        with self._lock:
            q = np.asarray(vector, dtype=np.float32).reshape(-1)
            mask = self._mask(flt)
            ann = self._ann_for_search()
            if ann is not None:
                hits = self._search_ann(ann, q, limit, mask, chunk_prior)
                if hits is not None:
                    return hits
            return self._search_exact(q, limit, mask, chunk_prior)

    def _search_exact(self, q: np.ndarray, limit: int, mask: np.ndarray, chunk_prior: float) -> list[Hit]:
        n = self._n
        passing = np.flatnonzero(mask)
        if passing.size * 4 < n:
            # A selective filter: score only the rows it passes (a gather of few rows beats
            # a product over all of them).
            scores = np.full(n, -np.inf, dtype=np.float32)
            scores[passing] = self._vec[passing] @ q
            if chunk_prior:
                groups, centroids, _, _ = self._chunk_centroids()
                scores[passing] += chunk_prior * (centroids[groups[passing]] @ q)
            return self._top(scores, mask, limit)
        scores = self._vec[:n] @ q
        if chunk_prior:
            groups, centroids, _, _ = self._chunk_centroids()
            scores = scores + chunk_prior * (centroids @ q)[groups]
        return self._top(scores, mask, limit)

    def _search_ann(
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
        n = self._n
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
        scores = np.full(n, -np.inf, dtype=np.float32)
        scores[cand] = self._vec[cand] @ q
        if chunk_prior:
            scores[cand] += chunk_prior * near[groups[cand]]
        sub = np.zeros(n, dtype=bool)
        sub[cand] = True
        return self._top(scores, sub, limit)

    # the graph ---------------------------------------------------------------------------------
    @property
    def ann_active(self) -> bool:
        """Whether dense search goes through the HNSW graph right now."""
        return self._ann is not None

    def _ann_for_search(self) -> HnswIndex | None:
        if self._alive_n < self.ann_threshold:
            return None  # exact (a graph built earlier is kept in step, for a bank that grows back)
        if self._ann is None and not self._ann_building:
            if self.ann_background:
                self._ann_building = True
                threading.Thread(target=self._build_ann, args=(self._ann_gen,), daemon=True).start()
            else:
                self.build_ann()
        return self._ann

    def build_ann(self) -> None:
        """Build the HNSW graph over the current rows now (whatever the size)."""
        with self._lock:
            self._ann_building = True
        self._build_ann(self._ann_gen)

    def _build_ann(self, gen: int) -> None:
        """Build over the rows present at the start, outside the lock (rows are append-only
        and never change in place, so the snapshot stays valid while writes go on), then add
        the rows written meanwhile and publish, unless a compaction renumbered the rows."""
        with self._lock:
            n0, vec = self._n, self._vec
        try:
            ann = HnswIndex(self.dim, threads=min(2, os.cpu_count() or 1))
            ann.add(np.arange(n0), vec[:n0])
            with self._lock:
                if gen == self._ann_gen:
                    self._ann = ann
                    self._ann_extend()
        finally:
            with self._lock:
                if gen == self._ann_gen:
                    self._ann_building = False

    def _chunk_centroids(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each row's chunk number, the unit-length mean vector of each chunk's live units,
        and the rows ordered by chunk with each chunk's start in that order (chunk c's rows are
        ``order[starts[c]:starts[c + 1]]``); computed on first use after a write (10k units in
        chunks of 8: about 5 ms)."""
        if self._centroids is None:
            n = self._n
            numbers: dict[str, int] = {}
            groups = np.fromiter(
                (numbers.setdefault(self._rows[i][_CHUNK] or self.ids[i], len(numbers)) for i in range(n)),
                dtype=np.int64,
                count=n,
            )
            alive = np.flatnonzero(self._cols["alive"][:n] > 0)
            # Sum per chunk as a sparse (chunks x rows) product: np.add.at took 38 ms at 10k.
            member = csr_matrix(
                (np.ones(alive.size, dtype=np.float32), (groups[alive], alive)), shape=(len(numbers), n)
            )
            centroids = np.asarray(member @ self._vec[:n], dtype=np.float32)
            centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
            order = np.argsort(groups, kind="stable")
            starts = np.searchsorted(groups[order], np.arange(len(numbers) + 1))
            self._centroids = (groups, centroids, order, starts)
        return self._centroids

    def search_lexical(self, text: str, limit: int, flt: UnitFilter | None = None) -> list[Hit]:
        terms = set(analyze(text).split())
        with self._lock:
            if not terms or not self._alive_n:
                return []
            n, avgdl = self._n, self._alive_len / self._alive_n
            scores = np.zeros(n)
            dl = self._cols["dl"]
            for term in terms:
                df = self._df.get(term, 0)
                if df <= 0:
                    continue
                pos, tf = self._postings_np(term)
                idf = math.log(1 + (self._alive_n - df + 0.5) / (df + 0.5))
                # The length norm at the term's postings only (over all n rows it was a pass
                # over 1M rows per query at 1M units).
                scores[pos] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl[pos] / avgdl))
            return self._top(scores, self._mask(flt) & (scores > 0), limit)

    def _postings_np(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        cached = self._post_np.get(term)
        if cached is None:
            pos, tfs = self._postings[term]
            cached = self._post_np[term] = (
                np.frombuffer(pos, dtype=np.int32).copy(),
                np.frombuffer(tfs, dtype=np.uint32).astype(np.float64),
            )
        return cached

    def search_time(self, start: float, end: float, limit: int, flt: UnitFilter | None = None) -> list[Hit]:
        """Units whose occurrence interval overlaps [start, end], nearest middle first, with
        their time fields (epoch seconds)."""
        with self._lock:
            n, c = self._n, self._cols
            mask = self._mask(flt) & (c["t_start"][:n] <= end) & (c["t_end"][:n] >= start)
            gap = -np.abs((c["t_start"][:n] + c["t_end"][:n]) - (start + end))
            hits = self._top(gap, mask, limit)
            for h in hits:
                i = self._pos[h.id]
                h.score = 0.0
                h.fields = {
                    k: (None if math.isnan(v) else math.floor(v))
                    for k, v in zip(_TIME_KEYS, (c["occ_start"][i], c["occ_end"][i], c["mentioned"][i]))
                }
            return hits

    def mentioned_at(self, ids: Iterable[str]) -> dict[str, float]:
        with self._lock:
            return {i: float(self._cols["mentioned"][self._pos[i]]) for i in ids if i in self._pos}

    def candidates(self, ids: Sequence[str], flt: UnitFilter | None = None) -> dict[str, dict]:
        """The fields (as :func:`memlane.units.unit_fields`, less ``context``) of each id that
        exists and passes ``flt``. The values are shared: callers must not modify them."""
        with self._lock:
            mask = self._mask(flt)
            out = {}
            for uid in ids:
                i = self._pos.get(uid)
                if i is not None and mask[i]:
                    out[uid] = dict(zip(CANDIDATE_FIELDS, self._rows[i]))
            return out
