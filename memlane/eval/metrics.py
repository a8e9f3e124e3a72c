"""Retrieval metrics for memory evaluation: turn- and session-level recall@k, means and
Wilson score intervals.

Recall works on *turn ids*: a recalled memory names the source turns it came from, the
memories' turn lists are flattened into one ranking (:func:`ranked_turns`), and the ranking is
compared with a question's evidence turns.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence


def session_of(turn_id: str) -> str:
    """The session part of a turn id: everything before its last ``':'``.

    ``"D3:4"`` -> ``"D3"`` (LoCoMo), ``"session_2:5"`` -> ``"session_2"`` (the JSONL loader's
    default ids). Raises ValueError for an id without a session part."""
    if not isinstance(turn_id, str):
        raise ValueError(f"turn id must be a string, got {turn_id!r}")
    session, sep, rest = turn_id.rpartition(":")
    if not sep or not session or not rest:
        raise ValueError(f"turn id {turn_id!r} has no '<session>:<turn>' form")
    return session


def ranked_turns(source_turns_per_memory: Iterable[Iterable[str]]) -> list[str]:
    """Flatten the source turns of ranked memories into one turn ranking.

    Memories are taken best first and each memory's turns in order; a turn keeps the position of
    its first occurrence, later repeats are dropped."""
    return list(dict.fromkeys(t for turns in source_turns_per_memory for t in turns))


def _distinct(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Fraction of the relevant items found among the first ``k`` *distinct* ranked items.

    Repeats in ``ranked`` do not use up any of the k places; a ``k`` larger than the ranking
    just takes all of it. Raises ValueError when ``relevant`` is empty or ``k < 1``."""
    rel = set(relevant)
    if not rel:
        raise ValueError("recall is undefined for an empty relevant set")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    top = _distinct(ranked)[:k]
    return len(rel.intersection(top)) / len(rel)


def session_recall_at_k(
    ranked_turns: Sequence[str],
    relevant_turns: Iterable[str],
    k: int,
    *,
    session_key: Callable[[str], str] = session_of,
) -> float:
    """Recall@k at session level: the fraction of the sessions holding relevant turns that are
    among the first ``k`` distinct sessions of the ranking.

    A session is ranked at the position of its first turn in ``ranked_turns``; ``session_key``
    maps a turn id to its session (default :func:`session_of`). Raises ValueError when
    ``relevant_turns`` is empty or ``k < 1``."""
    relevant_sessions = {session_key(t) for t in relevant_turns}
    ranked_sessions = [session_key(t) for t in ranked_turns]
    return recall_at_k(ranked_sessions, relevant_sessions, k)


def mean(xs: Iterable[float]) -> float:
    """Arithmetic mean. Raises ValueError for no values (an average of nothing is a bug in the
    caller, not 0)."""
    total, n = 0.0, 0
    for x in xs:
        total += x
        n += 1
    if n == 0:
        raise ValueError("mean of no values")
    return total / n


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a proportion of ``successes`` out of ``n`` trials.

    ``z`` = 1.96 gives 95 %. With ``n == 0`` there is no information and the interval is
    (0.0, 1.0). Raises ValueError for ``n < 0``, ``z < 0`` or ``successes`` outside [0, n]."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if z < 0:
        raise ValueError(f"z must be >= 0, got {z}")
    if not 0 <= successes <= max(n, 0):
        raise ValueError(f"successes must be within [0, {n}], got {successes}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))
