"""The engine facade: banks, retain, recall, invalidation and deletion over the configured
backends. Plain Python; the Ray layers wrap it, never the other way round."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import ValidationError

from memlane.errors import BankNotFound, ConfigError, InvalidInput, LLMNotConfigured
from memlane.model import Bank, Disposition, RecallRequest, RecallResult, Turn, check_bank_id, now_utc, utc
from memlane.settings import Settings


def _invalid(exc: ValidationError) -> InvalidInput:
    """One line that names each bad field."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err["loc"]) or "input"
        parts.append(f"{where}: {err['msg']}")
    return InvalidInput("; ".join(parts))


class Memory:
    """A Memlane memory engine. Backends are built lazily from ``settings`` unless given."""

    def __init__(self, settings: Settings | None = None, *, store=None, graph=None,
                 embedder=None, reranker=None, extractor=None) -> None:
        self.settings = settings or Settings()
        self._store, self._graph = store, graph
        self._embedder, self._reranker, self._extractor = embedder, reranker, extractor
        self._retainer = self._recaller = self._derived = None
        self._cara = None  # reflect and consolidation (memlane/reflect), built on first use

    # backends -----------------------------------------------------------------------------
    @property
    def store(self):
        if self._store is None:
            from memlane.stores.milvus import MilvusStore

            self._store = MilvusStore(self.settings, dim=self.settings.embedding_dim)
        return self._store

    @property
    def graph(self):
        if self._graph is None:
            from memlane.stores.graph import IGraphStore

            self._graph = IGraphStore(self.settings.graph_dir,
                                      temporal_sigma_hours=self.settings.temporal_link_sigma_hours,
                                      temporal_neighbors=self.settings.temporal_link_neighbors)
        return self._graph

    @property
    def derived(self):
        """Per-bank search indexes and graphs, derived from the store (memlane/derived.py)."""
        if self._derived is None:
            from memlane.derived import DerivedState

            self._derived = DerivedState(self.store, self.graph, self.settings.embedding_dim,
                                         with_index=self.settings.search_backend == "memory")
        return self._derived

    @property
    def embedder(self):
        if self._embedder is None:
            from memlane.models.embedder import build_embedder

            self._embedder = build_embedder(self.settings)
        if self._embedder.dim != self.settings.embedding_dim:
            raise ConfigError(f"embedder produces {self._embedder.dim}-d vectors but "
                              f"MEMLANE_EMBEDDING_DIM is {self.settings.embedding_dim}")
        return self._embedder

    @property
    def reranker(self):
        if self._reranker is None:
            from memlane.models.reranker import build_reranker

            self._reranker = build_reranker(self.settings)
        return self._reranker

    @property
    def extractor(self):
        if self._extractor is None:
            if self.settings.extractor not in ("rules", "llm"):
                raise ConfigError(f"unknown extractor {self.settings.extractor!r} (available: rules, llm)")
            from memlane.retain.extract_rules import RuleExtractor
            from memlane.retain.ner import SpacyNER

            self._extractor = RuleExtractor(SpacyNER(self.settings.spacy_model))
            if self.settings.extractor == "llm":
                from memlane.llm import require_llm
                from memlane.retain.extract_llm import LLMExtractor

                llm = require_llm(self.settings, "retain", "MEMLANE_EXTRACTOR=llm")
                self._extractor = LLMExtractor(llm, self._extractor,
                                               concurrency=self.settings.llm_concurrency,
                                               max_tokens=self.settings.llm_extract_max_tokens)
        return self._extractor

    @property
    def retainer(self):
        if self._retainer is None:
            from memlane.retain.pipeline import Retainer

            self._retainer = Retainer(self.settings, self.store, self.derived, self.embedder,
                                      self.extractor)
            if self.cara.consolidates:
                self._retainer.on_units = self.cara.units_written
        return self._retainer

    @property
    def recaller(self):
        if self._recaller is None:
            from memlane.recall.pipeline import Recaller

            derived = self.derived
            self._recaller = Recaller(self.settings, self.store, self.graph, self.embedder,
                                      self.reranker, derived if derived.with_index else None)
        return self._recaller

    # banks --------------------------------------------------------------------------------
    def create_bank(self, bank_id: str, *, name: str | None = None, background: str | None = None,
                    disposition: Disposition | dict | None = None) -> Bank:
        """Create a bank, or update the given profile fields of an existing one."""
        try:
            check_bank_id(bank_id)
            current = self.store.get_bank(bank_id)
            data: dict[str, Any] = current.model_dump() if current else {"bank_id": bank_id, "name": bank_id}
            if name is not None:
                data["name"] = name
            if background is not None:
                data["background"] = background
            if disposition is not None:
                data["disposition"] = (disposition.model_dump() if isinstance(disposition, Disposition)
                                       else disposition)
            data["updated_at"] = now_utc()
            bank = Bank.model_validate(data)
        except ValidationError as exc:
            raise _invalid(exc) from None
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        self.store.upsert_bank(bank)
        return bank

    def get_bank(self, bank_id: str) -> Bank:
        try:
            check_bank_id(bank_id)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        bank = self.store.get_bank(bank_id)
        if bank is None:
            raise BankNotFound(bank_id)
        return bank

    def list_banks(self) -> list[Bank]:
        return sorted(self.store.list_banks(), key=lambda b: b.bank_id)

    def delete_bank(self, bank_id: str) -> None:
        """Delete a bank with everything in it: units, chunks, entities, its graph."""
        self.get_bank(bank_id)
        self.store.delete_bank(bank_id)
        self.derived.drop(bank_id)

    def stats(self, bank_id: str) -> dict[str, Any]:
        self.get_bank(bank_id)
        self.derived.ensure(bank_id)
        return {"bank_id": bank_id, "units": self.store.count_units(bank_id),
                "chunks": self.store.count_chunks(bank_id),
                "entities": len(self.store.list_entities(bank_id)),
                "graph": self.graph.stats(bank_id)}

    # retain -------------------------------------------------------------------------------
    def retain(self, bank_id: str, conversations: Sequence[tuple[str, Sequence[Turn]]], *,
               tags: Sequence[str] = (), create_bank: bool = True,
               progress: Callable[[int], None] | None = None):
        """Retain ``(document_id, turns)`` pairs. Creates the bank when missing unless
        ``create_bank`` is False. Returns a :class:`~memlane.retain.pipeline.RetainReport`."""
        try:
            bank = self.get_bank(bank_id)
        except BankNotFound:
            if not create_bank:
                raise
            # No owner name: only a bank whose name is set types its owner's turns as
            # experience; naming it after its id made a user called "priya" the agent.
            bank = self.create_bank(bank_id, name="")
        for tag in tags:
            if not isinstance(tag, str) or not tag.strip():
                raise InvalidInput(f"tags: invalid tag {tag!r}")
        seen = self.derived.ensure(bank_id).revision
        report = self.retainer.retain(bank, conversations, tags=tags, progress=progress)
        self.graph.snapshot(bank_id)
        self.derived.wrote(bank_id, seen)
        if self._retainer.on_units is not None:
            self.cara.retained(bank_id)  # observations and opinions: see memlane/reflect/service.py
        return report

    def retain_file(self, bank_id: str, path: str | Path, *, format: str = "auto",
                    tags: Sequence[str] = (), progress: Callable[[int], None] | None = None):
        """Load a LoCoMo JSON or JSONL file (validated whole before anything is written) and
        retain it."""
        from memlane.ingest import load_conversations

        check = self._check_bank_id(bank_id)
        conversations = load_conversations(Path(path), format=format)
        return self.retain(check, [(c.document_id, c.turns) for c in conversations], tags=tags,
                           progress=progress)

    # recall -------------------------------------------------------------------------------
    def recall(self, bank_id: str, query: str | RecallRequest, **options: Any) -> RecallResult:
        """Recall memories for ``query``; ``options`` are the fields of RecallRequest."""
        try:
            req = query if isinstance(query, RecallRequest) else RecallRequest(query=query, **options)
        except ValidationError as exc:
            raise _invalid(exc) from None
        self.get_bank(bank_id)
        self.derived.ensure(bank_id)
        return self.recaller.recall(bank_id, req)

    # reflect ------------------------------------------------------------------------------
    @property
    def cara(self):
        """Reflect, opinions, observations and background merging (memlane/reflect)."""
        if self._cara is None:
            from memlane.reflect import CARA

            self._cara = CARA(self)
        return self._cara

    def reflect(self, bank_id: str, query: str, **options: Any):
        """Answer ``query`` from the bank's memories in the bank's own voice (CARA), citing the
        memories used and storing the opinions the answer forms. ``options``: the fields of
        :class:`~memlane.reflect.ReflectRequest` (max_tokens = recall budget, budget, as_of,
        tags, ...). Returns a :class:`~memlane.reflect.ReflectResult`. Needs an LLM for the
        reflect role; raises :class:`~memlane.errors.LLMNotConfigured` naming the setting."""
        self.get_bank(bank_id)
        return self.cara.reflect(bank_id, query, **options)

    def merge_background(self, bank_id: str, snippet: str) -> Bank:
        """Merge a biographical snippet into the bank's first-person background; the snippet
        wins where they conflict."""
        return self.cara.merge_background(bank_id, snippet)

    def wait_background(self) -> None:
        """Wait for the consolidation jobs retain queued (observations, opinion updates)."""
        if self._cara is not None:
            self._cara.wait()

    # invalidation and deletion --------------------------------------------------------------
    def invalidate(self, bank_id: str, unit_id: str, *, superseded_by: str | None = None,
                   at: datetime | None = None) -> None:
        """Mark a unit no longer valid from ``at`` (default now): it stays stored and answers
        ``as_of`` questions about the time before (Engram: invalidate, never delete)."""
        self.get_bank(bank_id)
        seen = self.derived.ensure(bank_id).revision
        units = self.store.get_units(bank_id, [unit_id], with_embedding=True)
        if not units:
            raise InvalidInput(f"unit {unit_id!r} is not in bank {bank_id!r}")
        unit = units[0]
        unit.invalid_at = utc(at) if at else now_utc()
        unit.superseded_by = superseded_by
        self.store.upsert_units(bank_id, [unit])
        self.derived.upsert_units(bank_id, [unit])
        self.derived.wrote(bank_id, seen)

    def delete_document(self, bank_id: str, document_id: str) -> dict[str, int]:
        """Delete a document's units and chunks, then rebuild the bank's graph and drop entities
        nothing mentions any more."""
        self.get_bank(bank_id)
        counts = self.store.delete_document(bank_id, document_id)
        # Rebuilt from what the store now holds; the new token tells other processes too.
        self.derived.drop(bank_id)
        self.store.bump_revision(bank_id)
        self.derived.ensure(bank_id)
        entities = self.store.list_entities(bank_id)
        degrees = self.graph.entity_degrees(bank_id, [e.entity_id for e in entities])
        orphans = [e.entity_id for e in entities if degrees.get(e.entity_id, 0) == 0]
        counts["entities"] = self.store.delete_entities(bank_id, orphans) if orphans else 0
        changed = [e.model_copy(update={"mention_count": degrees[e.entity_id]}) for e in entities
                   if degrees.get(e.entity_id, 0) and degrees[e.entity_id] != e.mention_count]
        if changed:
            self.store.upsert_entities(bank_id, changed)
        self.graph.snapshot(bank_id)
        return counts

    def close(self) -> None:
        if self._cara is not None:
            self._cara.close()  # runs the queued jobs first: they write to the store
        if self._recaller is not None:
            self._recaller.close()
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # internals ----------------------------------------------------------------------------
    def _check_bank_id(self, bank_id: str) -> str:
        try:
            return check_bank_id(bank_id)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
