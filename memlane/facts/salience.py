"""Salience: facts reinforced by new evidence (a restatement, resolution's ``reinforced``) or
cited by reflect (``metadata["salience"]``) rank a little higher, and the effect fades with a
half-life. Stored values are the strength at the last reinforcement; the decay to "now" is
computed at read time, so a recall writes nothing."""

from __future__ import annotations

from typing import Any, Mapping

DAY_S = 86400.0


def _decayed(n: float, at: float | None, now_s: float, half_life_days: float) -> float:
    if n <= 0 or at is None:
        return 0.0
    age = max(0.0, now_s - at) / DAY_S
    return n * 0.5 ** (age / half_life_days)


def strength(fields: Mapping[str, Any], now_s: float, half_life_days: float) -> float:
    """The fact's salience at ``now_s``: restatements decayed from its mention, citations from
    the last one."""
    meta = fields.get("metadata") or {}
    engram = meta.get("engram") or {}
    cited = meta.get("salience") or {}
    return _decayed(
        float(engram.get("reinforced") or 0), fields.get("mentioned_at"), now_s, half_life_days
    ) + (_decayed(float(cited.get("n") or 0), cited.get("at"), now_s, half_life_days))


def boost(fields: Mapping[str, Any], now_s: float, half_life_days: float, alpha: float) -> float:
    """The recall factor: 1 for a fact never reinforced, approaching 1 + ``alpha`` (saturating:
    s / (1 + s)), so salience reorders near ties and never buries a better match."""
    if alpha <= 0:
        return 1.0
    s = strength(fields, now_s, half_life_days)
    return 1.0 + alpha * s / (1.0 + s)


def reinforce(metadata: Mapping[str, Any], now_s: float, half_life_days: float) -> dict[str, Any]:
    """``metadata`` with one more citation at ``now_s`` (the earlier ones decayed to it)."""
    cited = metadata.get("salience") or {}
    n = _decayed(float(cited.get("n") or 0), cited.get("at"), now_s, half_life_days) + 1.0
    return {**metadata, "salience": {"n": round(n, 4), "at": now_s}}
