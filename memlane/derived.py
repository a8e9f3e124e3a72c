"""Derived per-bank state held in process: the search index and the memory graph.

Both are rebuilt from the store of record, so they can be dropped at any time. Each bank's
state remembers the store's revision token it was built at; :meth:`DerivedState.ensure`
compares it with the store's current token (one point lookup, ~1 ms) and reloads on a change,
so a write made by another process (a backfill worker, another Serve replica) is seen by the
next recall here. Writes made through this process update the state in place instead.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Sequence

import numpy as np

from memlane.interfaces import GraphNode, GraphStore, Hit, UnitFilter, VectorStore
from memlane.model import MemoryUnit
from memlane.recall.index import DEFAULT_ANN_THRESHOLD, BankIndex
from memlane.units import effective_interval

log = logging.getLogger(__name__)


def node_of(unit: MemoryUnit) -> GraphNode:
    """The graph's view of a unit (everything it needs is stored on the unit). Its time is the
    start of the unit's occurrence interval (memlane.units.occurrence), as the temporal
    channel sees it."""
    at = effective_interval(unit)[0]
    return GraphNode(
        id=unit.id, entity_ids=list(unit.entity_ids), timestamp=at.timestamp(), links=list(unit.links)
    )


def _single_threaded_blas() -> None:
    """One OpenBLAS thread for NumPy in this process.

    The index's one-query matrix products are memory-bound; with OpenBLAS's default of a
    thread per core its spinning threads fought torch's OpenMP threads for the 2 cores, and
    query embedding inside recall went from 8 ms to 16 ms p50 / 96 ms p95 at 10k memories
    (torch uses its own OpenMP pool, which this does not touch)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class DerivedState:
    """Per-bank search indexes and graphs, kept coherent with the store's revision tokens.

    A :class:`memlane.interfaces.SearchBackend`, like the store, so recall and retain run on
    either."""

    def __init__(
        self,
        store: VectorStore,
        graph: GraphStore,
        dim: int,
        *,
        with_index: bool = True,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
    ) -> None:
        """``with_index=False`` keeps graphs only (search goes to a Milvus server).
        ``ann_threshold``: see BankIndex."""
        self.store = store
        self.graph = graph
        self.dim = dim
        self.with_index = with_index
        self.ann_threshold = ann_threshold
        if with_index:
            _single_threaded_blas()
        self._indexes: dict[str, BankIndex] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, bank_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(bank_id, threading.Lock())

    def ensure(self, bank_id: str) -> BankIndex:
        """The bank's index (and graph), reloaded from the store when its revision changed."""
        token = self.store.get_revision(bank_id)
        index = self._indexes.get(bank_id)
        if index is not None and index.revision == token:
            return index
        with self._lock(bank_id):
            index = self._indexes.get(bank_id)
            if index is not None and index.revision == token:
                return index
            return self._load(bank_id, token)

    def _load(self, bank_id: str, token: str) -> BankIndex:
        index = BankIndex(self.dim, revision=token, ann_threshold=self.ann_threshold)
        nodes: list[GraphNode] = []
        for batch in self.store.iter_units(bank_id, with_embedding=self.with_index):
            if self.with_index:
                index.upsert(batch)
            nodes.extend(node_of(u) for u in batch)
        # Rebuilt from the units in hand: the graph keeps no snapshot of its own. Parquet
        # snapshots were written on every retain and delete and never read: loading one costs
        # more than rebuilding from units already in hand (10k units: rebuild 127 ms, load
        # 215 ms, and each snapshot write with fsync 114 ms; 100k: 0.3 s vs 1.4 s), and a
        # snapshot with the right unit count could still be stale (another process
        # re-retained with other links).
        self.graph.rebuild(bank_id, nodes)
        self._indexes[bank_id] = index
        log.info("loaded bank %s: %d units at revision %s", bank_id, len(index), token or "-")
        return index

    def upsert_units(self, bank_id: str, units: Sequence) -> None:
        """Bring the bank's state up to date with units this process just wrote."""
        if self.with_index:
            self.index(bank_id).upsert(units)
        self.graph.add_nodes(bank_id, [node_of(u) for u in units])

    def wrote(self, bank_id: str, seen: str) -> None:
        """Record a write this process made to the bank (its state already updated in place).

        ``seen`` is the token the state was at before the write; if another process wrote in
        between, the state is marked stale so the next ensure() reloads it."""
        current = self.store.get_revision(bank_id)
        token = self.store.bump_revision(bank_id)
        index = self._indexes.get(bank_id)
        if index is not None:
            index.revision = token if current == seen else "stale"

    def held_banks(self) -> int:
        """How many banks this process holds an index (and graph) for right now."""
        return len(self._indexes)

    def drop(self, bank_id: str) -> None:
        self._indexes.pop(bank_id, None)
        self.graph.drop_bank(bank_id)

    def evict(self, bank_id: str) -> None:
        """Forget the bank's state in this process (a backfill worker that retains thousands of
        banks keeps only the bank in hand); the next ensure() reloads it from the store."""
        self._indexes.pop(bank_id, None)
        self.graph.evict(bank_id)

    def index(self, bank_id: str) -> BankIndex:
        index = self._indexes.get(bank_id)
        return index if index is not None else self.ensure(bank_id)

    # store-compatible search ------------------------------------------------------------------
    def candidates(self, bank_id: str, ids: Sequence[str], flt: UnitFilter | None) -> dict[str, dict]:
        """Scoring fields of the ids that pass ``flt`` (see BankIndex.candidates)."""
        return self.index(bank_id).candidates(ids, flt)

    def search_dense(
        self,
        bank_id: str,
        vectors: np.ndarray,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
        chunk_prior: float = 0.0,
    ) -> list[list[Hit]]:
        """Hits carry no fields, or only ``mentioned_at`` when any are asked for (all that
        retain's semantic links use). ``chunk_prior``: see BankIndex.search_dense."""
        index = self.index(bank_id)
        hits = [index.search_dense(v, limit, flt, chunk_prior) for v in np.atleast_2d(vectors)]
        if fields:
            times = index.mentioned_at(h.id for hs in hits for h in hs)
            for h in (h for hs in hits for h in hs):
                h.fields = {"mentioned_at": times.get(h.id)}
        return hits

    def search_lexical(
        self,
        bank_id: str,
        text: str,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        return self.index(bank_id).search_lexical(text, limit, flt)

    def search_time(
        self,
        bank_id: str,
        start: datetime,
        end: datetime,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        return self.index(bank_id).search_time(start.timestamp(), end.timestamp(), limit, flt)
