"""Reciprocal rank fusion (Cormack et al.): score(d) = sum over channels of w_c / (k + rank).

Channel weights default to 1. Memlane's settings weight them because the channels are not
equally good: on LoCoMo (turn recall@10, categories 1-4, measured offline on the eval banks)
BM25 alone scored 0.689 and MiniLM dense 0.445; equal-weight RRF of the two gave 0.556, below
BM25 alone, while weighting dense at 0.2 gave 0.710.
"""

from __future__ import annotations

from typing import Mapping, Sequence


def rrf(
    rankings: Mapping[str, Sequence[str]], k: int = 60, weights: Mapping[str, float] | None = None
) -> list[tuple[str, float]]:
    """Fuse ranked id lists (best first, ranks from 1). Ties break by id for determinism."""
    scores: dict[str, float] = {}
    for channel, ids in rankings.items():
        w = 1.0 if weights is None else weights.get(channel, 1.0)
        for rank, doc in enumerate(ids, start=1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
