"""Which slot a question asks about ("where does Ana live?" -> lives_in), so that the facts
filling it rank first: a fact that says "we moved into our new place in Leeds" shares no word
with the question, and its wording alone ranked it below chatter about living there. The
question's words are read from its analysis (memlane/query/: ``asked_slots``)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memlane.facts.slots import norm_text, unit_slot
from memlane.query.analysis import QueryAnalysis


def fills_asked_slot(fields: Mapping[str, Any], query: QueryAnalysis) -> bool:
    """True when the fact fills a slot the question asks about, for the question's subject
    (named in the question, or the asker when it speaks in the first person)."""
    if not query.asked_slots:
        return False
    slot = unit_slot(fields.get("metadata") or {})
    if slot is None or slot.predicate not in query.asked_slots:
        return False
    subject = norm_text(slot.subject)
    return f" {subject} " in f" {query.normalized} " or query.first_person


def current_values_first(
    ids: Sequence[str], fields: Mapping[str, Mapping[str, Any]], query: QueryAnalysis
) -> list[str]:
    """``ids`` with the latest ranked fact of each slot the question asks about moved to the
    front (in their own order); the rest keep theirs. Candidates were filtered already, so
    with ``as_of`` the latest is the value valid then."""
    if not query.asked_slots:
        return list(ids)
    latest: dict[str, tuple[float, str]] = {}
    for i in ids:
        f = fields[i]
        if fills_asked_slot(f, query):
            slot = unit_slot(f.get("metadata") or {})
            assert slot is not None  # fills_asked_slot read it
            t = float(f.get("valid_from") or f.get("mentioned_at") or 0.0)
            if slot.key not in latest or t > latest[slot.key][0]:
                latest[slot.key] = (t, i)
    first = {i for _, i in latest.values()}
    return [i for i in ids if i in first] + [i for i in ids if i not in first]
