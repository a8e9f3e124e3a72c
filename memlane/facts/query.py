"""Which slot a question asks about ("where does Ana live?" -> lives_in), so that the facts
filling it rank first: a fact that says "we moved into our new place in Leeds" shares no word
with the question, and its wording alone ranked it below chatter about living there. The
question's words are read from its analysis (memlane/query/: ``asked_slots``)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memlane.facts.ordering import asked
from memlane.facts.slots import Slot, norm_text, unit_facts
from memlane.query.analysis import QueryAnalysis


def asked_facts(
    fields: Mapping[str, Any], query: QueryAnalysis, at: float | None = None
) -> list[tuple[Slot, dict[str, Any]]]:
    """The unit's facts of a slot the question asks about, for the question's subject (named
    in the question, or the asker when it speaks in the first person), still valid at ``at``
    (epoch seconds: the question's as-of or reference time; None: not superseded at all)."""
    if not query.asked_slots:
        return []
    out = []
    for slot, rec in unit_facts(fields.get("metadata") or {}):
        invalid = rec.get("invalid_at")
        if not asked(slot, query) or (invalid is not None and (at is None or float(invalid) <= at)):
            continue
        subject = norm_text(slot.subject)
        if f" {subject} " in f" {query.normalized} " or query.first_person:
            out.append((slot, rec))
    return out


def fills_asked_slot(fields: Mapping[str, Any], query: QueryAnalysis, at: float | None = None) -> bool:
    """True when the unit holds a fact of a slot the question asks about, valid at ``at``
    (see :func:`asked_facts`)."""
    return bool(asked_facts(fields, query, at))


def current_values_first(
    ids: Sequence[str], fields: Mapping[str, Mapping[str, Any]], query: QueryAnalysis, at: float | None = None
) -> list[str]:
    """``ids`` with the latest ranked fact of each slot the question asks about moved to the
    front (in their own order); the rest keep theirs. Candidates were filtered already, so
    with ``as_of`` the latest is the value valid then (``at``: that time)."""
    if not query.asked_slots:
        return list(ids)
    latest: dict[str, tuple[float, str]] = {}
    for i in ids:
        f = fields[i]
        for slot, _ in asked_facts(f, query, at):
            t = float(f.get("valid_from") or f.get("mentioned_at") or 0.0)
            if slot.key not in latest or t > latest[slot.key][0]:
                latest[slot.key] = (t, i)
    first = {i for _, i in latest.values()}
    return [i for i in ids if i in first] + [i for i in ids if i not in first]
