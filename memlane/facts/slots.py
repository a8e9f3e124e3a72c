"""Slots: the (subject, predicate) a fact fills, and its value (Engram's structured facts).

A fact that fills a slot carries it in ``metadata["slot"]``:
``{"subject", "predicate", "object", "count", "by", "order"}``. ``by`` says who filled it
("rules" or "llm"); ``order`` places facts said at the same instant (the turn's position in its
session). Two facts are about the same thing when their :func:`slot_key` is equal; they agree
when their :func:`norm_object` (and count) are equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from memlane.query.words import norm_text

_NON_WORD = re.compile(r"[^\w\s]")


def norm_predicate(value: str) -> str:
    """snake_case of a predicate as an extractor wrote it: "Lives In" -> "lives_in"."""
    parts = ("_".join(_NON_WORD.sub(" ", part.casefold()).split()) for part in value.split(":"))
    return ":".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class Slot:
    """What a fact says about one attribute of one subject."""

    subject: str
    predicate: str
    object: str
    count: int | None = None
    by: str = "rules"
    order: int = 0

    @property
    def key(self) -> str:
        return slot_key(self.subject, self.predicate)

    @property
    def value(self) -> str:
        """The value two facts of one slot are compared on (the count, when there is one)."""
        return str(self.count) if self.count is not None else norm_text(self.object)

    def as_metadata(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
            "count": self.count,
            "by": self.by,
            "order": self.order,
        }

    @classmethod
    def from_metadata(cls, data: Any) -> Slot | None:
        """The slot a unit's metadata holds, or None (absent or malformed: a fact without a slot)."""
        if not isinstance(data, Mapping):
            return None
        subject, predicate, obj = data.get("subject"), data.get("predicate"), data.get("object")
        if not all(isinstance(x, str) and x.strip() for x in (subject, predicate, obj)):
            return None
        count = data.get("count")
        order = data.get("order")
        return cls(
            subject=str(subject).strip(),
            predicate=norm_predicate(str(predicate)),
            object=str(obj).strip(),
            count=count if isinstance(count, int) and not isinstance(count, bool) else None,
            by=str(data.get("by") or "rules"),
            order=order if isinstance(order, int) and not isinstance(order, bool) else 0,
        )


def slot_key(subject: str, predicate: str) -> str:
    """The slot's identity: the normalised subject and predicate."""
    return f"{norm_text(subject)}|{norm_predicate(predicate)}"


def unit_slot(metadata: Mapping[str, Any]) -> Slot | None:
    """The slot stored on a unit (``metadata["slot"]``), if any."""
    return Slot.from_metadata(metadata.get("slot"))


# A unit's facts: ``metadata["facts"]``, one dict a fact (the Slot's fields), each with its own
# validity as resolution decided it (``superseded_by``, ``invalid_at``, ...: memlane/facts/
# resolver.py). A turn holds several ("Settled in Fife now, and I started at the depot last
# week": where the speaker lives and works); superseding one leaves the others, and the turn
# itself, valid. Units written before facts had their own record hold one ``metadata["slot"]``.
FACTS = "facts"
# The keys of a fact's record that resolution owns (the rest are the Slot's).
DECISION_KEYS = (
    "supersedes",
    "superseded_by",
    "invalid_at",
    "restates",
    "elaborates",
    "possibly_superseded_by",
    "would_supersede",
    "reinforced",
    "adjudicated",
)


def fact_id(unit_id: str, index: int) -> str:
    """A fact's id: its unit's id and its place among the unit's facts."""
    return f"{unit_id}#{index}"


def unit_of(fact: str) -> str:
    """The unit id of a fact id (a unit id itself passes through)."""
    head, sep, tail = fact.rpartition("#")
    return head if sep and tail.isdigit() else fact


def unit_facts(metadata: Mapping[str, Any]) -> list[tuple[Slot, dict[str, Any]]]:
    """The unit's facts as ``(slot, record)``: ``metadata["facts"]``, else the one legacy
    ``metadata["slot"]`` (no decisions of its own)."""
    raw = metadata.get(FACTS)
    if isinstance(raw, list):
        out = []
        for rec in raw:
            slot = Slot.from_metadata(rec)
            if slot is not None:
                out.append((slot, dict(rec)))
        return out
    slot = unit_slot(metadata)
    return [(slot, slot.as_metadata())] if slot is not None else []


def fact_record(slot: Slot, decisions: Mapping[str, Any]) -> dict[str, Any]:
    """A fact's stored record: the slot's fields and the decisions that are set."""
    return {**slot.as_metadata(), **{k: v for k, v in decisions.items() if k in DECISION_KEYS and v}}
