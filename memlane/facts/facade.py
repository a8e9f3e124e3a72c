"""Engram's part of the engine facade (:class:`memlane.engine.Memory` inherits it): resolve a
bank's facts (run by :meth:`~memlane.tree.facade.TreeMethods.consolidate` before the tree)."""

from __future__ import annotations

from typing import Any, Callable

from memlane.errors import ConfigError
from memlane.facts.service import FactResolver, ResolveReport


class FactsMethods:
    """Conflict resolution on the engine (needs its store, writer, embedder and the
    consolidation role's LLM; see memlane/components.py)."""

    store: Any
    writer: Any
    embedder: Any
    settings: Any
    get_bank: Callable[[str], Any]
    tree_llm: Callable[[], Any]

    def resolve_facts(self, bank_id: str) -> ResolveReport:
        """Resolve conflicts between the bank's slotted facts (memlane/facts/resolve.py) as
        ``facts.resolve`` says: a newer value invalidates an older one, which stays stored and
        answers ``as_of`` and history questions. "off" does nothing. Returns a
        :class:`~memlane.facts.service.ResolveReport`; raises BankNotFound."""
        self.get_bank(bank_id)
        mode = self.settings.facts.resolve
        if mode == "off":
            return ResolveReport(bank_id)
        adjudicator = None
        if mode in ("auto", "llm"):
            llm = self.tree_llm()
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
