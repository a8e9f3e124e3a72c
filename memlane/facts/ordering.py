"""Where superseded facts go in a ranking, and when a question asks for them.

A fact's supersession is its own (memlane/facts/resolver.py): the turn it came from stays
recallable for everything else it says. So the order changes only for a question about the
fact's slot (the slots its analysis asks about, memlane/query/analysis.py). In a ranking
(:func:`order`):

* a fact of an asked slot marked ``possibly_superseded_by`` a fact also ranked comes after it
  (the ambiguous tier: both valid, the newer first);
* a superseded fact of an asked slot comes after its successor, unless the question asks about
  the past ("before Bristol", "used to") or history is asked for: then the fact it replaced
  comes first, just before its successor (as the README promises for ``--history``);
* a unit an earlier resolution invalidated whole (before facts had records of their own, and
  shown only to history questions) comes after its successor whatever the question.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memlane.facts.slots import Slot, unit_facts, unit_of
from memlane.query.analysis import QueryAnalysis


def asked(slot: Slot, query: QueryAnalysis) -> bool:
    """Whether the question asks about the fact's slot (``owns:dog`` and ``favourite:band``
    by their own name; the asked predicate ``owns:dog`` also matches ``count:dogs``)."""
    pred = slot.predicate
    if pred in query.asked_slots:
        return True
    family = pred.split(":", 1)[0]
    return family in ("owns", "count") and any(
        a.split(":", 1)[0] in ("owns", "count") for a in query.asked_slots
    )


def successors(fields: Mapping[str, Any], query: QueryAnalysis) -> list[tuple[str, str, Slot]]:
    """``(kind, successor unit id, slot)`` for each fact of an asked slot that a newer fact
    supersedes (kind "superseded") or possibly supersedes ("possibly")."""
    out = []
    for slot, rec in unit_facts(fields.get("metadata") or {}):
        if not asked(slot, query):
            continue
        for kind, key in (("superseded", "superseded_by"), ("possibly", "possibly_superseded_by")):
            succ = rec.get(key)
            if succ:
                out.append((kind, unit_of(str(succ)), slot))
    engram = (fields.get("metadata") or {}).get("engram") or {}
    if engram.get("resolved_invalid") and fields.get("superseded_by"):
        out.append(("superseded", str(fields["superseded_by"]), Slot("", "", "")))
    return out


def order(
    ids: Sequence[str], fields: Mapping[str, Mapping[str, Any]], query: QueryAnalysis, history: bool
) -> list[str]:
    """``ids`` (best first) reordered by the rules of the module docstring; the relative order
    of everything else is kept."""
    present = set(ids)
    newer: dict[str, str] = {}  # id -> the ranked unit it must follow
    replaced_by: dict[str, list[tuple[str, Slot]]] = {}  # successor -> (predecessor, slot)
    for i in ids:
        for kind, succ, slot in successors(fields[i], query):
            if succ in present and succ != i:
                newer.setdefault(i, succ)
                if kind == "superseded":
                    replaced_by.setdefault(succ, []).append((i, slot))
    if not newer:
        return list(ids)
    ranked = list(ids)
    if history:
        for succ, preds in replaced_by.items():
            for pred, _ in preds:
                newer.pop(pred, None)  # the answer to "before <value>": first, not after it
                if ranked.index(pred) > ranked.index(succ):
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
