"""SparseGraphStore: the GraphStore on scipy.sparse CSR matrices (igraph only for export)."""

from __future__ import annotations

import math
import threading
from itertools import chain, repeat
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from memlane.interfaces import GraphNode
from memlane.records import check_bank_id
from memlane.stores.sparse_graph.build import build_view
from memlane.stores.sparse_graph.records import (
    EDGE_TYPES,
    BankState,
    Names,
    UnitRecord,
    View,
    compact_threshold,
    intern_all,
    normalise,
)
from memlane.stores.sparse_graph.spread import spread

if TYPE_CHECKING:  # igraph is imported lazily: only to_igraph needs it
    import igraph


class SparseGraphStore:
    """One memory graph per bank, in memory, derived from the store of record.

    Implements :class:`memlane.interfaces.GraphStore`. Thread-safe: each bank has its own lock;
    readers use an immutable built view, so ``spread`` never sees a half-built matrix, and many
    threads spread concurrently while another adds nodes.

    Args:
        temporal_sigma_hours: temporal link weight exp(-|dt| / sigma), sigma in hours.
        temporal_neighbors: each unit links to this many units before and after it in time.
    """

    def __init__(
        self,
        temporal_sigma_hours: float = 24.0,
        temporal_neighbors: int = 2,
    ) -> None:
        if not temporal_sigma_hours > 0 or not math.isfinite(temporal_sigma_hours):
            raise ValueError(f"temporal_sigma_hours must be > 0, got {temporal_sigma_hours!r}")
        if int(temporal_neighbors) != temporal_neighbors or temporal_neighbors < 0:
            raise ValueError(f"temporal_neighbors must be an int >= 0, got {temporal_neighbors!r}")
        self.temporal_sigma_hours = float(temporal_sigma_hours)
        self.temporal_neighbors = int(temporal_neighbors)
        self._sigma_s = self.temporal_sigma_hours * 3600.0
        self._lock = threading.Lock()  # guards _banks
        self._banks: dict[str, BankState] = {}

    # ---------------------------------------------------------------- mutations

    def add_nodes(self, bank_id: str, nodes: Sequence[GraphNode]) -> None:
        """Add or replace unit nodes (creating the bank if needed). A node whose id is already in
        the bank replaces it, edges included, so adding the same nodes twice changes nothing.
        The whole batch is validated before anything changes."""
        batch = [normalise(node) for node in nodes]

        def change(bank: BankState) -> None:
            names = bank.names
            for node in batch:
                bank.units[node.id] = names.intern(node)

        self._mutate(bank_id, change)

    def remove_nodes(self, bank_id: str, ids: Sequence[str]) -> None:
        """Delete unit nodes and their edges; entities left without units disappear with them.
        Links other units declare towards a removed id become pending again. Unknown ids and
        banks are ignored."""
        if isinstance(ids, str):
            raise TypeError("remove_nodes takes a sequence of ids, not one id string")
        bank = self._banks.get(bank_id)
        if bank is None:
            return
        with bank.lock:
            removed = [bank.units.pop(uid) for uid in ids if uid in bank.units]
            if removed:
                bank.version += 1
                self._maybe_compact(bank)

    def rebuild(self, bank_id: str, nodes: Iterable[GraphNode]) -> None:
        """Replace the bank's graph with one derived from ``nodes`` alone (for example streamed
        from the store of record). The nodes are read and
        validated before the current graph is touched; readers see the old graph until then."""
        self._replace(bank_id, intern_all(normalise(node) for node in nodes))

    def drop_bank(self, bank_id: str) -> None:
        """Forget the bank. A write racing with it starts a fresh bank (see _mutate)."""
        with self._lock:
            bank = self._banks.pop(bank_id, None)
        if bank is None:
            return
        with bank.lock:
            bank.dropped = True
            bank.units = {}
            bank.names = Names()
            bank.view = None

    def evict(self, bank_id: str) -> None:
        """Forget the bank's in-memory graph (a batch worker that retains thousands of banks
        keeps only the one in hand); its owner rebuilds it from the store when needed."""
        with self._lock:
            self._banks.pop(bank_id, None)

    # ---------------------------------------------------------------- reads

    def has_bank(self, bank_id: str) -> bool:
        """True once the bank was created by add_nodes, or rebuild, until drop_bank."""
        return bank_id in self._banks

    def unit_ids(self, bank_id: str) -> list[str]:
        """The ids of the units in the bank's graph ([] for a bank not held)."""
        bank = self._banks.get(bank_id)
        if bank is None:
            return []
        with bank.lock:
            return list(bank.units)

    def linking_to(self, bank_id: str, ids: Sequence[str]) -> set[str]:
        """Ids of the bank's units that declare a link (of any type or weight, edge or not) to
        one of ``ids``: the units whose stored links a deletion of ``ids`` prunes, which a
        process applying that deletion must read again. Empty for a bank not held."""
        if isinstance(ids, str):
            raise TypeError("linking_to takes a sequence of ids, not one id string")
        bank = self._banks.get(bank_id)
        targets = set(ids)
        if bank is None or not targets:
            return set()
        with bank.lock:
            names, units = bank.names, list(bank.units.items())
        slots = {names.unit_slot[i] for i in targets if i in names.unit_slot}
        return {
            uid
            for uid, rec in units
            if (slots and not slots.isdisjoint(rec.link_targets))
            or (rec.other_targets and not targets.isdisjoint(rec.other_targets))
        }

    def banks(self) -> list[str]:
        """The ids of the banks held in memory, sorted."""
        with self._lock:
            return sorted(self._banks)

    def spread(
        self,
        bank_id: str,
        seeds: dict[str, float],
        *,
        hops: int,
        decay: float,
        limit: int,
    ) -> list[tuple[str, float]]:
        """Spreading activation from ``seeds`` (unit id -> activation) over all edge types.

        a_0 = seeds; a_{t+1} = decay * a_t @ P with P the weighted adjacency normalised by rows
        (every vertex passes on at most its own activation, hubs dilute); the score of a vertex
        is a_1 + ... + a_hops. Returns unit vertices only (never entities), without the seeds,
        best first (ties in time order), at most ``limit``, as ``[(unit_id, activation)]``.
        Unknown seed ids are ignored, non-positive or non-finite activations spread nothing;
        an unknown bank gives ``[]``.

        Cost (2 hops, 10 seeds, bank with a hub entity linked to every unit, 2 other entities,
        3 semantic links and 4 temporal neighbours per unit; median of 300, 2-core CPU):
        10k units 0.17 ms, 100k units 1.0 ms (4 hops: 0.6 ms, 6 ms). The first spread after a
        mutation also pays the lazy matrix build (20 ms at 10k units, 0.3 s at 100k).

        Hop 2 starts from the vertices hop 1 touched only (their rows, never the matrix), but
        through a hub it reaches a large share of the bank: the engine benchmark's graph at 1M
        units (benchmarks/spread_hops.py's, 60 spreads of 10 seeds) reaches ~490k units from
        ~60 vertices, 507k entries. What it costs past that gather is kept off every vertex
        where the bits allow (the active rows multiplied in C, no zeroed total, the cut first
        over a sample): 11.0-15.8 ms p50 before, 5.4-6.0 after, the same lists (27 Nov 2026,
        2-core machine shared with a CI run).
        """
        bank = self._banks.get(bank_id)
        if bank is None or hops < 1 or limit < 1 or not decay > 0 or not seeds:
            return []
        return spread(self._view(bank), seeds, hops=hops, decay=decay, limit=limit)

    def stats(self, bank_id: str) -> dict[str, int]:
        """Counts: units, entities, edges (all types) and edges per type (entity, temporal,
        semantic, causal). Zeros for an unknown bank. Temporal edges whose weight underflows to
        0 (dt > ~700 sigma) still count: the neighbour relation exists, it just carries nothing."""
        bank = self._banks.get(bank_id)
        if bank is None:
            return {"units": 0, "entities": 0, "edges": 0, **{t: 0 for t in EDGE_TYPES}}
        view = self._view(bank)
        per_type = {t: int(view.blocks[i][0].size) for i, t in enumerate(EDGE_TYPES)}
        return {
            "units": view.n_units,
            "entities": int(view.ent_slots.size),
            "edges": sum(per_type.values()),
            **per_type,
        }

    def entity_degrees(self, bank_id: str, entity_ids: Sequence[str]) -> dict[str, int]:
        """How many units of the bank mention each entity (0 when none or unknown bank): the
        entity's mention count, derived from the units like the rest of the graph."""
        bank = self._banks.get(bank_id)
        counts = dict.fromkeys(entity_ids, 0)
        if bank is None:
            return counts
        with bank.lock:
            names, units = bank.names, list(bank.units.values())
        wanted = {names.ent_slot[e]: e for e in entity_ids if e in names.ent_slot}
        for unit in units:
            for slot in unit.entities:
                eid = wanted.get(slot)
                if eid is not None:
                    counts[eid] += 1
        return counts

    def edges(self, bank_id: str, edge_type: str | None = None) -> list[tuple[str, str, str, float]]:
        """The bank's edges as ``(a, b, type, weight)``: for entity edges a is the unit id and b
        the entity id; otherwise a is the earlier unit in (timestamp, id) order. For inspection
        and tests (it builds Python tuples for every edge). Unknown bank: ``[]``."""
        if edge_type is not None and edge_type not in EDGE_TYPES:
            raise ValueError(f"edge_type must be one of {EDGE_TYPES}, got {edge_type!r}")
        bank = self._banks.get(bank_id)
        if bank is None:
            return []
        view = self._view(bank)
        names = view.vertex_names()
        out: list[tuple[str, str, str, float]] = []
        for t, (a, b, w) in zip(EDGE_TYPES, view.blocks):
            if edge_type is None or edge_type == t:
                out.extend((names[i], names[j], t, x) for i, j, x in zip(a.tolist(), b.tolist(), w.tolist()))
        return out

    def to_igraph(self, bank_id: str) -> igraph.Graph:
        """The bank's graph as a new undirected ``igraph.Graph`` (vertex attributes ``name`` and
        ``kind`` = unit | entity; edge attributes ``type`` and ``weight``), for analyses.
        Raises KeyError for an unknown bank."""
        import igraph

        bank = self._banks.get(bank_id)
        if bank is None:
            raise KeyError(f"no graph for bank {bank_id!r}")
        view = self._view(bank)
        a = np.concatenate([blk[0] for blk in view.blocks])
        b = np.concatenate([blk[1] for blk in view.blocks])
        g = igraph.Graph(n=view.adj.shape[0], edges=np.column_stack([a, b]).tolist())
        g.vs["name"] = view.vertex_names()
        g.vs["kind"] = ["unit"] * view.n_units + ["entity"] * int(view.ent_slots.size)
        g.es["type"] = list(
            chain.from_iterable(repeat(t, blk[0].size) for t, blk in zip(EDGE_TYPES, view.blocks))
        )
        g.es["weight"] = np.concatenate([blk[2] for blk in view.blocks]).tolist()
        return g

    # ---------------------------------------------------------------- internals

    def _mutate(self, bank_id: str, change) -> None:
        check_bank_id(bank_id)
        while True:
            with self._lock:
                bank = self._banks.get(bank_id)
                if bank is None:
                    bank = self._banks[bank_id] = BankState()
            with bank.lock:
                if bank.dropped:  # lost a race with drop_bank: retry on a fresh bank
                    continue
                change(bank)
                bank.version += 1
                return

    def _replace(self, bank_id: str, built: tuple[Names, dict[str, UnitRecord]]) -> None:
        names, units = built

        def change(bank: BankState) -> None:
            bank.names, bank.units = names, units
            bank.compact_at = compact_threshold(names)

        self._mutate(bank_id, change)

    @staticmethod
    def _maybe_compact(bank: BankState) -> None:
        """Re-intern the bank when most unit slots are dead (caller holds bank.lock). New objects
        throughout, so builds and views holding the old ones stay valid. Removing 60k of 100k
        units measured 0.7 s, compaction included; it is amortised over as many removals."""
        n_slots = len(bank.names.unit_names)
        if n_slots <= 2 * len(bank.units) + 1024 or n_slots <= bank.compact_at:
            return
        names = bank.names
        bank.names, bank.units = intern_all([names.node(u) for u in bank.units.values()])
        bank.compact_at = compact_threshold(bank.names)

    def _view(self, bank: BankState) -> View:
        """The built view of the bank's current version, building it if needed. The build runs
        outside the bank lock (on a shallow copy of the records), so add_nodes is not blocked by
        it; the build lock stops concurrent readers from building the same version twice."""
        view = bank.view
        if view is not None and view.version == bank.version:
            return view
        with bank.build_lock:
            with bank.lock:
                view = bank.view
                if view is not None and view.version == bank.version:
                    return view
                units = dict(bank.units)  # records are immutable: a shallow copy suffices
                names = bank.names
                n_unit_slots, n_ent_slots = len(names.unit_names), len(names.ent_names)
                version = bank.version
            view = build_view(
                units,
                names,
                n_unit_slots,
                n_ent_slots,
                version,
                self._sigma_s,
                self.temporal_neighbors,
            )
            with bank.lock:
                if not bank.dropped and (bank.view is None or bank.view.version < version):
                    bank.view = view
            return view
