"""Reciprocal rank fusion (Cormack et al.): score(d) = sum over channels of 1 / (k + rank)."""

from __future__ import annotations

from typing import Mapping, Sequence


def rrf(rankings: Mapping[str, Sequence[str]], k: int = 60) -> list[tuple[str, float]]:
    """Fuse ranked id lists (best first, ranks from 1). Ties break by id for determinism."""
    scores: dict[str, float] = {}
    for ids in rankings.values():
        for rank, doc in enumerate(ids, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
