"""The engine facade. Plain Python; the Ray layers wrap it, never the other way round. Each
method delegates to one part, built and wired once in memlane/components.py (with the one
scheduler of what follows a write, memlane/background.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from memlane.banks import require_bank
from memlane.components import Components
from memlane.interfaces import Embedder, GraphStore, Reranker
from memlane.records import (
    Bank,
    Directive,
    Disposition,
    Entity,
    Level,
    MemoryUnit,
    MentalModel,
    RecallRequest,
    RecallResult,
    RetainItem,
    TreeNode,
    Turn,
)
from memlane.retain.items import DocumentPlan
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.background import Scheduler
    from memlane.derived import DerivedState
    from memlane.doctor import BankReport
    from memlane.facts.resolver import ResolveReport
    from memlane.reflect import ReflectResult, ReflectService
    from memlane.retain.facts import Extractor
    from memlane.retain.pipeline import Retainer, RetainReport
    from memlane.stores.milvus import MilvusStore
    from memlane.tree.build import TreeReport
    from memlane.tree.consolidators import Consolidator
    from memlane.writes import BankWriter


class Memory:
    """A Memlane memory engine; its parts are built lazily from ``settings`` unless given."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: MilvusStore | None = None,
        graph: GraphStore | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        extractor: Extractor | None = None,
    ) -> None:
        self._parts = Components(
            settings,
            recall=self.recall,
            store=store,
            graph=graph,
            embedder=embedder,
            reranker=reranker,
            extractor=extractor,
        )
        self.settings: Settings = self._parts.settings

    # the parts, for the layers that drive them directly -------------------------------------
    @property
    def store(self) -> MilvusStore:
        return self._parts.store

    @property
    def graph(self) -> GraphStore:
        return self._parts.graph

    @property
    def derived(self) -> DerivedState:
        """Per-bank search indexes and graphs, derived from the store (memlane/derived.py)."""
        return self._parts.derived

    @property
    def writer(self) -> BankWriter:
        """The one write path to banks (memlane/writes.py)."""
        return self._parts.writer

    @property
    def embedder(self) -> Embedder:
        return self._parts.embedder

    @property
    def reranker(self) -> Reranker:
        return self._parts.reranker

    @property
    def extractor(self) -> Extractor:
        return self._parts.extractor

    @property
    def retainer(self) -> Retainer:
        return self._parts.retainer

    @property
    def reflection(self) -> ReflectService:
        """Reflect, opinions, observations and background merging (memlane/reflect)."""
        return self._parts.reflection

    @property
    def scheduler(self) -> Scheduler:
        """The background jobs that follow writes (memlane/background.py)."""
        return self._parts.scheduler

    def consolidator(self, kind: str | None = None) -> Consolidator:
        """The tree consolidator ``kind`` ("auto", "rules", "llm"; default: the settings')."""
        return self._parts.consolidator(kind)

    # banks --------------------------------------------------------------------------------
    def create_bank(
        self,
        bank_id: str,
        *,
        name: str | None = None,
        background: str | None = None,
        disposition: Disposition | dict | None = None,
    ) -> Bank:
        """Create a bank, or update the given profile fields of an existing one."""
        return self._parts.banks.create(bank_id, name=name, background=background, disposition=disposition)

    def put_bank(self, bank_id: str, **fields: Any) -> tuple[Bank, bool]:
        """:meth:`create_bank`, and whether the bank was created (False: updated)."""
        return self._parts.banks.put(bank_id, **fields)

    def get_bank(self, bank_id: str) -> Bank:
        """The bank; InvalidInput for a malformed id, BankNotFound for an unknown one."""
        return require_bank(self.store, bank_id)

    def list_banks(self) -> list[Bank]:
        return self._parts.banks.list_all()

    def delete_bank(self, bank_id: str) -> None:
        """Delete a bank with everything in it: units, chunks, entities, its graph."""
        self._parts.banks.delete(bank_id)

    def stats(self, bank_id: str) -> dict[str, Any]:
        return self._parts.banks.stats(bank_id)

    def doctor(self, bank_id: str) -> BankReport:
        """Check every invariant of the bank and its derived state in this process
        (:mod:`memlane.doctor`); a :class:`~memlane.doctor.BankReport`. Raises BankNotFound."""
        return self._parts.banks.doctor(bank_id)

    # retain -------------------------------------------------------------------------------
    def retain(
        self,
        bank_id: str,
        conversations: Sequence[tuple[str, Sequence[Turn]]],
        *,
        tags: Sequence[str] = (),
        create_bank: bool = True,
        progress: Callable[[int], None] | None = None,
        extractor: Extractor | None = None,
    ) -> RetainReport:
        """Retain ``(document_id, turns)`` pairs in one write. A document retained again
        replaces what it held, as :meth:`retain_items` does: memories of turns its new
        version dropped are deleted, and turns whose text is unchanged keep their stored
        vectors (not embedded again). Creates the bank when missing unless ``create_bank`` is
        False; ``extractor`` replaces the configured one for this call (e.g. replies of a
        batch LLM stage). Returns a :class:`~memlane.retain.pipeline.RetainReport`."""
        return self._parts.retain.retain(
            bank_id, conversations, tags=tags, create_bank=create_bank, progress=progress, extractor=extractor
        )

    def retain_file(
        self,
        bank_id: str,
        path: str | Path,
        *,
        format: str = "auto",
        tags: Sequence[str] = (),
        progress: Callable[[int], None] | None = None,
    ) -> RetainReport:
        """Load a LoCoMo JSON or JSONL file (validated whole before anything is written) and
        retain it."""
        return self._parts.retain.retain_file(bank_id, path, format=format, tags=tags, progress=progress)

    def plan_items(
        self,
        bank_id: str,
        items: Sequence[RetainItem | dict],
        *,
        document_id: str | None = None,
        tags: Sequence[str] = (),
    ) -> DocumentPlan:
        """Validate retain API items and group them into ``{document_id: (tags, turns)}``
        without writing anything (what :meth:`retain_items` would write). Raises InvalidInput
        naming the first bad field."""
        from memlane.retain.items import plan_items

        return plan_items(bank_id, items, document_id, tags)

    def retain_items(
        self,
        bank_id: str,
        items: Sequence[RetainItem | dict],
        *,
        document_id: str | None = None,
        tags: Sequence[str] = (),
        create_bank: bool = True,
        progress: Callable[[int], None] | None = None,
    ) -> RetainReport:
        """Retain API items (see :class:`~memlane.records.RetainItem`). Items are grouped into
        documents by ``document_id`` (the item's, else the call's, else one derived from the
        content); each document replaces what it held before, in one write. Validated whole
        before anything is written."""
        return self._parts.retain.retain_items(
            bank_id, items, document_id=document_id, tags=tags, create_bank=create_bank, progress=progress
        )

    # recall -------------------------------------------------------------------------------
    def recall(self, bank_id: str, query: str | RecallRequest, **options: Any) -> RecallResult:
        """Recall memories for ``query``; ``options`` are the fields of RecallRequest."""
        return self._parts.recall_service.recall(bank_id, query, **options)

    # reflect ------------------------------------------------------------------------------
    def reflect(self, bank_id: str, query: str, **options: Any) -> ReflectResult:
        """Answer ``query`` from the bank's memories in the bank's own voice (CARA), citing the
        memories used and storing the opinions the answer forms. ``options``: the fields of
        :class:`~memlane.reflect.ReflectRequest` (max_tokens = recall budget, budget, as_of,
        tags, ...). Returns a :class:`~memlane.reflect.ReflectResult`. Needs an LLM for the
        reflect role; raises :class:`~memlane.errors.LLMNotConfigured` naming the setting."""
        self.get_bank(bank_id)
        result = self.reflection.reflect(bank_id, query, **options)
        if result.memory_ids and self.settings.facts.salience_alpha > 0:
            self.reinforce_cited(bank_id, result.memory_ids)  # cited facts gain salience
        return result

    def merge_background(self, bank_id: str, snippet: str) -> Bank:
        """Merge a biographical snippet into the bank's background (the snippet wins)."""
        return self.reflection.merge_background(bank_id, snippet)

    def wait_background(self) -> None:
        """Wait for the background jobs writes queued (deferred extraction, the tree,
        observations and opinions, mental models): one scheduler, so one wait."""
        self._parts.scheduler.flush()

    # the waits of each kind of job before there was one scheduler
    wait_tree = wait_extraction = wait_curated = wait_background

    # facts and the tree -------------------------------------------------------------------
    def resolve_facts(self, bank_id: str) -> ResolveReport:
        """Resolve conflicts between the bank's slotted facts as ``facts.resolve`` says
        (memlane/facts/service.py). Raises BankNotFound."""
        return self._parts.facts.resolve(bank_id)

    def reinforce_cited(self, bank_id: str, unit_ids: Sequence[str]) -> int:
        """One more citation on each of these memories (memlane/facts/salience.py); how many
        were written."""
        return self._parts.facts.reinforce(bank_id, unit_ids)

    def consolidate(
        self,
        bank_id: str,
        *,
        now: datetime | None = None,
        consolidator: str | None = None,
        progress: Callable[[Level, int], None] | None = None,
    ) -> TreeReport:
        """Consolidate the bank's temporal tree, its facts resolved first (memlane/tree/service.py).
        ``consolidator``: "auto", "rules" or "llm" (default: the settings')."""
        return self._parts.tree.consolidate(bank_id, now=now, consolidator=consolidator, progress=progress)

    def tree(
        self,
        bank_id: str,
        *,
        level: int | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[TreeNode]:
        """The bank's tree nodes (no vectors) by level then start, optionally of one ``level``
        and overlapping the window ``since`` to ``until``. Raises InvalidInput, BankNotFound."""
        return self._parts.tree.tree(bank_id, level=level, since=since, until=until)

    # curated memory: mental models and directives (memlane/curated/) ------------------------
    def put_mental_model(self, bank_id: str, model_id: str, question: str) -> tuple[MentalModel, bool]:
        """Pin ``question`` on the bank as model ``model_id`` and write its answer now; and
        whether it was created (the same question again changes nothing)."""
        return self._parts.curated.put_mental_model(bank_id, model_id, question)

    def get_mental_model(self, bank_id: str, model_id: str) -> MentalModel:
        """One model with its answer and sources. Raises NotFound."""
        return self._parts.curated.get_mental_model(bank_id, model_id)

    def list_mental_models(self, bank_id: str) -> list[MentalModel]:
        """The bank's models by id."""
        return self._parts.curated.list_mental_models(bank_id)

    def delete_mental_model(self, bank_id: str, model_id: str) -> None:
        """Delete one model. Raises NotFound."""
        self._parts.curated.delete_mental_model(bank_id, model_id)

    def refresh_mental_model(self, bank_id: str, model_id: str) -> MentalModel:
        """Recall the model's question again and rewrite its answer. Raises NotFound."""
        return self._parts.curated.refresh_mental_model(bank_id, model_id)

    def refresh_touched(self, bank_id: str) -> list[str]:
        """Refresh every model of the bank that new facts touch; the ids refreshed."""
        return self._parts.curated.refresh_touched(bank_id)

    def put_directive(
        self, bank_id: str, directive_id: str, text: str, tags: Sequence[str] = ()
    ) -> tuple[Directive, bool]:
        """Create or replace directive ``directive_id``; and whether it was created."""
        return self._parts.curated.put_directive(bank_id, directive_id, text, tags)

    def list_directives(self, bank_id: str) -> list[Directive]:
        """The bank's directives by id."""
        return self._parts.curated.list_directives(bank_id)

    def delete_directive(self, bank_id: str, directive_id: str) -> None:
        """Delete one directive. Raises NotFound."""
        self._parts.curated.delete_directive(bank_id, directive_id)

    # invalidation and deletion (memlane/forget.py) ------------------------------------------
    def invalidate(
        self, bank_id: str, unit_id: str, *, superseded_by: str | None = None, at: datetime | None = None
    ) -> None:
        """Mark a unit no longer valid from ``at`` (default now): it stays stored and answers
        ``as_of`` questions about the time before (Engram: invalidate, never delete)."""
        self._parts.forget.invalidate(bank_id, unit_id, superseded_by=superseded_by, at=at)

    def delete_document(self, bank_id: str, document_id: str) -> dict[str, int]:
        """Delete a document's units and chunks, then rebuild the bank's graph and drop entities
        nothing mentions any more. Raises NotFound for a document the bank does not hold."""
        return self._parts.forget.delete_document(bank_id, document_id)

    def delete_memory(self, bank_id: str, unit_id: str) -> dict[str, int]:
        """Delete one memory unit (links to it are pruned, the graph rebuilt, orphaned entities
        dropped). To keep history instead, use :meth:`invalidate`."""
        return self._parts.forget.delete_memory(bank_id, unit_id)

    # reading a bank (memlane/browse.py) ---------------------------------------------------
    def list_memories(
        self,
        bank_id: str,
        *,
        offset: int = 0,
        limit: int = 100,
        types: Sequence[str] | None = None,
        document_id: str | None = None,
        include_invalid: bool = True,
        tags: Sequence[str] | None = None,
        tags_match: str = "any",
        since: datetime | None = None,
        until: datetime | None = None,
        entity_id: str | None = None,
    ) -> tuple[list[MemoryUnit], int]:
        """A page of the bank's memories in id order, and how many match in all. ``tags``
        (``tags_match`` "any" or "all"), the mention window ``since`` (inclusive) to ``until``
        (exclusive) and ``entity_id`` mean what they mean to recall (memlane/units.py)."""
        return self._parts.browse.list_memories(
            bank_id,
            offset=offset,
            limit=limit,
            types=types,
            document_id=document_id,
            include_invalid=include_invalid,
            tags=tags,
            tags_match=tags_match,
            since=since,
            until=until,
            entity_id=entity_id,
        )

    def entity(self, bank_id: str, entity_id: str, *, limit: int = 50) -> dict[str, Any]:
        """An entity with the memories that name it and its neighbours. Raises NotFound."""
        return self._parts.browse.entity(bank_id, entity_id, limit=limit)

    def timeline(self, bank_id: str) -> list[dict[str, Any]]:
        """The bank's sessions over time, from its chunks, by start time."""
        return self._parts.browse.timeline(bank_id)

    def get_memory(self, bank_id: str, unit_id: str) -> MemoryUnit:
        return self._parts.browse.get_memory(bank_id, unit_id)

    def list_documents(self, bank_id: str) -> dict[str, dict[str, int]]:
        """``{document_id: {"units": n, "chunks": m}}`` for the bank."""
        return self._parts.browse.list_documents(bank_id)

    def list_entities(self, bank_id: str) -> list[Entity]:
        return self._parts.browse.list_entities(bank_id)

    def close(self) -> None:
        """Run the queued background jobs, then close the models' clients and the store."""
        self._parts.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
