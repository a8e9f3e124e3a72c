"""Multiplicative boosts applied after reranking: recency, temporal proximity, proof count.

Each boost is centred: factor = 1 + alpha * (signal - 0.5), with the signal in [0, 1], so a
neutral signal leaves the score as it is and alpha bounds the swing to +-alpha/2.
"""

from __future__ import annotations

import math


def factor(alpha: float, signal: float) -> float:
    return 1.0 + alpha * (min(1.0, max(0.0, signal)) - 0.5)


def recency(
    mentioned_at: float | None, reference: float, half_life_days: float, occurred_start: float | None = None
) -> float:
    """0.5 ** (age / half-life). A memory dated after the reference (said after it, or about
    an event that starts after it: "the wedding is on 12 June 2027") is neutral (0.5, a factor
    of 1): clamping its age to 0 gave it the full boost, and an unrelated future event came
    first for a question about the present."""
    if mentioned_at is None or mentioned_at > reference:
        return 0.5
    if occurred_start is not None and occurred_start > reference + 86400.0:
        return 0.5
    age_days = (reference - mentioned_at) / 86400.0
    return 0.5 ** (age_days / half_life_days)


def proof(proof_count: int | None, max_proof: int) -> float:
    """log-scaled support relative to the best-supported candidate."""
    if max_proof <= 1:
        return 0.5
    return math.log1p(max(0, proof_count or 0)) / math.log1p(max_proof)
