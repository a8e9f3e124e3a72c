"""Fusing the channels' rankings into one.

* ``rrf``, reciprocal rank fusion (Cormack et al.): score(d) = sum over channels of
  w_c / (k + rank). The default.
* ``rsf``, relative score fusion: each channel's scores min-max normalised over its own hits,
  then summed with the weights w_c.
* ``conf_rrf``: RRF whose weight per channel and query is w_c times the channel's confidence,
  how far its best score stands above the rest (:func:`confidence`).

The channels are not equally good, so RRF weights them (lexical 1, semantic 0.6, graph 0.2,
temporal 0.5: memlane/settings/areas.py says what measured them). On LoCoMo (turn recall@10,
categories 1-4) BM25 alone scored 0.678 and MiniLM dense 0.445; equal-weight RRF gave 0.579,
the weighted one (semantic 0.2 then) 0.720. The score-based and
confidence-weighted fusions were measured beside it on LoCoMo and LongMemEval and did not
hold up on both (docs/results.md).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from memlane.interfaces import Hit


def rrf(
    rankings: Mapping[str, Sequence[str]], k: int = 60, weights: Mapping[str, float] | None = None
) -> list[tuple[str, float]]:
    """Fuse ranked id lists (best first, ranks from 1). Ties break by id for determinism."""
    scores: dict[str, float] = {}
    for channel, ids in rankings.items():
        w = 1.0 if weights is None else weights.get(channel, 1.0)
        for rank, doc in enumerate(ids, start=1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
    return _ranked(scores)


def confidence(scores: Sequence[float], top: int = 50) -> float:
    """How far a channel's best score stands above the rest of its first ``top`` scores, as a
    z-score (>= 0); 0 for fewer than 3 scores or flat ones."""
    s = np.asarray(scores[:top], dtype=np.float64)
    if s.size < 3:
        return 0.0
    sd = float(s.std())
    return 0.0 if sd <= 1e-12 else max(0.0, float((s[0] - s.mean()) / sd))


def rsf(hits: Mapping[str, Sequence[Hit]], weights: Mapping[str, float]) -> list[tuple[str, float]]:
    """Relative score fusion: min-max normalised scores per channel, weighted and summed; a
    channel whose hits all score alike gives each of them its full weight."""
    scores: dict[str, float] = {}
    for channel, hs in hits.items():
        if not hs:
            continue
        s = np.asarray([h.score for h in hs], dtype=np.float64)
        lo, hi = float(s.min()), float(s.max())
        norm = (s - lo) / (hi - lo) if hi > lo else np.ones_like(s)
        w = weights.get(channel, 1.0)
        for h, v in zip(hs, norm):
            scores[h.id] = scores.get(h.id, 0.0) + w * float(v)
    return _ranked(scores)


def fuse(
    hits: Mapping[str, Sequence[Hit]], method: str, k: int, weights: Mapping[str, float]
) -> list[tuple[str, float]]:
    """The fused ranking ``[(id, score)]``, best first, of the channels' hits (each best first)."""
    if method == "rrf":
        return rrf({c: [h.id for h in hs] for c, hs in hits.items()}, k, weights)
    if method == "conf_rrf":
        w = {c: weights.get(c, 1.0) * confidence([h.score for h in hs]) for c, hs in hits.items()}
        return rrf({c: [h.id for h in hs] for c, hs in hits.items()}, k, w)
    if method == "rsf":
        return rsf(hits, weights)
    raise ValueError(f"unknown fusion {method!r}: expected rrf, rsf or conf_rrf")


def _ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
