"""Hierarchical recall (TiMem): after the channels, fusion, rerank and boosts have ranked the
memory units (L1), climb from the best of them to their ancestors at the levels the plan
selects, gate units and nodes, order them by level and time, and pack to the token budget.

* **Candidates**: the ancestors (session, day, week, profile) of the ``tree.leaves``
  best-ranked units, at the selected levels.
* **Gating** without an LLM: a unit whose fused score (:data:`UNIT_GATE_SCORE`, the scale
  ``tree.unit_floor`` was set on) is under ``tree.unit_floor`` times the best unit's is
  dropped (the long tail flat recall returns because it has candidates left, not because
  they match). The ``tree.leaves`` best units and every unit the cross-encoder read are never
  dropped here: the top is the ranker's (issue 37: a floor applied to the mixed scores after
  the rerank deleted reranked evidence and moved unread fused ranks up in its place; in a
  bank of 15 turns the fused floor alone cut ranks 9 and 10). A node whose
  cosine to the query is under ``tree.min_similarity`` is dropped, and so is a node that
  quotes nothing the units kept have not already said (redundancy).
* **Order** (TiMem's: by level, then by distance in time to the query): the units first, in
  their relevance order, then sessions, days, weeks and the profile, each level by distance in
  time; greedy packing over that order. Putting nodes *before* the units they summarise was
  tried first and cost LoCoMo turn recall@10 a third of its value on the first 311 questions
  (0.837 -> 0.504 on single-hop): a profile quoting eight turns took the top places of every
  question.

The bank's tree is read whole (a few nodes per session) and cached per bank revision.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from memlane.interfaces import Embedder, VectorStore
from memlane.query.analysis import QueryAnalysis
from memlane.recall.packing import pack
from memlane.recall.state import ScoreName, Scores
from memlane.records import Level, RecalledMemory, RecalledNode, RecallRequest, TreeNode
from memlane.tree.planner import Plan, plan_llm, plan_rules

CACHE_BANKS = 64  # banks whose tree one process keeps when no budget is given (tests, tools)
# A cached node's estimated bytes: its vector row, its text, ~100 bytes per id it lists and
# ~1 KB of object. tracemalloc over 2,000 synthetic session nodes (622 characters, 66 ids each,
# Nov 2026): 9.4 KB per node held (index and node); this estimate gives 9.8 KB.
NODE_BYTES, ID_BYTES = 1024, 100
# The scale the unit gate reads (memlane/recall/state.py): the fused order's, which
# tree.unit_floor was set on (tree = flat to four decimals on both dev sets, docs/results.md).
UNIT_GATE_SCORE: ScoreName = "fused"


def gated_units(
    ranked: list[RecalledMemory], scores: Mapping[str, Scores], floor: float, keep: int
) -> list[RecalledMemory]:
    """``ranked`` less the units under ``floor`` times the best unit's score on
    :data:`UNIT_GATE_SCORE`. The ``keep`` best and every unit the cross-encoder read stay
    whatever their score: the gate trims the tail, never the ranker's top. Under the learned
    ranker a unit of a low fused score it placed above others is dropped too (the floor was
    set on the fused order; keeping a prefix instead left the tree's nodes nothing to add)."""
    gate = [scores[m.unit.id].get(UNIT_GATE_SCORE) or 0.0 for m in ranked]
    best = max(gate, default=0.0)
    return [
        m
        for i, m in enumerate(ranked)
        if i < keep or scores[m.unit.id].cross is not None or gate[i] >= floor * best
    ]


class StateBudget(Protocol):
    """The process's budget for per-bank state (memlane/derived.py's DerivedState)."""

    def attach(self, held_bytes: Callable[[], int], evict: Callable[[str], None]) -> None: ...

    def note(self, bank_id: str, *, grew: bool = True) -> None: ...


@dataclass(slots=True)
class TreeIndex:
    """One bank's tree in memory: nodes, their vectors (rows of ``vectors``) and parents."""

    nodes: list[TreeNode]
    vectors: np.ndarray
    parent: dict[str, str]  # child id (unit or node) -> parent node id
    row: dict[str, int]
    nbytes: int = 0  # estimated bytes held (NODE_BYTES)

    @classmethod
    def of(cls, nodes: list[TreeNode], dim: int) -> TreeIndex:
        vectors = np.zeros((len(nodes), dim), dtype=np.float32)
        for i, n in enumerate(nodes):
            if n.embedding is not None:
                vectors[i] = n.embedding
            n.embedding = None  # the matrix holds it; results never carry vectors
        parent = {c: n.id for n in nodes for c in n.children}
        ids = sum(
            len(n.children) + len(n.cited) + len(n.source_turns) + len(n.cited_turns) + len(n.entity_ids)
            for n in nodes
        )
        nbytes = vectors.nbytes + sum(len(n.text) for n in nodes) + NODE_BYTES * len(nodes) + ID_BYTES * ids
        return cls(nodes, vectors, parent, {n.id: i for i, n in enumerate(nodes)}, nbytes)


class TreeRecall:
    """The tree stage of recall (see the module docstring): a
    :class:`memlane.recall.pipeline.TreeStage`, given to the Recaller by its builder."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        settings,
        llm: Callable[[], object | None] = lambda: None,
        budget: StateBudget | None = None,
    ) -> None:
        """``budget``: the process's budget for per-bank state (memlane/derived.py's
        DerivedState: ``attach`` and ``note``), which then counts and evicts the cached trees
        with the banks' other state; without one, the last CACHE_BANKS trees are kept."""
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.llm = llm  # the planner's model (the consolidation role), built on first use
        self._cache: OrderedDict[str, tuple[str, TreeIndex]] = OrderedDict()
        self._lock = threading.Lock()
        self.budget = budget
        if budget is not None:
            budget.attach(self.held_bytes, self.evict)

    def held_bytes(self) -> int:
        """Estimated bytes of the cached trees."""
        with self._lock:
            return sum(index.nbytes for _, index in self._cache.values())

    def evict(self, bank_id: str) -> None:
        """Forget the bank's cached tree (the budget evicted the bank, or it was dropped)."""
        with self._lock:
            self._cache.pop(bank_id, None)

    def index(self, bank_id: str, revision: str) -> TreeIndex:
        """The bank's tree at ``revision`` (read from the store on a miss)."""
        with self._lock:
            hit = self._cache.get(bank_id)
            if hit is not None and hit[0] == revision:
                self._cache.move_to_end(bank_id)
        grew = True
        if hit is not None and hit[0] == revision:
            index, grew = hit[1], False
        else:
            index = TreeIndex.of(self.store.list_tree_nodes(bank_id, with_embedding=True), self.embedder.dim)
            with self._lock:
                self._cache[bank_id] = (revision, index)
                self._cache.move_to_end(bank_id)
                while self.budget is None and len(self._cache) > CACHE_BANKS:
                    self._cache.popitem(last=False)
        if self.budget is not None:  # outside the lock: the budget may evict from this cache
            self.budget.note(bank_id, grew=grew)
        return index

    def plan(
        self, req: RecallRequest, query: QueryAnalysis, interval: tuple[datetime, datetime] | None
    ) -> Plan | None:
        """The plan for ``req`` (None: flat recall, the planner is off); ``query`` is the
        analysis of ``req.query``."""
        who = req.planner or self.settings.tree.planner
        if who == "off":
            return None
        llm = self.llm() if who in ("auto", "llm") else None
        plan = plan_llm(llm, query, interval) if llm is not None else plan_rules(query, interval)
        if req.levels is not None:
            plan.levels = tuple(sorted(set(req.levels)))
            plan.reasons.append("levels given by the request")
        return plan

    def apply(
        self,
        bank_id: str,
        revision: str,
        req: RecallRequest,
        query: QueryAnalysis,
        ranked: list[RecalledMemory],
        scores: Mapping[str, Scores],
        counts: Callable[[Sequence[str]], list[int]],
        query_vector: np.ndarray | Callable[[], np.ndarray],
        interval: tuple[datetime, datetime] | None,
        reference: datetime,
    ) -> tuple[list[RecalledMemory], list[RecalledNode], dict] | None:
        """The units kept, the nodes recalled and the plan's trace; None when the tree stage
        does not run (planner off and no levels asked, or only level 1). ``query`` is the
        analysis of ``req.query``; ``scores`` every ranked unit's scores by id (the gate reads
        :data:`UNIT_GATE_SCORE` there)."""
        if req.levels is None and (req.planner or self.settings.tree.planner) == "off":
            return None
        plan = self.plan(req, query, interval) if (req.planner or "") != "off" else None
        levels = set(req.levels) if req.levels is not None else set(plan.levels if plan else (1,))
        trace: dict[str, Any] = {"plan": plan.as_dict() if plan else None, "levels": sorted(levels)}
        if not levels - {1}:
            trace["nodes"] = 0
            return ranked, [], trace
        index = self.index(bank_id, revision)
        if not index.nodes:
            trace["nodes"] = 0
            trace["note"] = "the bank has no tree yet (memlane consolidate)"
            return ranked, [], trace
        if callable(query_vector):  # the recall searched no dense channel: embedded here
            query_vector = query_vector()
        sims = index.vectors @ np.asarray(query_vector, dtype=np.float32).reshape(-1)

        # Candidates: ancestors of the best units at the selected levels.
        candidates: list[str] = []
        for m in ranked[: self.settings.tree.leaves]:
            nid = index.parent.get(m.unit.id)
            while nid is not None:
                if int(index.nodes[index.row[nid]].level) in levels and nid not in candidates:
                    candidates.append(nid)
                nid = index.parent.get(nid)
        floor = self.settings.tree.min_similarity
        low = [n for n in candidates if sims[index.row[n]] < floor]
        candidates = [n for n in candidates if sims[index.row[n]] >= floor]

        units = gated_units(ranked, scores, self.settings.tree.unit_floor, self.settings.tree.leaves)
        said = {m.unit.text for m in units}
        ref = (
            reference.timestamp()
            if interval is None
            else ((interval[0].timestamp() + interval[1].timestamp()) / 2)
        )
        nodes_in: list[TreeNode] = []
        redundant = 0
        for nid in sorted(
            candidates,
            key=lambda i: (
                int(index.nodes[index.row[i]].level),
                _distance(index.nodes[index.row[i]], ref),
                i,
            ),
        ):
            node = index.nodes[index.row[nid]]
            quoted = [str(t) for t, _ in node.metadata.get("points") or []]
            if quoted and all(q in said for q in quoted):
                redundant += 1
                continue
            nodes_in.append(node)
            said.update(quoted)

        node_tokens = counts([n.text for n in nodes_in])
        tokens = [m.tokens for m in units] + node_tokens
        kept = pack(tokens, req.max_tokens)
        kept_units: list[RecalledMemory] = []
        nodes: list[RecalledNode] = []
        for rank, k in enumerate(kept):
            if k < len(units):
                kept_units.append(units[k])
            else:
                node = nodes_in[k - len(units)]
                nodes.append(
                    RecalledNode(
                        node=node, score=float(sims[index.row[node.id]]), tokens=tokens[k], rank=rank
                    )
                )
        trace.update(
            nodes=len(nodes),
            gated={
                "nodes_below_similarity": len(low),
                "nodes_redundant": redundant,
                "units_below_floor": len(ranked) - len(units),
            },
            by_level={
                Level(lv).name: sum(1 for r in nodes if int(r.node.level) == lv)
                for lv in sorted(levels - {1})
            },
        )
        return kept_units, nodes, trace


def _distance(node: TreeNode, ref: float) -> float:
    s, e = node.start.timestamp(), node.end.timestamp()
    return 0.0 if s <= ref <= e else min(abs(ref - s), abs(ref - e))
