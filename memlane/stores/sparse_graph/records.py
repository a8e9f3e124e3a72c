"""The graph's records: validated nodes, id interning, the built view and the per-bank state."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import scipy.sparse as sp

from memlane.interfaces import GraphNode
from memlane.records import CAUSAL_LINK_TYPES, LinkType

EDGE_TYPES: tuple[str, ...] = ("entity", "temporal", "semantic", "causal")
ENTITY, TEMPORAL, SEMANTIC, CAUSAL = range(4)

# Spreading uses a row-gather over the active vertices while the rows they touch hold less than
# this fraction of the matrix's entries, and a full CSR mat-vec beyond. Measured at 100k units
# (1.6M stored entries): a full mat-vec costs 1.8 ms, while hop 1 from 10 seeds touches ~100
# entries and hop 2, through a hub entity of all units, ~100k (gather 0.4 ms).
GATHER_MAX_FRACTION = 0.3
# A gathered hop touching fewer than 1/SPARSE_HOP_FACTOR of the vertices keeps its activation
# sparse (a sort of the few entries it touches instead of passes over every vertex): at 1M
# units a 2-hop spread from 10 seeds took 9.7-10.0 ms p50 against 17.4-18.1
# (benchmarks/spread_hops.py).
# No measurement of the best factor yet: there hop 1 touches ~100 entries and hop 2 the
# ~7,500 memories of each of ~20 entities, either side of 16 by far.
SPARSE_HOP_FACTOR = 16


@dataclass(frozen=True, slots=True)
class Node:
    """A validated, normalised GraphNode, still with string ids."""

    id: str
    ts: float
    entities: tuple[str, ...]  # unique, sorted
    link_targets: tuple[str, ...]  # unique per (target, family), sorted
    link_families: tuple[int, ...]  # SEMANTIC | CAUSAL
    link_weights: tuple[float, ...]  # > 0
    # Targets of declared links the graph ignores (entity or temporal type, zero weight): no
    # edge, but the store prunes them when the target is deleted, so linking_to must see them.
    other_targets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UnitRecord:
    """What the graph keeps of a unit, with ids interned to int slots. Immutable, so a shallow copy
    of a bank's records is a consistent snapshot of it."""

    slot: int
    ts: float
    entities: tuple[int, ...]  # entity slots
    link_targets: tuple[int, ...]  # unit slots (the target may be absent: a pending link)
    link_families: tuple[int, ...]
    link_weights: tuple[float, ...]
    other_targets: tuple[str, ...] = ()  # see Node: usually empty, so kept as strings


class Names:
    """Interning tables: string id <-> dense int slot, for unit ids (link targets included) and
    entity ids. Why: resolving 300k link targets by string through a 100k-entry dict at every
    matrix build took 165 ms at 100k units (random memory access); resolving them once, when a
    unit is added, leaves the build a numpy gather. Append-only: compaction replaces the whole
    object, so a build or a view holding an old one stays consistent."""

    __slots__ = ("unit_slot", "unit_names", "ent_slot", "ent_names")

    def __init__(self) -> None:
        self.unit_slot: dict[str, int] = {}
        self.unit_names: list[str] = []
        self.ent_slot: dict[str, int] = {}
        self.ent_names: list[str] = []

    def unit(self, uid: str) -> int:
        slot = self.unit_slot.get(uid)
        if slot is None:
            slot = self.unit_slot[uid] = len(self.unit_names)
            self.unit_names.append(uid)
        return slot

    def entity(self, eid: str) -> int:
        slot = self.ent_slot.get(eid)
        if slot is None:
            slot = self.ent_slot[eid] = len(self.ent_names)
            self.ent_names.append(eid)
        return slot

    def intern(self, node: Node) -> UnitRecord:
        return UnitRecord(
            self.unit(node.id),
            node.ts,
            tuple(map(self.entity, node.entities)),
            tuple(map(self.unit, node.link_targets)),
            node.link_families,
            node.link_weights,
            node.other_targets,
        )

    def node(self, unit: UnitRecord) -> Node:
        ents, units = self.ent_names, self.unit_names
        return Node(
            units[unit.slot],
            unit.ts,
            tuple(ents[s] for s in unit.entities),
            tuple(units[s] for s in unit.link_targets),
            unit.link_families,
            unit.link_weights,
            unit.other_targets,
        )


def intern_all(nodes: Iterable[Node]) -> tuple[Names, dict[str, UnitRecord]]:
    names = Names()
    units: dict[str, UnitRecord] = {}
    for node in nodes:
        units[node.id] = names.intern(node)  # the last of duplicate ids wins, as with add_nodes
    return names, units


@dataclass(frozen=True, slots=True, eq=False)
class View:
    """An immutable, fully built graph of one bank version: what spread and stats read.
    Vertices 0..n_units-1 are units in (timestamp, id) order, then entities in id order."""

    version: int
    names: Names
    unit_slots: np.ndarray  # vertex -> unit slot
    ent_slots: np.ndarray  # vertex - n_units -> entity slot
    vertex_of_unit_slot: np.ndarray  # unit slot -> vertex, -1 when not a unit of this version
    adj: sp.csr_matrix  # symmetric weighted adjacency over all vertices
    inv_deg: np.ndarray  # 1 / weighted degree (0 for isolated vertices)
    blocks: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]  # per EDGE_TYPES: (a, b, w)

    @property
    def n_units(self) -> int:
        return int(self.unit_slots.size)

    def vertex(self, uid: str) -> int:
        """The vertex of a unit id, or -1."""
        slot = self.names.unit_slot.get(uid)
        if slot is None or slot >= self.vertex_of_unit_slot.size:
            return -1  # unknown, or added after this view was built
        return int(self.vertex_of_unit_slot[slot])

    def vertex_names(self) -> list[str]:
        units, ents = self.names.unit_names, self.names.ent_names
        return [units[s] for s in self.unit_slots.tolist()] + [ents[s] for s in self.ent_slots.tolist()]


class BankState:
    __slots__ = (
        "lock",
        "build_lock",
        "units",
        "names",
        "compact_at",
        "version",
        "view",
        "dropped",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()  # guards every other field
        self.build_lock = threading.Lock()  # one matrix build at a time per bank
        self.units: dict[str, UnitRecord] = {}
        self.names = Names()
        self.compact_at = compact_threshold(self.names)
        self.version = 0
        self.view: View | None = None
        self.dropped = False


def compact_threshold(names: Names) -> int:
    # Removed units keep their slots (and so do entities they alone mentioned); remove_nodes
    # re-interns the bank once more than half of the unit slots are dead, and never before the
    # tables doubled since the last compaction, so a bank whose links mostly point at units it
    # does not hold (pending targets also take slots) is not re-interned on every removal.
    return 2 * len(names.unit_names) + 1024


def normalise(node: GraphNode) -> Node:
    uid = node.id
    if not isinstance(uid, str) or not uid:
        raise ValueError(f"graph node id must be a non-empty string, got {uid!r}")
    ts = float(node.timestamp)
    if not math.isfinite(ts):
        raise ValueError(f"graph node {uid!r}: timestamp must be finite, got {node.timestamp!r}")
    entities = tuple(sorted({e for e in node.entity_ids if e}))
    best: dict[tuple[str, int], float] = {}
    declared: set[str] = set()
    for link in node.links:
        kind = LinkType(link.type)
        if link.target_id:
            declared.add(link.target_id)
        if kind is LinkType.semantic:
            family = SEMANTIC
        elif kind in CAUSAL_LINK_TYPES:
            family = CAUSAL
        else:
            continue  # entity and temporal links are derived by the graph itself
        weight = float(link.weight)
        if not weight > 0 or link.target_id == uid or not link.target_id:
            continue  # a zero link passes no activation; self-loops would only feed the seed back
        key = (link.target_id, family)
        if weight > best.get(key, 0.0):
            best[key] = weight
    keys = sorted(best)
    return Node(
        uid,
        ts,
        entities,
        tuple(k[0] for k in keys),
        tuple(k[1] for k in keys),
        tuple(best[k] for k in keys),
        tuple(sorted(declared - {k[0] for k in keys})),
    )
