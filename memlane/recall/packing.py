"""Greedy packing to a token budget: take items best first, skip any that no longer fits."""

from __future__ import annotations

from typing import Sequence


def pack(token_counts: Sequence[int], budget: int) -> list[int]:
    """Indices of the items kept, in order. An item larger than what is left is skipped, and
    smaller ones after it may still fit."""
    kept, used = [], 0
    for i, n in enumerate(token_counts):
        if used + n <= budget:
            kept.append(i)
            used += n
    return kept
