"""Where superseded facts go in a ranking, and when a question asks for them.

Recall "as of now" hides superseded facts; a question about the past ("where did she live
before Bristol?", the ``past`` cue of its analysis, memlane/query/analysis.py) includes them. In a ranking (:func:`order`):

* a fact marked ``possibly_superseded_by`` a fact also ranked comes after it (the ambiguous
  tier: both valid, the newer first);
* a superseded fact comes after its successor, unless the question asks about the past and
  names the successor's value ("before Bristol"): then the fact it replaced comes first.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memlane.facts.slots import norm_text, unit_slot
from memlane.query.analysis import QueryAnalysis


def _engram(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    return (fields.get("metadata") or {}).get("engram") or {}


def order(
    ids: Sequence[str], fields: Mapping[str, Mapping[str, Any]], query: QueryAnalysis, history: bool
) -> list[str]:
    """``ids`` (best first) reordered by the rules of the module docstring; the relative order
    of everything else is kept."""
    present = set(ids)
    newer: dict[str, str] = {}  # id -> the ranked fact it must follow
    for i in ids:
        f = fields[i]
        succ = f.get("superseded_by")
        maybe = _engram(f).get("possibly_superseded_by")
        if succ in present and succ != i:
            newer[i] = succ
        elif maybe in present and maybe != i:
            newer[i] = maybe
    if not newer:
        return list(ids)
    ranked = list(ids)
    if history:
        q = f" {query.normalized} "
        for succ in list(ranked):
            slot = unit_slot(fields[succ].get("metadata") or {})
            pred = _engram(fields[succ]).get("supersedes")
            if slot is None or pred not in present or f" {norm_text(slot.object)} " not in q:
                continue
            newer.pop(pred, None)  # the answer to "before <value>": first, not after it
            ranked.remove(pred)
            ranked.insert(ranked.index(succ), pred)
    out: list[str] = []
    waiting: dict[str, list[str]] = {}
    emitted: set[str] = set()

    def emit(i: str) -> None:
        out.append(i)
        emitted.add(i)
        for later in waiting.pop(i, []):
            emit(later)

    for i in ranked:
        target = newer.get(i)
        if target is not None and target not in emitted:
            waiting.setdefault(target, []).append(i)
        else:
            emit(i)
    for rest in waiting.values():  # cycles (a corrupt chain) keep their facts, last
        out.extend(x for x in rest if x not in emitted)
    return out
