"""Derived per-bank state held in process: the search index and the memory graph.

Both are rebuilt from the store of record, so they can be dropped at any time. Each bank's
state remembers the store's revision token it was built at; :meth:`DerivedState.ensure`
compares it with the store's current token (one point lookup, ~1 ms) and on a change brings the
state up to date, so a write made by another process (a backfill worker, another Serve replica)
is seen by the next recall here: by the delta the writes since its token wrote, read from the
bank's revision log (memlane/revlog.py: the changed units fetched by id in one query, removed
ones dropped), or by a full reload when the log cannot say (too far behind, a write that did
not say what it changed, a deleted bank). Writes made through this process update the state in
place instead.

Cold banks: :meth:`DerivedState.warm_later` starts loading a bank this process does not hold on
a small background pool (one load per bank), so recall can answer that first call from the
store (memlane/engine.py, ``recall.cold_bank``) instead of waiting for the whole load.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Callable, Iterable, Sequence

import numpy as np

from memlane.interfaces import GraphNode, GraphStore, Hit, UnitFilter, VectorStore
from memlane.recall.index import DEFAULT_ANN_THRESHOLD, BankIndex
from memlane.records import MemoryUnit, UnitSlots
from memlane.revlog import RevisionDelta, between
from memlane.units import effective_interval

log = logging.getLogger(__name__)

# Bytes a held bank costs per memory: its vector (384 float32: 1.5 KB), its fields for the
# answer (~2 KB), its BM25 terms and postings and its graph node. tracemalloc over a
# 10k-memory LoCoMo-like bank counted 6 KB; a Memory replica retaining into 2,000 banks grew
# 7.2 KB of PSS per memory held (benchmarks/many_banks.py, 27 Nov 2026: the allocator's
# overhead, which tracemalloc does not see), so the budget counts what the process pays.
BYTES_PER_MEMORY = 7_400


def node_of(unit: MemoryUnit) -> GraphNode:
    """The graph's view of a unit (everything it needs is stored on the unit). Its time is the
    start of the unit's occurrence interval (memlane.units.occurrence), as the temporal
    channel sees it."""
    at = effective_interval(unit)[0]
    return GraphNode(
        id=unit.id, entity_ids=list(unit.entity_ids), timestamp=at.timestamp(), links=list(unit.links)
    )


class DerivedState:
    """Per-bank search indexes and graphs, kept coherent with the store's revision tokens.

    A :class:`memlane.interfaces.SearchBackend`, like the store, so recall and retain run on
    either."""

    #: BM25 runs on the index's own postings, whatever the store (interfaces.SearchBackend).
    has_lexical = True

    def __init__(
        self,
        store: VectorStore,
        graph: GraphStore,
        dim: int,
        *,
        with_index: bool = True,
        warm_workers: int = 1,
        warm_queue: int = 64,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
        max_bytes: int = 1024 * 2**20,
        max_banks: int = 2000,
        context_weight: float = 1.0,
    ) -> None:
        """``with_index=False`` keeps graphs only (search goes to a Milvus server).
        ``warm_workers`` background loads of cold banks run at once, and at most
        ``warm_queue`` wait (beyond that a cold bank is not queued: its next recall asks
        again). One worker: a load is CPU-bound Python (3.4 s at 10k memories) and two
        machines' worth of cores are rare where Memlane runs; more only make each slower.
        ``ann_threshold``: see BankIndex. ``max_bytes`` / ``max_banks``: the budget of the
        state held (:meth:`held_bytes`); past either, the least recently used banks are
        evicted (never the one in hand). ``context_weight``: the lexical context field's weight
        (BankIndex)."""
        self.store = store
        self.graph = graph
        self.dim = dim
        self.with_index = with_index
        self.ann_threshold = ann_threshold
        self.context_weight = context_weight
        self._indexes: dict[str, BankIndex] = {}
        self.max_bytes, self.max_banks = max_bytes, max_banks
        # banks holding any state here (index, graph, an attached cache), least recent first
        self._recent: OrderedDict[str, None] = OrderedDict()
        # other per-bank state counted in this budget (attach): (bytes held, evict a bank)
        self._attached: list[tuple[Callable[[], int], Callable[[str], None]]] = []
        #: banks evicted by the budget (metrics read it)
        self.budget_evictions = 0
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._warm_workers = warm_workers
        self._warm_queue = warm_queue
        self._warming: set[str] = set()  # banks queued or loading in the background
        self._generation: dict[str, int] = {}  # bumped by drop/evict: a load in flight is void
        self._pool: ThreadPoolExecutor | None = None
        self._closing = False
        #: how each bank was last brought up to date: "delta" or "load" (benchmarks and tests
        #: read it; nothing depends on it)
        self.last_refresh: dict[str, str] = {}

    def _lock(self, bank_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(bank_id, threading.Lock())

    def ensure(self, bank_id: str) -> BankIndex:
        """The bank's index (and graph), brought up to date when its revision changed: by the
        delta in the bank's revision log when it leads from the token held here to the current
        one, else by a full reload."""
        token = self.store.get_revision(bank_id)
        index = self._indexes.get(bank_id)
        if index is not None and index.revision == token:
            self._touch(bank_id)
            return index
        with self._lock(bank_id):
            index = self._indexes.get(bank_id)
            if index is not None and index.revision == token:
                return index
            if index is not None and self._refresh(bank_id, index, token):
                return index
            return self._load(bank_id, token)

    def _refresh(self, bank_id: str, index: BankIndex, token: str) -> bool:
        """Apply the delta from ``index.revision`` to ``token`` when the log proves it (caller
        holds the bank's lock); False when it cannot (the caller reloads)."""
        _, steps = self.store.revision_log(bank_id)
        path = between(index.revision, token, steps)
        if path is None:
            return False
        upserted, removed = path
        if len(upserted) + len(removed) > max(1000, len(index)):
            return False  # as much as the bank itself: a reload costs no more
        self._apply(bank_id, index, upserted, removed)
        index.revision = token
        self.last_refresh[bank_id] = "delta"
        log.debug("bank %s: applied %d upserts, %d removals", bank_id, len(upserted), len(removed))
        return True

    def apply_delta(self, bank_id: str, upserted: Iterable[str], removed: Iterable[str]) -> RevisionDelta:
        """Bring the bank's state (held here, at the store's state before the change) up to date
        with units changed in the store: ``upserted`` ids are read again (an id the store no
        longer holds is removed), ``removed`` ids dropped, and units that declared links to
        removed ids read again too (the store pruned those links). Returns what was applied,
        with an empty ``base`` (the caller's). For this process's own deletes (memlane/writes.py)."""
        index = self.index(bank_id)
        with self._lock(bank_id):
            return self._apply(bank_id, index, set(upserted), set(removed))

    def _apply(self, bank_id: str, index: BankIndex, upserted: set[str], removed: set[str]) -> RevisionDelta:
        if removed:
            upserted |= self.graph.linking_to(bank_id, sorted(removed))
        upserted -= removed
        units = self.store.get_units(bank_id, sorted(upserted), with_embedding=self.with_index)
        found = {u.id for u in units}
        gone = sorted(removed | (upserted - found))
        if gone:
            if self.with_index:
                index.remove(gone)
            self.graph.remove_nodes(bank_id, gone)
        if units:
            if self.with_index:
                index.upsert(units)
            self.graph.add_nodes(bank_id, [node_of(u) for u in units])
        return RevisionDelta("", sorted(found), gone)

    def linking_to(self, bank_id: str, ids: Sequence[str]) -> set[str] | None:
        """The units of the bank's state held here that declare a link to one of ``ids`` (the
        units a deletion of ``ids`` prunes), or None when this process holds no state for the
        bank. Exact for a writer under the bank's lease (memlane/writes.py): its state was
        brought to the store's at the write's start and kept there in place."""
        if bank_id not in self._indexes or not self.graph.has_bank(bank_id):
            return None
        return self.graph.linking_to(bank_id, ids)

    def held(self, bank_id: str) -> bool:
        """True when this process holds the bank's state (current or not)."""
        return bank_id in self._indexes

    def warm_later(self, bank_id: str) -> bool:
        """For a bank this process does not hold: start loading it in the background (once per
        bank, on a bounded pool) and return True, so the caller answers from the store. False
        when the bank is held (the caller uses :meth:`ensure`)."""
        if bank_id in self._indexes:
            return False
        with self._guard:
            if bank_id in self._warming or len(self._warming) >= self._warm_queue:
                return True
            self._warming.add(bank_id)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._warm_workers, thread_name_prefix="memlane-warm")
            generation = self._generation.get(bank_id, 0)
            pool = self._pool
        pool.submit(self._warm, bank_id, generation)
        return True

    def _warm(self, bank_id: str, generation: int) -> None:
        try:
            with self._lock(bank_id):
                if bank_id in self._indexes or self._generation.get(bank_id, 0) != generation:
                    return
                self._load(bank_id, self.store.get_revision(bank_id), generation)
        except Exception:  # noqa: BLE001 - the next recall of the bank tries again
            if not self._closing:  # a load cut short by close() is expected
                log.warning("background load of bank %s failed", bank_id, exc_info=True)
        finally:
            with self._guard:
                self._warming.discard(bank_id)

    def wait_warm(self) -> None:
        """Wait for the background loads queued so far (tests and benchmarks)."""
        with self._guard:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def close(self) -> None:
        """Stop the background loads (queued ones are dropped)."""
        self._closing = True
        with self._guard:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _load(self, bank_id: str, token: str, generation: int | None = None) -> BankIndex:
        index = BankIndex(
            self.dim, revision=token, ann_threshold=self.ann_threshold, context_weight=self.context_weight
        )
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
        if generation is not None and self._generation.get(bank_id, 0) != generation:
            return index  # dropped or evicted while loading in the background: keep nothing
        self.graph.rebuild(bank_id, nodes)
        self._indexes[bank_id] = index
        self.last_refresh[bank_id] = "load"
        self._touch(bank_id)
        self._keep_budget(bank_id)
        log.info("loaded bank %s: %d units at revision %s", bank_id, len(index), token or "-")
        return index

    def upsert_units(self, bank_id: str, units: Sequence) -> None:
        """Bring the bank's state up to date with units this process just wrote."""
        if self.with_index:
            self.index(bank_id).upsert(units)
        self.graph.add_nodes(bank_id, [node_of(u) for u in units])
        self._keep_budget(bank_id)

    def wrote(self, bank_id: str, seen: str, delta: RevisionDelta | None = None) -> None:
        """Record a write this process made to the bank (its state already updated in place).

        ``seen`` is the token the state was at before the write; if another process wrote in
        between, the state is marked stale so the next ensure() reloads it. ``delta`` (unit ids
        the write upserted and removed) goes to the bank's revision log, so other processes
        apply it instead of reloading; None (a failed write) makes them reload. Call it with the
        bank's lease held (memlane/writes.py): the log is read, extended and written back."""
        current = self.store.get_revision(bank_id)
        if delta is not None:
            delta = RevisionDelta(seen, delta.upserted, delta.removed) if current == seen else None
        token = self.store.bump_revision(bank_id, delta)
        index = self._indexes.get(bank_id)
        if index is not None:
            index.revision = token if current == seen else "stale"

    def held_banks(self) -> int:
        """How many banks this process holds any state for right now (an index and graph, or
        only an attached cache's entry)."""
        with self._guard:
            return len(self._recent)

    def held_bytes(self) -> int:
        """The estimated bytes of the state held: :data:`BYTES_PER_MEMORY` per memory, plus what
        the attached caches report."""
        held = sum(len(i) for i in list(self._indexes.values())) * BYTES_PER_MEMORY
        return held + sum(size() for size, _ in self._attached)

    def attach(self, held_bytes: Callable[[], int], evict: Callable[[str], None]) -> None:
        """Count another per-bank cache of this process in the budget (the tree's, memlane/
        tree/recall.py): ``held_bytes()`` is its estimated size, ``evict(bank_id)`` drops a
        bank from it. It calls :meth:`note` when it takes in a bank; evicting or dropping a
        bank here evicts it there too, so one LRU order and one budget cover both."""
        self._attached.append((held_bytes, evict))

    def note(self, bank_id: str, *, grew: bool = True) -> None:
        """An attached cache took in (``grew``) or used the bank: it is now the most recent,
        and after a take-in the least recent others leave while the budget is exceeded (a hit
        adds nothing, so it skips that sum over every held bank)."""
        self._touch(bank_id)
        if grew:
            self._keep_budget(bank_id)

    def _touch(self, bank_id: str) -> None:
        with self._guard:
            self._recent[bank_id] = None
            self._recent.move_to_end(bank_id)

    def _keep_budget(self, in_hand: str) -> None:
        """Evict the least recently used banks other than ``in_hand`` while the state is over
        ``max_banks`` or ``max_bytes`` (the bank in hand stays, even alone over the budget)."""
        while True:
            with self._guard:
                over = len(self._recent) > self.max_banks or self.held_bytes() > self.max_bytes
                victim = next((b for b in self._recent if b != in_hand), None) if over else None
                if victim is None:
                    return
                del self._recent[victim]
            log.debug("bank %s evicted: the derived state is over its budget", victim)
            self.evict(victim)
            self.budget_evictions += 1

    def held_units(self, bank_id: str) -> int:
        """How many memories this process holds for the bank (0: it holds none)."""
        index = self._indexes.get(bank_id)
        return len(index) if index is not None else 0

    def _void(self, bank_id: str) -> None:
        with self._guard:
            self._generation[bank_id] = self._generation.get(bank_id, 0) + 1
        self.last_refresh.pop(bank_id, None)

    def drop(self, bank_id: str) -> None:
        self._void(bank_id)
        self._indexes.pop(bank_id, None)
        with self._guard:
            self._recent.pop(bank_id, None)
        self.graph.drop_bank(bank_id)
        for _, evict in self._attached:
            evict(bank_id)

    def evict(self, bank_id: str) -> None:
        """Forget the bank's state in this process (a backfill worker that retains thousands of
        banks keeps only the bank in hand); the next ensure() reloads it from the store. A
        background load in flight keeps nothing."""
        self._void(bank_id)
        self._indexes.pop(bank_id, None)
        with self._guard:
            self._recent.pop(bank_id, None)
        self.graph.evict(bank_id)
        for _, evict in self._attached:
            evict(bank_id)

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

    def lexical_parts(self, bank_id: str, text: str, ids: Sequence[str]) -> dict[str, tuple[float, float]]:
        """BM25 of each id's text and context for ``text`` (see BankIndex.lexical_parts)."""
        return self.index(bank_id).lexical_parts(text, ids)

    def vectors(self, bank_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of the present ids (see BankIndex.vectors)."""
        return self.index(bank_id).vectors(ids)

    def unit_slots(self, bank_id: str, ids: Sequence[str]) -> dict[str, UnitSlots]:
        """The stored slot signals of the present ids (see BankIndex.unit_slots)."""
        return self.index(bank_id).unit_slots(ids)

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
