"""Semantic links between units, stored on the newer unit (the graph treats links as undirected).

A unit links to at most ``top_k`` units mentioned no later than itself with cosine >= theta.
Restricting targets to earlier-or-same-time units keeps the links of a unit independent of what
was retained after it, so re-retaining a file reproduces the same links (idempotent counts).
Entity and temporal links are not stored: the graph derives them from entity ids and times.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memlane.interfaces import Hit
from memlane.records import Link, LinkType


def similarity(cosine: float) -> float:
    """A cosine as links rank and keep it: to 6 decimals. A batch's matrix product and an
    index's search compute the same cosine to ~1e-7 apart, and a text said twice must tie
    (then the id decides) whichever computed it."""
    return round(float(cosine), 6)


def semantic_links(
    ids: Sequence[str],
    vectors: np.ndarray,
    times: Sequence[float],
    store_hits: Sequence[Sequence[Hit]] | None,
    *,
    threshold: float,
    top_k: int,
) -> list[list[Link]]:
    """Links for each new unit from in-batch similarities and the store's nearest neighbours.

    ``times`` are mention times in epoch seconds; store hits must carry ``mentioned_at``.
    """
    n = len(ids)
    if n == 0 or top_k == 0:
        return [[] for _ in range(n)]
    batch_ids = set(ids)
    sims = vectors @ vectors.T
    out: list[list[Link]] = []
    for i in range(n):
        cands: dict[str, float] = {}
        for j in np.nonzero(sims[i] >= threshold)[0].tolist():
            if j != i and times[j] <= times[i] and ids[j] != ids[i]:
                cands[ids[j]] = max(cands.get(ids[j], -1.0), similarity(sims[i, j]))
        for hit in store_hits[i] if store_hits else ():
            at = hit.fields.get("mentioned_at")
            if hit.score >= threshold and hit.id not in batch_ids and at is not None and at <= times[i]:
                cands[hit.id] = max(cands.get(hit.id, -1.0), similarity(hit.score))
        best = sorted(cands.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
        out.append([Link(target_id=t, type=LinkType.semantic, weight=min(1.0, max(0.0, w))) for t, w in best])
    return out
