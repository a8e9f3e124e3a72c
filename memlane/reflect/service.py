"""CARA: reflect, opinion formation and reinforcement, observation refresh and background
merging. The engine holds one :class:`ReflectService` and delegates to it; CARA gets only what it uses
(the store to read, the bank writer to write, the embedder, a recall callable and its LLMs).

After retain, new facts are consolidated into opinions and observations by
:class:`~memlane.reflect.consolidation.Consolidation` (on the engine's scheduler,
memlane/background.py). ``Memory.wait_background()`` waits for them; ``Memory.close()`` does too.

Writes made here go through the bank writer (memlane/writes.py: store, then derived state,
then one revision bump), so other processes reload the bank. A job that runs while another
retain of the same bank is writing marks this process's index stale, and the next recall
reloads it: slower once, never wrong.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from pydantic import ValidationError

from memlane.background import Scheduler
from memlane.curated.directives import directives_section
from memlane.errors import BankNotFound, InvalidInput
from memlane.interfaces import LLM, VectorStore
from memlane.llm import build_llm, require_llm
from memlane.llm.errors import LLMOutputError
from memlane.llm.structured import complete_json, complete_schema
from memlane.records import Bank, FactType, MemoryUnit, OpinionChange, RecallResult, now_utc
from memlane.reflect.consolidation import MAX_SOURCES, Consolidation
from memlane.reflect.disposition import system_message
from memlane.reflect.opinions import (
    REFLECT_INSTRUCTIONS,
    OpinionDraft,
    ReflectReply,
    opinion_id,
)
from memlane.reflect.profile import BackgroundReply, merge_messages
from memlane.reflect.requests import ReflectRequest, ReflectResult
from memlane.retain.entities import normalize
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.writes import BankWriter

log = logging.getLogger(__name__)

SAME_OPINION = 0.92  # cosine at which a newly stated opinion is the same as a stored one


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


# recall(bank_id, query, **RecallRequest fields): the engine's Memory.recall
Recall = Callable[..., RecallResult]
# embed(bank_id, texts) -> float32 (n, dim): the bank's embedder, built on first use
Embed = Callable[[str, Sequence[str]], np.ndarray]


# The second call of a reflect with a response_schema: the answer as the caller's JSON.
STRUCTURED_INSTRUCTIONS = (
    "Give the answer below as one JSON object that follows the given JSON Schema. Use only what "
    "the answer and the memories say; where they say nothing for a field, leave it out if the "
    "schema allows, else give an empty value."
)

# What reflect answers when recall abstains (the reason follows in parentheses).
DONT_KNOW = "I don't know: nothing I remember answers that"


class ReflectService:
    """Reflect and consolidation for one engine."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        writer: BankWriter,
        embed: Embed,
        recall: Recall,
        scheduler: Scheduler,
    ) -> None:
        self.settings = settings
        self.store = store
        self.writer = writer
        self.embed = embed
        self.recall = recall
        self._llms: dict[str, LLM | None] = {}
        self.consolidation = Consolidation(settings, store, embed, self.llm, self._write, scheduler)

    # LLMs ----------------------------------------------------------------------------------
    def llm(self, role: str) -> LLM | None:
        """The role's LLM (built once), or None when none is configured."""
        if role not in self._llms:
            self._llms[role] = build_llm(self.settings, role)
        return self._llms[role]

    @property
    def consolidates(self) -> bool:
        """True when retain should queue consolidation jobs."""
        background = self.settings.background
        return background.reflect and background.mode != "off" and self.llm("consolidation") is not None

    # reflect -------------------------------------------------------------------------------
    def reflect(self, bank_id: str, query: str, **options: Any) -> ReflectResult:
        try:
            req = ReflectRequest(query=query, **options)
        except ValidationError as exc:
            raise InvalidInput.from_validation(exc) from None
        bank = self._bank(bank_id)
        if self.llm("reflect") is None:
            require_llm(self.settings, "reflect", "reflect")  # raises, naming the setting
        llm = self.llm("reflect")
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        recalled = self.recall(
            bank_id,
            req.query,
            max_tokens=req.max_tokens,
            budget=req.budget,
            as_of=req.as_of,
            reference_time=req.reference_time,
            tags=req.tags,
            tags_match=req.tags_match,
        )
        timings["recall"] = _ms(t0)
        if recalled.abstain:
            return self._dont_know(recalled, timings, t0, schema=req.response_schema is not None)
        labels = {f"M{i}": m.unit for i, m in enumerate(recalled.memories, start=1)}
        rules = directives_section(self.store, bank_id, req.tags)  # the user's (memlane/curated)
        tick = time.perf_counter()
        reply = complete_json(
            llm,
            self._reflect_messages(bank, req.query, labels, rules),
            ReflectReply,
            max_tokens=req.answer_max_tokens,
        )
        timings["llm"] = _ms(tick)
        cited: list[str] = []
        for label in reply.cited:
            unit = labels.get(label.strip().strip("[]"))
            if unit is not None and unit.id not in cited:
                cited.append(unit.id)
        opinions: list[MemoryUnit] = []
        if req.form_opinions and reply.opinions:
            tick = time.perf_counter()
            opinions = self.form_opinions(bank, reply.opinions, cited, req.query)
            timings["opinions"] = _ms(tick)
        structured: dict[str, Any] = {}
        if req.response_schema is not None:
            tick = time.perf_counter()
            structured = self._structured(llm, req, reply.answer, labels)
            timings["structured"] = _ms(tick)
        timings["total"] = _ms(t0)
        for m in recalled.memories:
            m.unit.embedding = None
        return ReflectResult(
            answer=reply.answer,
            memory_ids=cited,
            opinions=opinions,
            memories=recalled.memories,
            timings_ms=timings,
            **structured,
        )

    @staticmethod
    def _structured(
        llm: LLM | None, req: ReflectRequest, answer: str, labels: dict[str, MemoryUnit]
    ) -> dict[str, Any]:
        """The answer as a JSON object following the request's response_schema, from one more
        call: ``structured_output``, or ``structured_output_error`` when the reply did not
        follow the schema after a repair (the answer itself stands)."""
        memories = "\n".join(f"[{label}] {u.text}" for label, u in labels.items()) or "(no memories)"
        messages = [
            {"role": "system", "content": STRUCTURED_INSTRUCTIONS},
            {
                "role": "user",
                "content": f"Answer to structure: {answer}\n\nQuestion: {req.query}\n\nMemories:\n{memories}",
            },
        ]
        schema = req.response_schema or {}
        try:
            value = complete_schema(llm, messages, schema, max_tokens=req.answer_max_tokens)
        except LLMOutputError as exc:
            return {"structured_output_error": str(exc)}
        return {"structured_output": value}

    @staticmethod
    def _dont_know(recalled, timings: dict[str, float], t0: float, *, schema: bool = False) -> ReflectResult:
        """Recall abstained: say the bank does not know, without asking the model.

        Not an instruction to the model ("say you don't know if ..."): the questions recall
        abstains on are mostly the trap kind (LoCoMo category 5: the right content about the
        wrong person), where a model shown the near-miss memories answers from them anyway.
        The decision is recall's (rules, or the LLM gate when configured), so reflect does not
        ask twice; it saves the call, forms no opinions, and still returns what it recalled."""
        timings["total"] = _ms(t0)
        for m in recalled.memories:
            m.unit.embedding = None
        reason = recalled.abstain_reason or "the memories do not support an answer"
        return ReflectResult(
            answer=f"{DONT_KNOW} ({reason}).",
            memories=recalled.memories,
            timings_ms=timings,
            abstain=True,
            abstain_reason=recalled.abstain_reason,
            structured_output_error=f"no answer to structure: {reason}" if schema else None,
        )

    @staticmethod
    def _reflect_messages(
        bank: Bank, query: str, labels: dict[str, MemoryUnit], rules: str = ""
    ) -> list[dict]:
        lines = []
        for label, u in labels.items():
            when = (u.occurred_start or u.mentioned_at).date().isoformat()
            kind = u.fact_type.value
            if u.fact_type == FactType.opinion and u.confidence is not None:
                kind += f", my confidence {u.confidence:.2f}"
            lines.append(f"[{label}] ({kind}, {when}) {u.text}")
        memories = "\n".join(lines) if lines else "(no memories)"
        return [
            {
                "role": "system",
                "content": f"{system_message(bank)}\n\n{REFLECT_INSTRUCTIONS}"
                + (f"\n\n{rules}" if rules else ""),
            },
            {"role": "user", "content": f"Question: {query}\n\nMemories:\n{memories}"},
        ]

    def form_opinions(
        self, bank: Bank, drafts: Sequence[OpinionDraft], evidence: list[str], query: str
    ) -> list[MemoryUnit]:
        """Store the opinions an answer expressed: a new one with its stated confidence, or, when
        the same opinion is stored (same statement, or cosine >= SAME_OPINION), that one updated
        to the newly stated confidence. Each change goes into the history."""
        bank_id = bank.bank_id
        now = now_utc()
        vectors = self.embed(bank_id, [d.statement for d in drafts])
        existing = self._opinions(bank_id, with_embedding=True)
        names = self._entity_names(bank_id)
        out: list[MemoryUnit] = []
        for d, vec in zip(drafts, vectors):
            oid = opinion_id(bank_id, d.statement)
            same = next((o for o in existing if o.id == oid), None)
            if same is None and existing:
                sims = np.asarray([o.embedding for o in existing], dtype=np.float32) @ vec
                best = int(np.argmax(sims))
                if sims[best] >= SAME_OPINION:
                    same = existing[best]
            change = OpinionChange(
                at=now,
                confidence=d.confidence,
                reason=f"stated in reflect: {query}"[:500],
                evidence_id=evidence[0] if evidence else None,
            )
            if same is not None:
                same.confidence = d.confidence
                same.history = [*same.history, change]
                same.source_fact_ids = list(dict.fromkeys([*same.source_fact_ids, *evidence]))[-MAX_SOURCES:]
                out.append(same)
                continue
            entity_ids = list(dict.fromkeys(names[k] for k in map(normalize, d.entities) if k in names))
            out.append(
                MemoryUnit(
                    id=oid,
                    bank_id=bank_id,
                    text=d.statement,
                    fact_type=FactType.opinion,
                    embedding=vec.tolist(),
                    mentioned_at=now,
                    valid_from=now,
                    confidence=d.confidence,
                    entity_ids=entity_ids,
                    source_fact_ids=evidence[:MAX_SOURCES],
                    history=[change],
                    metadata={"formed_by": "reflect"},
                )
            )
        self._write(bank_id, out)
        return [u.model_copy(update={"embedding": None}) for u in out]

    # consolidation after retain ------------------------------------------------------------
    def units_written(self, bank: Bank, units: Sequence[MemoryUnit]) -> None:
        """Retain's per-batch hook: queue the batch's new facts (memlane/reflect/consolidation.py)."""
        self.consolidation.units_written(bank, units)

    def retained(self, bank_id: str) -> None:
        """End of a retain call: run (sync) or schedule (thread) the bank's consolidation."""
        self.consolidation.retained(bank_id)

    def close(self) -> None:
        """Close the LLM clients (the engine closes its scheduler first: its jobs use them)."""
        for llm in self._llms.values():
            close = getattr(llm, "close", None)
            if close:
                close()

    def merge_background(self, bank_id: str, snippet: str) -> Bank:
        """Merge a biographical snippet into the bank's first-person background (the new one
        wins conflicts). An empty background simply becomes the snippet (no model call)."""
        if not isinstance(snippet, str) or not snippet.strip():
            raise InvalidInput("background snippet must not be empty")
        bank = self._bank(bank_id)
        current = bank.background.strip()
        if not current:
            merged = snippet.strip()
        else:
            llm = self.llm("consolidation")
            if llm is None:
                require_llm(self.settings, "consolidation", "background merging")
            merged = complete_json(
                llm, merge_messages(current, snippet.strip()), BackgroundReply, max_tokens=800
            ).background.strip()
        try:
            merged_bank = Bank.model_validate(
                {**bank.model_dump(), "background": merged, "updated_at": now_utc()}
            )
        except ValidationError as exc:
            raise InvalidInput.from_validation(exc) from None
        self.writer.put_bank(merged_bank)
        return merged_bank

    # store helpers -------------------------------------------------------------------------
    def _bank(self, bank_id: str) -> Bank:
        bank = self.store.get_bank(bank_id)
        if bank is None:
            raise BankNotFound(bank_id)
        return bank

    def _opinions(self, bank_id: str, *, with_embedding: bool) -> list[MemoryUnit]:
        ids = [
            u.id
            for batch in self.store.iter_units(bank_id)
            for u in batch
            if u.fact_type == FactType.opinion and u.invalid_at is None
        ]
        return self.store.get_units(bank_id, ids, with_embedding=with_embedding) if ids else []

    def _entity_names(self, bank_id: str) -> dict[str, str]:
        names: dict[str, str] = {}
        for e in self.store.list_entities(bank_id):
            for n in (e.name, *e.aliases):
                names.setdefault(normalize(n), e.entity_id)
        return names

    def _write(self, bank_id: str, units: list[MemoryUnit]) -> None:
        """One logical write (one revision bump) per batch of opinions or observations."""
        if units:
            with self.writer.write(bank_id) as w:
                w.units(units)
