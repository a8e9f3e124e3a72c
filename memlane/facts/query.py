"""Which slot a question asks about ("where does Ana live?" -> lives_in), so that the facts
filling it rank first: a fact that says "we moved into our new place in Leeds" shares no word
with the question, and its wording alone ranked it below chatter about living there."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from memlane.facts.patterns import _COUNTABLE, _PLURALS
from memlane.facts.slots import norm_text, unit_slot

_ASKS = (
    (
        re.compile(r"\b(?:live|lives|living|reside|resides|based|home ?town|moved|move|city|town)\b", re.I),
        "lives_in",
    ),
    (re.compile(r"\b(?:work|works|working|employer|company|employed|job at)\b", re.I), "works_at"),
    (
        re.compile(
            r"\b(?:job title|title|role|position|occupation|profession|what does \w+ do for a living)\b", re.I
        ),
        "job_title",
    ),
    (
        re.compile(
            r"\b(?:relationship|married|engaged|dating|single|partner|girlfriend|boyfriend|husband|wife|divorced)\b",
            re.I,
        ),
        "relationship",
    ),
    (re.compile(r"\b(?:plan|plans|planning)\b", re.I), "plans"),
)
_HOW_MANY = re.compile(r"\bhow many\s+(?P<thing>guinea pigs?|[a-z]+(?:\s+[a-z]+)?)", re.I)
_FAVOURITE = re.compile(r"\bfavou?rite\s+(?P<cat>[a-z]+)", re.I)
_FIRST_PERSON = re.compile(r"\b(?:I|my|me|mine)\b")


def asked_predicates(query: str) -> set[str]:
    """The predicates the question asks about (empty: none it recognises)."""
    out = {pred for pattern, pred in _ASKS if pattern.search(query)}
    m = _HOW_MANY.search(query)
    if m:
        words = m.group("thing").lower()
        for noun in (words, *words.split()):  # "guinea pigs", "rescue dogs" -> dog
            noun = _PLURALS.get(noun, noun[:-1] if noun.endswith("s") else noun)
            if noun in _COUNTABLE:
                out.add(f"owns:{_COUNTABLE[noun]}")
                break
    m = _FAVOURITE.search(query)
    if m:
        out.add(f"favourite:{m.group('cat').lower()}")
    return out


def fills_asked_slot(fields: Mapping[str, Any], query: str, predicates: set[str]) -> bool:
    """True when the fact fills one of ``predicates`` for the question's subject (named in the
    question, or the asker when it speaks in the first person)."""
    if not predicates:
        return False
    slot = unit_slot(fields.get("metadata") or {})
    if slot is None or slot.predicate not in predicates:
        return False
    subject = norm_text(slot.subject)
    return f" {subject} " in f" {norm_text(query)} " or _FIRST_PERSON.search(query) is not None


def current_values_first(
    ids: Sequence[str], fields: Mapping[str, Mapping[str, Any]], query: str
) -> list[str]:
    """``ids`` with the latest ranked fact of each slot the question asks about moved to the
    front (in their own order); the rest keep theirs. Candidates were filtered already, so
    with ``as_of`` the latest is the value valid then."""
    asked = asked_predicates(query)
    if not asked:
        return list(ids)
    latest: dict[str, tuple[float, str]] = {}
    for i in ids:
        f = fields[i]
        if fills_asked_slot(f, query, asked):
            slot = unit_slot(f.get("metadata") or {})
            assert slot is not None  # fills_asked_slot read it
            t = float(f.get("valid_from") or f.get("mentioned_at") or 0.0)
            if slot.key not in latest or t > latest[slot.key][0]:
                latest[slot.key] = (t, i)
    first = {i for _, i in latest.values()}
    return [i for i in ids if i in first] + [i for i in ids if i not in first]
