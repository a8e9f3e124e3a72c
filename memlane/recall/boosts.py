"""Multiplicative boosts applied after reranking: recency, temporal proximity, proof count.

Each boost is centred: factor = 1 + alpha * (signal - 0.5), with the signal in [0, 1], so a
neutral signal leaves the score as it is and alpha bounds the swing to +-alpha/2.
"""

from __future__ import annotations

import math


def factor(alpha: float, signal: float) -> float:
    return 1.0 + alpha * (min(1.0, max(0.0, signal)) - 0.5)


def recency(mentioned_at: float | None, reference: float, half_life_days: float) -> float:
    """0.5 ** (age / half-life); a memory from the future of the reference counts as age 0."""
    if mentioned_at is None:
        return 0.5
    age_days = max(0.0, reference - mentioned_at) / 86400.0
    return 0.5 ** (age_days / half_life_days)


def proof(proof_count: int | None, max_proof: int) -> float:
    """log-scaled support relative to the best-supported candidate."""
    if max_proof <= 1:
        return 0.5
    return math.log1p(max(0, proof_count or 0)) / math.log1p(max_proof)
