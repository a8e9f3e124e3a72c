"""The cross-encoder stage of recall: which candidates it reads, what text it reads for each,
how its score joins the fused one, and the current value first among memories it judges about
equally good.

* **pool** (:func:`pool`): the fused top N plus each channel's own best, so a memory that only
  one channel finds (a lexical-only hit fusion ranked low) still reaches the cross-encoder.
* **text** (:func:`candidate_text`): "date speaker: text", cut to a bounded length; a short
  reply after the question it answers.
* **join** (:func:`joined`): ``w * cross-encoder + (1 - w) * fallback``, the fallback being the
  RRF-rank score of the pool's fused order (memlane/models/reranker.py's RRFRankReranker).
* **current first** (:func:`newest_among_ties`): a question about the present prefers, among the
  memories the cross-encoder judges to answer (score >= a floor) within a margin of each
  other, the newest; the older ones stay, after it, marked as earlier in the trace.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Mapping, Sequence

from memlane.interfaces import Hit
from memlane.stored_fields import json_value, to_dt


def pool(fused: Sequence[str], hits: Mapping[str, Sequence[Hit]], n: int, per_channel: int) -> list[str]:
    """The fused top ``n`` (``fused`` best first, already filtered), then each channel's own
    best ``per_channel`` that are not among them, in fused order (a channel's hit missing from
    ``fused`` was filtered out and stays out)."""
    chosen = list(fused[:n])
    seen = set(chosen)
    extra: set[str] = set()
    for hs in hits.values():
        for h in hs[:per_channel]:
            if h.id not in seen:
                extra.add(h.id)
    chosen += [d for d in fused[n:] if d in extra]
    return chosen


# The name of the reranker without a model (memlane/models/reranker.py's RRFRankReranker):
# recall does not import the models, it reads the name.
FALLBACK = "rrf-fallback"


def candidate_text(fields: Mapping[str, Any], max_chars: int, asked: Mapping[str, Any] | None = None) -> str:
    """What the cross-encoder reads for a memory: its date and speaker, then its text, cut
    to ``max_chars`` characters (about 4 a token: 1,000 chars ~ 256 tokens). ``asked``: the
    fields of the question a short reply answers (memlane/recall/exchanges.py ``asked_of``),
    read before the reply ("Ilse: r u driving up or getting the coach Noor: coach"), cut to
    half of ``max_chars``."""
    parts = []
    when = to_dt(fields.get("occurred_start") or fields.get("mentioned_at"))
    if when is not None:
        parts.append(when.astimezone(UTC).strftime("%d %B %Y"))
    speaker = (json_value(fields.get("metadata")) or {}).get("speaker")
    text = str(fields.get("text") or "")
    if speaker and text.lower().startswith(f"{str(speaker).lower()}:"):
        speaker = None  # the text names its speaker already ("user: ..."): not twice
    if asked is not None:
        parts.append(str(asked.get("text") or "")[: max_chars // 2])
    head = " ".join(parts + ([f"{speaker}:"] if speaker else []))
    out = f"{head} {text}" if head else text
    return out[:max_chars]


def fallback(n: int) -> list[float]:
    """The RRF-rank score of ``n`` candidates in fused order: 1 - 0.9 * rank / (n - 1), as
    memlane/models/reranker.py's RRFRankReranker gives them."""
    return [1.0 - 0.9 * (r / (n - 1)) if n > 1 else 1.0 for r in range(n)]


def joined(cross: Sequence[float], weight: float) -> list[float]:
    """``weight * cross + (1 - weight) * fallback`` per candidate (in the pool's fused order)."""
    return [weight * c + (1.0 - weight) * f for c, f in zip(cross, fallback(len(cross)))]


def _when(fields: Mapping[str, Any]) -> float:
    t = to_dt(fields.get("mentioned_at") or fields.get("occurred_start"))
    return t.timestamp() if isinstance(t, datetime) else float("-inf")


def newest_among_ties(
    ranked: Sequence[str],
    scores: Mapping[str, float],
    fields: Mapping[str, Mapping[str, Any]],
    margin: float,
    floor: float,
) -> tuple[list[str], set[str]]:
    """``ranked`` (best first) with, at each place held by a memory the cross-encoder judges
    to answer (``scores`` >= ``floor``), the newest of the answering memories left within
    ``margin`` of its score; and the ids put after a newer near-tie (earlier values, kept).
    Memories below the floor keep their places: recency must not reorder what does not
    answer. Candidates were filtered by ``as_of`` already, so for an as-of question the
    newest is the newest before its time."""
    left = list(ranked)
    out: list[str] = []
    earlier: set[str] = set()
    while left:
        head = left[0]
        if scores[head] < floor:
            out.append(left.pop(0))
            continue
        ties = [c for c in left if scores[c] >= floor and scores[c] >= scores[head] - margin]
        pick = max(ties, key=lambda c: (_when(fields[c]), -left.index(c)))
        earlier.update(c for c in ties if c != pick and _when(fields[c]) < _when(fields[pick]))
        out.append(pick)
        left.remove(pick)
    return out, earlier


def rerank_trace(
    c: str,
    model: str,
    joined_score: float,
    cross: Mapping[str, float],
    cross_rank: Mapping[str, int],
    fused_rank: int,
    earlier: bool,
) -> dict[str, Any]:
    """The rerank stage's part of memory ``c``'s trace: the fallback's score, or the
    cross-encoder's model, score and rank in the pool, the fused rank it came from, the score
    joined with the fallback and whether a newer near-tie was put before it (an earlier value)."""
    if c not in cross:
        return {"model": FALLBACK, "score": joined_score, "fused_rank": fused_rank}
    return {
        "model": model,
        "score": cross[c],
        "rank": cross_rank[c],
        "fused_rank": fused_rank,
        "joined": joined_score,
        "earlier": earlier,
    }
