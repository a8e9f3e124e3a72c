"""Run conflict resolution over one bank and write what changed (the consolidation step).

Reads the bank's facts, gives each its slot (the one the extractor stored, else the rules'
patterns over its text: banks retained before slots existed get them here), decides with
:func:`memlane.facts.resolve.resolve` and writes only the facts whose validity or links change,
in one write. What resolution set is recorded in ``metadata["engram"]`` so that a later run can
undo it (a successor deleted: its predecessor is valid again) while an invalidation a user made
by hand is never touched.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable

import numpy as np

from memlane.facts.patterns import find_slot
from memlane.facts.resolve import Adjudicator, Decision, SlotFact, resolve
from memlane.facts.slots import Slot, unit_slot
from memlane.records import MemoryUnit

log = logging.getLogger(__name__)

ENGRAM = "engram"  # the metadata key resolution owns


@dataclass
class ResolveReport:
    """One resolution run: facts with a slot, facts written, outcomes by name."""

    bank_id: str
    slotted: int = 0
    written: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "bank_id": self.bank_id,
            "slotted": self.slotted,
            "written": self.written,
            "outcomes": dict(self.outcomes),
            "seconds": round(self.seconds, 3),
        }


def _ts(dt: datetime | None) -> float | None:
    return None if dt is None else dt.timestamp()


def slot_of(unit: MemoryUnit, *, rules: bool = True) -> Slot | None:
    """The unit's slot: stored by its extractor, else (``rules``) found by the patterns."""
    slot = unit_slot(unit.metadata)
    if slot is not None and slot.by != "rules":
        return slot  # the LLM's: kept as it said
    if not rules:
        return slot
    # The rules' slot is found again from the text: patterns that changed since the unit was
    # written (plans stopped being a slot) must not leave a stale one deciding.
    speaker = unit.metadata.get("speaker")
    if not isinstance(speaker, str) or not speaker:
        return None
    return find_slot(unit.text, speaker, order=slot.order if slot is not None else 0)


def _wanted(unit: MemoryUnit, slot: Slot | None, d: Decision) -> MemoryUnit | None:
    """The unit as the decision wants it, or None when it already is."""
    meta = dict(unit.metadata)
    engram = {
        k: v
        for k, v in (
            ("supersedes", d.supersedes),
            ("restates", d.restates),
            ("elaborates", d.elaborates),
            ("possibly_superseded_by", d.possibly_superseded_by),
            ("would_supersede", d.would_supersede),
            ("reinforced", d.reinforced or None),
            ("adjudicated", d.adjudicated or None),
            ("resolved_invalid", True if d.invalid_at is not None else None),
        )
        if v is not None
    }
    invalid_at = datetime.fromtimestamp(d.invalid_at, UTC) if d.invalid_at is not None else None
    superseded_by = d.superseded_by
    had = meta.get(ENGRAM) or {}
    stored = meta.get("slot")
    fresh_slot = stored == (slot.as_metadata() if slot is not None else None) or (
        slot is not None and slot.by != "rules"
    )
    if not engram and not had and fresh_slot:
        return None
    if engram:
        meta[ENGRAM] = engram
    else:
        meta.pop(ENGRAM, None)
    if slot is not None:
        meta["slot"] = slot.as_metadata()
    elif (meta.get("slot") or {}).get("by") == "rules":
        meta.pop("slot")
    same_validity = _ts(unit.invalid_at) == d.invalid_at and unit.superseded_by == superseded_by
    if meta == unit.metadata and same_validity:
        return None
    return unit.model_copy(
        update={"metadata": meta, "invalid_at": invalid_at, "superseded_by": superseded_by}
    )


class FactResolver:
    """Resolution for the engine: the store to read, a writer to write through, an optional
    adjudicator (the LLM) and the embedder for predicate similarity."""

    def __init__(
        self,
        store,
        writer,
        embed: Callable[[list[str]], np.ndarray],
        *,
        adjudicator: Adjudicator | None = None,
        predicate_similarity: float = 0.8,
        rules_slots: bool = True,
    ) -> None:
        self.store = store
        self.writer = writer
        self.embed = embed
        self.adjudicator = adjudicator
        self.threshold = predicate_similarity
        self.rules_slots = rules_slots

    def _similar(self, names: list[str]) -> set[tuple[str, str]]:
        vecs = np.asarray(
            self.embed([n.replace("_", " ").replace(":", " ") for n in names]), dtype=np.float32
        )
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        sims = vecs @ vecs.T
        return {
            (names[i], names[j])
            for i in range(len(names))
            for j in range(i + 1, len(names))
            if sims[i, j] >= self.threshold
        }

    def run(self, bank_id: str) -> ResolveReport:
        """Resolve the bank's slots and write the facts whose state changes."""
        t0 = time.perf_counter()
        report = ResolveReport(bank_id)
        facts: list[SlotFact] = []
        units: dict[str, MemoryUnit] = {}
        slots: dict[str, Slot | None] = {}
        for batch in self.store.iter_units(bank_id):
            for u in batch:
                engram = u.metadata.get(ENGRAM) or {}
                if u.invalid_at is not None and not engram.get("resolved_invalid"):
                    continue  # invalidated by hand: not resolution's to decide
                slot = slot_of(u, rules=self.rules_slots)
                if slot is None and not engram and "slot" not in u.metadata:
                    continue
                units[u.id], slots[u.id] = u, slot
                if slot is not None:
                    facts.append(
                        SlotFact(
                            id=u.id,
                            slot=slot,
                            at=(u.valid_from or u.mentioned_at).timestamp(),
                            document_id=u.document_id,
                            text=u.text,
                            adjudicated=dict(engram.get("adjudicated") or {}),
                        )
                    )
        report.slotted = len(facts)
        result = resolve(facts, adjudicate=self.adjudicator, similar_predicates=self._similar)
        decisions = {uid: result.decisions.get(uid, Decision()) for uid in units}
        changed = [uid for uid, u in units.items() if _wanted(u, slots[uid], decisions[uid]) is not None]
        report.outcomes = dict(Counter(result.outcomes))
        if changed:
            with self.writer.write(bank_id) as w:
                # Applied to the facts as read again under the lease, with their vectors: a fact
                # deleted meanwhile stays deleted, a field changed meanwhile is kept.
                out = [
                    wanted
                    for u in self.store.get_units(bank_id, changed, with_embedding=True)
                    if (wanted := _wanted(u, slots[u.id], decisions[u.id])) is not None
                ]
                if out:
                    w.units(out)
                report.written = len(out)
        report.seconds = time.perf_counter() - t0
        if report.written:
            log.info("facts of %s: %s", bank_id, report.as_dict())
        return report


def restore_superseded(store, bank_id: str, removed: frozenset[str] = frozenset()) -> None:
    """The writer's delete hook: a fact resolution invalidated whose successor was deleted is
    valid again at once (not only at the next consolidation), so no fact points at nothing and
    the value it held is current again. Invalidations made by hand are left alone."""
    # The invalid units alone, and their successors by id: listing every unit twice cost
    # 2.2 s a deletion at 10k units on Milvus Lite (benchmarks/replace_cost.py).
    invalid = store.list_invalid_unit_ids(bank_id)
    if not invalid:
        return
    units = store.get_units(bank_id, invalid, with_embedding=True)
    successors = sorted({u.superseded_by for u in units if u.superseded_by is not None})
    alive = set(store.get_unit_fields(bank_id, successors, fields=[])) if successors else set()
    restored = []
    for u in units:
        engram = dict(u.metadata.get(ENGRAM) or {})
        if engram.get("resolved_invalid") and u.superseded_by is not None and u.superseded_by not in alive:
            engram.pop("resolved_invalid", None)
            meta = {k: v for k, v in u.metadata.items() if k != ENGRAM}
            if engram:
                meta[ENGRAM] = engram
            restored.append(
                u.model_copy(update={"invalid_at": None, "superseded_by": None, "metadata": meta})
            )
    if restored:
        store.upsert_units(bank_id, restored)
