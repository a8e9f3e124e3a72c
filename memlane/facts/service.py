"""Engram's part of the engine: resolve a bank's facts (run by
:meth:`memlane.tree.service.TreeService.consolidate` before the tree) and reinforce the ones
reflect cites."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Sequence

from memlane.banks import require_bank
from memlane.errors import ConfigError
from memlane.facts.resolver import FactResolver, ResolveReport
from memlane.interfaces import LLM, Embedder, VectorStore
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.writes import BankWriter

log = logging.getLogger(__name__)


class FactsService:
    """Conflict resolution and salience over one engine's store and writer."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        writer: BankWriter,
        embedder: Embedder,
        llm: Callable[[], LLM | None],
    ) -> None:
        """``llm()`` gives the consolidation role's model (built on first use) or None."""
        self.settings = settings
        self.store = store
        self.writer = writer
        self.embedder = embedder
        self.llm = llm
        self._extractors: dict[str, object] = {}

    def resolve(self, bank_id: str) -> ResolveReport:
        """Resolve conflicts between the bank's slotted facts (memlane/facts/resolve.py) as
        ``facts.resolve`` says: a newer value invalidates an older one, which stays stored and
        answers ``as_of`` and history questions. "off" does nothing. Returns a
        :class:`~memlane.facts.resolver.ResolveReport`; raises BankNotFound."""
        require_bank(self.store, bank_id)
        mode = self.settings.facts.resolve
        if mode == "off":
            return ResolveReport(bank_id)
        adjudicator = None
        if mode in ("auto", "llm"):
            llm = self.llm()
            if llm is None and mode == "llm":
                from memlane.llm import not_configured

                raise not_configured("consolidation", "MEMLANE_FACTS__RESOLVE=llm")
            if llm is not None:
                from memlane.facts.adjudicate import LLMAdjudicator

                adjudicator = LLMAdjudicator(llm)
        elif mode != "rules":
            raise ConfigError(f"facts.resolve must be auto, rules, llm or off, got {mode!r}")
        return FactResolver(
            self.store,
            self.writer,
            self.embedder.embed,
            adjudicator=adjudicator,
            predicate_similarity=self.settings.facts.predicate_similarity,
            rules_slots=self.settings.facts.slots,
            learned=self._learned(bank_id),
        ).run(bank_id)

    def resolve_quietly(self, bank_id: str) -> None:
        """:meth:`resolve`, logging a failure instead of raising it (the job after a write: the
        write that queued it succeeded)."""
        try:
            self.resolve(bank_id)
        except Exception as exc:  # noqa: BLE001 - a failed background job is logged, not raised
            log.warning("fact resolution of %s failed: %s: %s", bank_id, type(exc).__name__, exc)

    def _learned(self, bank_id: str):
        """The learned slot extractor of the bank's embedder (memlane/facts/learned.py), or
        None when it is off or no weights ship for that embedder. Built once per embedder."""
        if not self.settings.facts.learned_slots:
            return None
        from memlane.banks import bank_embedder

        bank = self.store.get_bank(bank_id)
        name = bank_embedder(bank)[0] if bank is not None else ""
        if name not in self._extractors:
            from memlane.facts.learned import LearnedExtractor, SpacyEntities
            from memlane.facts.slot_weights import SlotWeights

            weights = SlotWeights.for_embedder(name)
            self._extractors[name] = (
                LearnedExtractor(weights, SpacyEntities(self.settings.models.spacy_model))
                if weights is not None
                else None
            )
        return self._extractors[name]

    def reinforce(self, bank_id: str, unit_ids: Sequence[str]) -> int:
        """One more citation on each of these memories (reflect cited them): their salience
        grows, then fades with ``facts.salience_half_life_days`` (memlane/facts/salience.py).
        Returns how many were written (a memory deleted meanwhile is skipped)."""
        from memlane.facts.salience import reinforce
        from memlane.records import now_utc

        ids = list(dict.fromkeys(unit_ids))
        if not ids:
            return 0
        now_s = now_utc().timestamp()
        half_life = self.settings.facts.salience_half_life_days
        with self.writer.write(bank_id) as w:
            units = self.store.get_units(bank_id, ids, with_embedding=True)
            out = [u.model_copy(update={"metadata": reinforce(u.metadata, now_s, half_life)}) for u in units]
            if out:
                w.units(out)
        return len(out)
