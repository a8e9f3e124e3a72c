"""What recall's stages pass along: one :class:`RecallState` per call, and per ranked memory
one :class:`Scores` that names the scale of each score it has.

A stage that orders, gates or packs by a score says which one (:data:`ScoreName`) and reads
that, never "whatever the memory's score holds now": the cross-encoder's scores (0-1
probabilities) and the fused order's (the RRF-rank fallback, 0.1-1.0, times the boosts) are
on different scales, and a gate tuned on one cuts the other at the wrong place (issue 37:
the tree's unit floor, tuned on the fused scores, deleted reranked evidence scoring 0.3 under a
best of 0.9 and moved unread fused ranks 21-55 up in its place).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np

from memlane.interfaces import Embedder, Hit, SearchBackend, UnitFilter
from memlane.query.analysis import QueryAnalysis
from memlane.recall.candidates import Candidate
from memlane.records import RecalledMemory, RecalledNode, RecallRequest

# The scales a ranked memory's scores are on (see :class:`Scores`).
ScoreName = Literal["fused", "cross", "final"]


@dataclass(frozen=True, slots=True)
class Scores:
    """A ranked memory's scores, one per scale.

    * ``fused``: its score in the fused order, the RRF-rank fallback over the fetched
      candidates (1.0 for the best, falling linearly to 0.1) times the boosts. What the tree's
      unit gate and abstention were tuned on.
    * ``cross``: the cross-encoder's probability that it answers the query (0-1); None when
      the cross-encoder did not read it.
    * ``final``: the score its place came from: for a memory the cross-encoder read, the
      joined score (``w * cross + (1 - w) * fallback``) times the boosts; for one it did not,
      its fused score scaled under the last memory it did, so scores fall down the list.
    """

    fused: float
    cross: float | None
    final: float

    def get(self, name: ScoreName) -> float | None:
        """The score named ``name``."""
        return {"fused": self.fused, "cross": self.cross, "final": self.final}[name]


@dataclass(slots=True)
class RecallState:
    """One recall call as it moves through the stages. The request's own fields come first;
    each later field is written by the stage that declares it (``Stage.writes``)."""

    bank_id: str
    req: RecallRequest
    revision: str
    search: SearchBackend
    embedder: Embedder  # the bank's: it embeds the query (memlane/banks.py BankEmbedders)
    # The query as analysed once, and what follows from it (the "query" stage).
    query: QueryAnalysis | None = None
    reference: datetime | None = None
    history: bool = False
    flt: UnitFilter | None = None
    channels: set[str] = field(default_factory=set)
    missing: list[str] = field(default_factory=list)  # channels the backend cannot serve
    interval: tuple[datetime, datetime] | None = None
    # The channels' lists, best first ("channels"; "subqueries" adds theirs).
    vector: np.ndarray | None = None
    hits: dict[str, list[Hit]] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    subqueries: list[str] = field(default_factory=list)
    # Fusion ("fuse"): (id, RRF score), best first.
    fused: list[tuple[str, float]] = field(default_factory=list)
    # The stored fields of the candidates read ("fetch"), the fetched candidates in fused
    # order (after the filter) and the cross-encoder's pool.
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    candidates: list[str] = field(default_factory=list)
    pool: list[str] = field(default_factory=list)
    # The fused order with the boosts ("order"): the answer without a cross-encoder, and what
    # abstention reads.
    fused_order: list[Candidate] = field(default_factory=list)
    # The ranking ("rerank"): every candidate, best first, with its scores.
    ranking: list[Candidate] = field(default_factory=list)
    scores: dict[str, Scores] = field(default_factory=dict)
    cross: dict[str, float] = field(default_factory=dict)
    earlier: set[str] = field(default_factory=set)
    # The learned ranker ("learn"): its raw score per candidate, and the memories an ordering
    # rule put above a better-scored one (their score was lowered to follow the order).
    learned: dict[str, float] = field(default_factory=dict)
    moved: set[str] = field(default_factory=set)
    # The memories packed to the token budget ("pack"), and the tree's nodes and plan ("tree").
    memories: list[RecalledMemory] = field(default_factory=list)
    nodes: list[RecalledNode] = field(default_factory=list)
    plan: dict | None = None
    timings: dict[str, float] = field(default_factory=dict)
