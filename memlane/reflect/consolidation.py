"""Consolidation after retain (CARA): each retained batch's new world/experience facts are
queued per bank; when the retain call ends, one job per bank runs with the consolidation LLM:
related opinions are assessed against the new facts and their confidence updated, and the
observation of every entity the facts mention is rewritten, all in one write (one revision
bump). The jobs run on the engine's scheduler (memlane/background.py: on its thread, or inline
at the end of retain with ``background.mode="sync"``); with ``background.reflect`` off, or the
mode "off", retain queues nothing (:attr:`memlane.reflect.ReflectService.consolidates`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memlane.background import Kind, Scheduler
from memlane.interfaces import LLM, VectorStore
from memlane.llm.errors import LLMError
from memlane.llm.structured import complete_json
from memlane.records import Bank, FactType, MemoryUnit, OpinionChange, now_utc
from memlane.reflect.observations import ObservationReply, observation_id, observation_messages
from memlane.reflect.opinions import Assessment, assess_messages, updated_confidence
from memlane.settings import Settings

log = logging.getLogger(__name__)

MAX_SOURCES = 4096  # the store's array limit
EVIDENCE_PER_OPINION = 5  # newest related facts shown to the model per assessment
# embed(bank_id, texts) -> float32 (n, dim): the bank's embedder, built on first use
Embed = Callable[[str, Sequence[str]], np.ndarray]


@dataclass(slots=True)
class NewFact:
    """What consolidation needs of a retained unit (the vector as float32, not a list)."""

    id: str
    text: str
    entity_ids: list[str]
    vector: np.ndarray


class Consolidation:
    """The queue of new facts per bank and the jobs that consolidate them."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        embed: Embed,
        llm: Callable[[str], LLM | None],
        write: Callable[[str, list[MemoryUnit]], None],
        scheduler: Scheduler,
    ) -> None:
        """``llm(role)`` gives the role's model or None; ``write(bank_id, units)`` is one
        logical write through the bank writer."""
        self.settings = settings
        self.store = store
        self.embed = embed
        self.llm = llm
        self._write = write
        self._lock = threading.Lock()
        self._pending: dict[str, list[NewFact]] = {}
        self.scheduler = scheduler

    def units_written(self, bank: Bank, units: Sequence[MemoryUnit]) -> None:
        """Retain's per-batch hook: queue the batch's new facts for the end of the retain."""
        facts = [
            NewFact(u.id, u.text, list(u.entity_ids), np.asarray(u.embedding, dtype=np.float32))
            for u in units
            if u.fact_type in (FactType.world, FactType.experience) and u.embedding is not None
        ]
        if facts:
            with self._lock:
                self._pending.setdefault(bank.bank_id, []).extend(facts)

    def retained(self, bank_id: str) -> None:
        """End of a retain call: queue the bank's consolidation (one job per bank reads every
        batch queued before it starts)."""
        self.scheduler.submit(Kind.reflect, bank_id, lambda: self._consolidate_pending(bank_id))

    def _consolidate_pending(self, bank_id: str) -> None:
        with self._lock:
            facts = self._pending.pop(bank_id, [])
        if facts:
            self.consolidate(bank_id, facts)

    def consolidate(self, bank_id: str, facts: list[NewFact]) -> dict[str, int]:
        """Reinforce related opinions and refresh the observations of the facts' entities."""
        llm = self.llm("consolidation")
        if llm is None or not facts:
            return {"opinions": 0, "observations": 0}
        touched = sorted({e for f in facts for e in f.entity_ids})
        opinions: list[MemoryUnit] = []
        support: dict[str, list[MemoryUnit]] = {e: [] for e in touched}
        for batch in self.store.iter_units(bank_id):
            for u in batch:
                if u.invalid_at is not None:
                    continue
                if u.fact_type == FactType.opinion:
                    opinions.append(u)
                elif u.fact_type in (FactType.world, FactType.experience):
                    for e in u.entity_ids:
                        if e in support:
                            support[e].append(u)
        changed = self._reinforce(llm, bank_id, facts, [o.id for o in opinions])
        refreshed = self._refresh_observations(llm, bank_id, support)
        # One write after the model calls: one revision bump, and a short window in which
        # another process's write would leave this process's state stale.
        self._write(bank_id, changed + refreshed)
        return {"opinions": len(changed), "observations": len(refreshed)}

    def _reinforce(self, llm, bank_id: str, facts: list[NewFact], opinion_ids: list[str]) -> list[MemoryUnit]:
        """The related opinions with their confidence updated (not yet written)."""
        if not opinion_ids:
            return []
        opinions = self.store.get_units(bank_id, opinion_ids, with_embedding=True)
        if not opinions:
            return []
        theta, step = self.settings.reflect.opinion_similarity, self.settings.reflect.opinion_step
        sims = (
            np.stack([f.vector for f in facts])
            @ np.asarray([o.embedding for o in opinions], dtype=np.float32).T
        )
        changed: list[MemoryUnit] = []
        for j, op in enumerate(opinions):
            shared = set(op.entity_ids)
            related = [
                i for i, f in enumerate(facts) if sims[i, j] > theta or shared.intersection(f.entity_ids)
            ]
            if not related:
                continue
            related.sort(key=lambda i: -float(sims[i, j]))
            related = related[:EVIDENCE_PER_OPINION]
            c = op.confidence if op.confidence is not None else 0.5
            try:
                verdict = complete_json(
                    llm,
                    assess_messages(op.text, c, [facts[i].text for i in related]),
                    Assessment,
                    max_tokens=300,
                )
            except LLMError as exc:
                log.warning("opinion %s not assessed: %s", op.id, exc)
                continue
            if verdict.verdict == "neutral":
                continue
            new_c = updated_confidence(c, verdict.verdict, step)
            evidence = [facts[i].id for i in related]
            op.confidence = new_c
            op.history = [
                *op.history,
                OpinionChange(
                    at=now_utc(),
                    confidence=new_c,
                    reason=f"{verdict.verdict}: {verdict.reason}".strip()[:500],
                    evidence_id=evidence[0],
                ),
            ]
            op.source_fact_ids = list(dict.fromkeys([*op.source_fact_ids, *evidence]))[-MAX_SOURCES:]
            changed.append(op)
        return changed

    def _refresh_observations(
        self, llm, bank_id: str, support: dict[str, list[MemoryUnit]]
    ) -> list[MemoryUnit]:
        """The rewritten observation of each entity in ``support`` (not yet written)."""
        entities = {e.entity_id: e for e in self.store.list_entities(bank_id)}
        drafts: list[tuple[str, str, list[MemoryUnit]]] = []
        for eid, facts in support.items():
            if not facts:
                continue
            facts.sort(key=lambda u: (u.mentioned_at, u.id))
            name = entities[eid].name if eid in entities else eid
            shown = facts[-self.settings.reflect.observation_max_facts :]
            listing = [((u.occurred_start or u.mentioned_at).date().isoformat(), u.text) for u in shown]
            try:
                reply = complete_json(
                    llm, observation_messages(name, listing), ObservationReply, max_tokens=400
                )
            except LLMError as exc:
                log.warning("observation of %s not refreshed: %s", name, exc)
                continue
            drafts.append((eid, reply.summary.strip(), facts))
        if not drafts:
            return []
        vectors = self.embed(bank_id, [text for _, text, _ in drafts])
        units = []
        for (eid, text, facts), vec in zip(drafts, vectors):
            last = facts[-1].mentioned_at
            name = entities[eid].name if eid in entities else eid
            units.append(
                MemoryUnit(
                    id=observation_id(bank_id, eid),
                    bank_id=bank_id,
                    text=text,
                    fact_type=FactType.observation,
                    embedding=vec.tolist(),
                    mentioned_at=last,
                    valid_from=last,
                    entity_ids=[eid],
                    proof_count=len(facts),
                    source_fact_ids=[u.id for u in facts][-MAX_SOURCES:],
                    metadata={"entity": name},
                )
            )
        return units

    # background merging --------------------------------------------------------------------
