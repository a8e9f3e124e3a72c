"""Retrieval metrics for memory evaluation: turn- and session-level recall@k, means and
Wilson score intervals.

Recall works on *turn ids*: a recalled memory names the source turns it came from, the
memories' turn lists are flattened into one ranking (:func:`ranked_turns`), and the ranking is
compared with a question's evidence turns.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

# LongMemEval's abstention rule lives with its reader; re-exported for the metrics' callers.
from memlane.ingest.longmemeval import is_abstention  # noqa: F401


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


# ------------------------------------------------------------------------------------------
# LongMemEval's retrieval metrics, as its evaluation code computes them
# (xiaowu0162/LongMemEval, src/retrieval/eval_utils.py; re-implemented, not copied).
#
# Rankings here are lists of ids, best first (the official code ranks corpus indices; an id
# list is the same thing once each corpus id is looked up). Three details of the official code
# are kept on purpose, because the point is numbers comparable with published ones:
#
# * No relevant documents: recall_any = 0, recall_all = 1 (``all`` of nothing is true) and
#   ndcg = 0 (the ideal DCG is 0). The official averages leave abstention questions (ids ending
#   in ``_abs``) out, which is where empty gold sets come from.
# * Its DCG does not discount the first *two* ranks: relevance[0] + sum over positions i >= 1
#   (0-based) of relevance[i] / log2(i + 1). That is log2(rank) for rank >= 2, not the textbook
#   log2(rank + 1); we follow the code.
# * The ideal DCG is taken over the whole corpus' relevance labels, so a relevant document the
#   system never returned still counts in the denominator.

OFFICIAL_KS = (1, 3, 5, 10, 30, 50)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")


def recall_any_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """1.0 when any relevant id is among the first ``k`` ranked ids, else 0.0 (also 0.0 when
    nothing is relevant)."""
    _check_k(k)
    top = set(ranked[:k])
    return float(any(r in top for r in set(relevant)))


def recall_all_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """1.0 when every relevant id is among the first ``k`` ranked ids, else 0.0 (1.0 when
    nothing is relevant, as in the official code)."""
    _check_k(k)
    top = set(ranked[:k])
    return float(all(r in top for r in set(relevant)))


def dcg(relevances: Sequence[float], k: int) -> float:
    """LongMemEval's DCG@k: ``rel[0] + sum(rel[i] / log2(i + 1) for i in 1..k-1)`` (0-based
    i), so ranks 1 and 2 both weigh 1, rank 3 weighs 1/log2(3), and so on."""
    _check_k(k)
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return float(rel[0]) + sum(float(r) / math.log2(i + 1) for i, r in enumerate(rel) if i >= 1)


def ndcg_any_at_k(ranked: Sequence[str], relevant: Iterable[str], corpus: Sequence[str], k: int) -> float:
    """LongMemEval's ndcg_any@k with binary relevance.

    ``ranked`` is the system's ranking (best first; it may be shorter than the corpus, the
    missing tail counts as not retrieved), ``corpus`` every id the system could have returned,
    one entry per corpus item (repeats allowed: at session level one entry per turn, as in the
    official turn-to-session conversion). The ideal DCG sorts the corpus' labels. 0.0 when no
    corpus item is relevant."""
    rel = set(relevant)
    ideal = dcg(sorted((1.0 if c in rel else 0.0 for c in corpus), reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if r in rel else 0.0 for r in ranked], k) / ideal


def retrieval_scores(
    ranked: Sequence[str], relevant: Iterable[str], corpus: Sequence[str], k: int
) -> dict[str, float]:
    """``{"recall_any@k", "recall_all@k", "ndcg_any@k"}`` for one ranking (the official
    ``evaluate_retrieval``)."""
    rel = list(relevant)
    return {
        f"recall_any@{k}": recall_any_at_k(ranked, rel, k),
        f"recall_all@{k}": recall_all_at_k(ranked, rel, k),
        f"ndcg_any@{k}": ndcg_any_at_k(ranked, rel, corpus, k),
    }


def session_scores_from_turns(
    ranked_turns: Sequence[str],
    relevant_turns: Iterable[str],
    corpus_turns: Sequence[str],
    k: int,
    *,
    session_key: Callable[[str], str] = session_of,
) -> dict[str, float]:
    """Session-level metrics from a *turn* ranking, as the official turn-to-session conversion
    computes them: turn ids map to their sessions; the cut-off grows from ``k`` until the top
    holds ``k`` distinct sessions (when the ranking never holds that many, it ends one past the
    corpus size, as the official loop does); then :func:`retrieval_scores` runs on the session
    list (repeats kept) with the turn-level corpus mapped to sessions."""
    _check_k(k)
    sessions = [session_key(t) for t in ranked_turns]
    gold = {session_key(t) for t in relevant_turns}
    corpus = [session_key(t) for t in corpus_turns]
    effective = k
    while effective <= len(corpus) and len(set(sessions[:effective])) < k:
        effective += 1
    scores = retrieval_scores(sessions, gold, corpus, effective)
    return {f"{name.split('@')[0]}@{k}": v for name, v in scores.items()}
