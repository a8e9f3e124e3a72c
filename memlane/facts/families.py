"""Slot families: what a fact is about, whichever extractor wrote it and however it named it.

A family is the unit the statement set labels, the extractors are measured on and trust is
granted to (memlane/facts/trust.py): ``favourite:band`` and ``favourite:food`` are one family,
and so are the rules' ``owns:dog`` (a count of dogs) and a labeller's ``count:dogs``. This is
the one place a predicate is mapped to its family.
"""

from __future__ import annotations

from memlane.facts.slots import Slot, norm_predicate

FAMILIES: tuple[str, ...] = (
    "works_at",
    "job_title",
    "lives_in",
    "relationship",
    "pet",
    "diet",
    "car",
    "studies",
    "favourite",
    "count",
)
# Families whose predicate carries a category after a colon (favourite:colour, count:cats).
CATEGORISED = frozenset({"favourite", "count"})
# The rules' and the chunk extractor's name for a count: owns:<thing> with a count.
_ALIASES = {"owns": "count"}


def family_of(predicate: str) -> str | None:
    """The family of a predicate as any extractor wrote it, or None (not a measured family):
    "owns:dog" -> "count", "favourite:band" -> "favourite", "lives_in" -> "lives_in"."""
    name = norm_predicate(predicate)
    head = name.split(":", 1)[0]
    head = _ALIASES.get(head, head)
    return head if head in FAMILIES else None


def labelled(slot: Slot) -> tuple[str, str]:
    """A slot as the statement set writes a fact, (slot, value): the rules' ``owns:dog`` with
    count 2 is ``("count:dog", "2")``; other slots keep their predicate and object."""
    fam = family_of(slot.predicate)
    if fam == "count":
        thing = slot.predicate.split(":", 1)[1] if ":" in slot.predicate else "things"
        return f"count:{thing}", str(slot.count) if slot.count is not None else slot.object
    return slot.predicate, slot.object
