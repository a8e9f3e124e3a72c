"""Run conflict resolution over one bank and write what changed (the consolidation step).

Reads the bank's units, gives each its facts (those its extractor stored, and the rules'
patterns over its text, found again each run), decides with
:func:`memlane.facts.resolve.resolve` and writes only the units whose facts' decisions change,
in one write.

A decision belongs to a fact, not to the turn it came from (Engram: invalidate the fact, keep
the episode): each fact's record in ``metadata["facts"]`` carries its own ``superseded_by`` /
``invalid_at`` (memlane/facts/slots.py), so a turn that said where the speaker lives and where
they work stays recallable, and its other fact valid, when a newer job supersedes the one. The
unit's own ``superseded_by`` names the newest unit whose fact superseded one of its facts (what
the delete hook looks up: :func:`restore_superseded`); its ``invalid_at`` is never set here,
and one a user set by hand is never touched. Units that an earlier resolution invalidated whole
(``metadata["engram"]["resolved_invalid"]``) are made valid again by the next run.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from memlane.facts.families import family_of
from memlane.facts.learned import LearnedExtractor
from memlane.facts.patterns import find_facts
from memlane.facts.resolve import Adjudicator, Decision, SlotFact, resolve
from memlane.facts.slots import FACTS, Slot, fact_id, fact_record, unit_facts, unit_of
from memlane.facts.trust import slot_may_supersede
from memlane.query.words import is_assistant
from memlane.records import MemoryUnit

log = logging.getLogger(__name__)

ENGRAM = "engram"  # the unit-level metadata key resolution owns (salience's "reinforced")


@dataclass
class ResolveReport:
    """One resolution run: facts with a slot, units written, outcomes by name."""

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


def facts_of(unit: MemoryUnit, *, rules: bool = True, learned: list[Slot] | None = None) -> list[Slot]:
    """The unit's facts: an LLM extractor's as it stored them; else those the learned
    extractor found in it (``learned``: memlane/facts/learned.py) and (``rules``) the rules'
    patterns over its text, found again (patterns that changed since the unit was written must
    not leave a stale fact deciding). Where both fill a slot family, the one whose extractor
    is trusted there (memlane/facts/trust.py) is kept, the rules' on a tie (their values are
    the words of the value, the learned extractor's may carry a verb: "promoted to ward
    manager"). The assistant's turns state nothing about the person the bank holds."""
    stored = [slot for slot, _ in unit_facts(unit.metadata)]
    llm = [slot for slot in stored if not slot.by.startswith(("rules", "classifier"))]
    if llm:
        return llm
    speaker = unit.metadata.get("speaker")
    if not isinstance(speaker, str) or not speaker or is_assistant(speaker):
        return [] if rules or learned is not None else stored
    if not rules and learned is None:
        return stored
    order = stored[0].order if stored else 0
    found = find_facts(unit.text, speaker, order=order) if rules else []
    for slot in learned or []:
        same = [f for f in found if family_of(f.predicate) == family_of(slot.predicate)]
        if not same:
            found.append(slot)
        elif slot_may_supersede(slot) and not any(slot_may_supersede(f) for f in same):
            found = [f for f in found if f not in same] + [slot]
    return found


def _decisions(d: Decision) -> dict[str, Any]:
    return {
        "supersedes": d.supersedes,
        "superseded_by": d.superseded_by,
        "invalid_at": d.invalid_at,
        "restates": d.restates,
        "elaborates": d.elaborates,
        "possibly_superseded_by": d.possibly_superseded_by,
        "would_supersede": d.would_supersede,
        "reinforced": d.reinforced or None,
        "adjudicated": d.adjudicated or None,
    }


def _wanted(unit: MemoryUnit, facts: list[Slot], decisions: dict[str, Decision]) -> MemoryUnit | None:
    """The unit as the decisions on its facts want it, or None when it already is."""
    meta = dict(unit.metadata)
    records = [
        fact_record(s, _decisions(decisions.get(fact_id(unit.id, i), Decision())))
        for i, s in enumerate(facts)
    ]
    if records:
        meta[FACTS] = records
    else:
        meta.pop(FACTS, None)
    # metadata["slot"] stays: it is what the extractor wrote, which a re-retain compares with
    # a new extraction (memlane/retain/plan.py); the facts above are read first
    reinforced = max((r.get("reinforced") or 0 for r in records), default=0)
    if reinforced:
        meta[ENGRAM] = {"reinforced": reinforced}
    else:
        meta.pop(ENGRAM, None)
    successors = [r["superseded_by"] for r in records if r.get("superseded_by")]
    # the unit of the newest fact that superseded one of this unit's facts (the delete hook's index)
    superseded_by = unit_of(max(successors)) if successors else None
    update: dict[str, Any] = {"metadata": meta, "superseded_by": superseded_by}
    if (unit.metadata.get(ENGRAM) or {}).get("resolved_invalid"):
        update["invalid_at"] = None  # an earlier resolution's whole-unit invalidation: undone
    wanted = unit.model_copy(update=update)
    same = (
        wanted.metadata == unit.metadata
        and wanted.superseded_by == unit.superseded_by
        and wanted.invalid_at == unit.invalid_at
    )
    return None if same else wanted


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
        learned: LearnedExtractor | None = None,
    ) -> None:
        """``learned``: the learned slot extractor of the bank's embedder (its facts read the
        units' stored vectors), or None."""
        self.store = store
        self.writer = writer
        self.embed = embed
        self.adjudicator = adjudicator
        self.threshold = predicate_similarity
        self.rules_slots = rules_slots
        self.learned = learned

    def _learned(self, units: list[MemoryUnit]) -> dict[str, list[Slot]]:
        """The learned extractor's facts of the units that are a person's turns, by id."""
        if self.learned is None:
            return {}
        mine = [
            u
            for u in units
            if u.embedding is not None
            and isinstance(u.metadata.get("speaker"), str)
            and not is_assistant(u.metadata["speaker"])
        ]
        if not mine:
            return {}
        found = self.learned.extract(
            [u.text for u in mine],
            [u.metadata["speaker"] for u in mine],
            np.asarray([u.embedding for u in mine], dtype=np.float32),
        )
        return {u.id: f for u, f in zip(mine, found)}

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
        """Resolve the bank's facts and write the units whose facts' decisions change."""
        t0 = time.perf_counter()
        report = ResolveReport(bank_id)
        facts: list[SlotFact] = []
        units: dict[str, MemoryUnit] = {}
        found: dict[str, list[Slot]] = {}
        for batch in self.store.iter_units(bank_id, with_embedding=self.learned is not None):
            learned = self._learned(batch)
            for u in batch:
                legacy = (u.metadata.get(ENGRAM) or {}).get("resolved_invalid")
                if u.invalid_at is not None and not legacy:
                    continue  # invalidated by hand: not resolution's to decide
                slots = facts_of(
                    u, rules=self.rules_slots, learned=learned.get(u.id) if self.learned is not None else None
                )
                had = FACTS in u.metadata or "slot" in u.metadata or ENGRAM in u.metadata
                if not slots and not had and u.superseded_by is None:
                    continue
                units[u.id], found[u.id] = u, slots
                records = dict(enumerate(rec for _, rec in unit_facts(u.metadata)))
                for i, slot in enumerate(slots):
                    facts.append(
                        SlotFact(
                            id=fact_id(u.id, i),
                            slot=slot,
                            at=(u.valid_from or u.mentioned_at).timestamp(),
                            document_id=u.document_id,
                            text=u.text,
                            adjudicated=dict((records.get(i) or {}).get("adjudicated") or {}),
                        )
                    )
        report.slotted = len(facts)
        result = resolve(facts, adjudicate=self.adjudicator, similar_predicates=self._similar)
        decisions = result.decisions
        changed = [uid for uid, u in units.items() if _wanted(u, found[uid], decisions) is not None]
        report.outcomes = dict(Counter(result.outcomes))
        if changed:
            with self.writer.write(bank_id) as w:
                # Applied to the units as read again under the lease, with their vectors: a unit
                # deleted meanwhile stays deleted, a field changed meanwhile is kept.
                out = [
                    wanted
                    for u in self.store.get_units(bank_id, changed, with_embedding=True)
                    if (wanted := _wanted(u, found[u.id], decisions)) is not None
                ]
                if out:
                    w.units(out)
                report.written = len(out)
        report.seconds = time.perf_counter() - t0
        if report.written:
            log.info("facts of %s: %s", bank_id, report.as_dict())
        return report


def restore_superseded(store, bank_id: str, removed: frozenset[str] = frozenset()) -> None:
    """The writer's delete hook: a fact superseded by a fact of a unit just deleted is valid
    again at once (not only at the next consolidation), so no fact points at nothing and the
    value it held is current again. Units an earlier resolution invalidated whole whose
    successor went are made valid too. Invalidations made by hand are left alone."""
    if not removed:
        return
    # The units pointing at the removed ones, by one filtered read (listing every unit cost
    # 2.2 s a deletion at 10k units on Milvus Lite: benchmarks/replace_cost.py).
    ids = store.list_superseded_unit_ids(bank_id, removed)
    if not ids:
        return
    restored = []
    for u in store.get_units(bank_id, ids, with_embedding=True):
        meta = dict(u.metadata)
        records = []
        for rec in meta.get(FACTS) or []:
            rec = dict(rec)
            if unit_of(str(rec.get("superseded_by") or "")) in removed:
                rec.pop("superseded_by", None)
                rec.pop("invalid_at", None)
            records.append(rec)
        if records:
            meta[FACTS] = records
        successors = [r["superseded_by"] for r in records if r.get("superseded_by")]
        update: dict[str, Any] = {
            "metadata": meta,
            "superseded_by": unit_of(max(successors)) if successors else None,
        }
        engram = dict(meta.get(ENGRAM) or {})
        if engram.pop("resolved_invalid", None):
            update["invalid_at"] = None
            meta[ENGRAM] = engram
            if not engram:
                meta.pop(ENGRAM)
        restored.append(u.model_copy(update=update))
    if restored:
        store.upsert_units(bank_id, restored)
