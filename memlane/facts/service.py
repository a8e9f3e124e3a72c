"""Engram's part of the engine: resolve a bank's facts (run by
:meth:`memlane.tree.service.TreeService.consolidate` before the tree) and reinforce the ones
reflect cites."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from memlane.banks import require_bank
from memlane.errors import ConfigError
from memlane.facts.resolver import FactResolver, ResolveReport
from memlane.interfaces import LLM, Embedder, VectorStore
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.writes import BankWriter


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
        ).run(bank_id)

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
