"""Recall's candidates between rerank and packing: one typed record each (:class:`Candidate`),
scored by the boosts (:func:`score`) in one place."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Sequence

from memlane.facts import salience
from memlane.recall import boosts
from memlane.settings import Settings
from memlane.temporal import proximity
from memlane.units import fields_interval


@dataclass(frozen=True, slots=True)
class Boosts:
    """The multiplicative factors applied to a candidate's rerank score."""

    recency: float
    temporal: float
    proof: float
    salience: float


@dataclass(frozen=True, slots=True)
class Candidate:
    """A unit that reached rerank: its id, the rerank score, the boosts and the final score;
    ``rank`` is its place in the rerank's input."""

    id: str
    rank: int
    rerank: float
    boosts: Boosts
    score: float


def proximity_scale(interval: tuple[datetime, datetime]) -> float:
    """Proximity decay scale: half the queried period, at least a day."""
    return max(86400.0, (interval[1] - interval[0]).total_seconds() / 2)


def score(
    settings: Settings,
    ids: Sequence[str],
    fields: Mapping[str, Mapping[str, Any]],
    rerank: Sequence[float],
    reference: datetime,
    interval: tuple[datetime, datetime] | None,
) -> list[Candidate]:
    """``ids`` (in rerank's input order, ``rerank`` their scores) boosted by recency, temporal
    proximity to ``interval``, proof count and salience, best first (ties: input order)."""
    r = settings.recall
    ref_s = reference.timestamp()
    max_proof = max((fields[c].get("proof_count") or 0 for c in ids), default=0)
    out = []
    for i, c in enumerate(ids):
        f = fields[c]
        b_rec = boosts.factor(
            r.recency_alpha,
            boosts.recency(f.get("mentioned_at"), ref_s, r.recency_half_life_days, f.get("occurred_start")),
        )
        b_tmp = 1.0
        occ = fields_interval(f) if interval is not None else None
        if interval is not None and occ is not None:
            occ_s, occ_e = occ
            b_tmp = boosts.factor(
                r.temporal_alpha,
                proximity(
                    occ_s,
                    occ_e,
                    interval[0].timestamp(),
                    interval[1].timestamp(),
                    proximity_scale(interval),
                ),
            )
        b_prf = boosts.factor(r.proof_alpha, boosts.proof(f.get("proof_count"), max_proof))
        b_sal = salience.boost(
            f, ref_s, settings.facts.salience_half_life_days, settings.facts.salience_alpha
        )
        out.append(
            Candidate(
                c, i, rerank[i], Boosts(b_rec, b_tmp, b_prf, b_sal), rerank[i] * b_rec * b_tmp * b_prf * b_sal
            )
        )
    out.sort(key=lambda x: (-x.score, x.rank))
    return out
