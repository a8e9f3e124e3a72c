"""The engine facade. Plain Python; the Ray layers wrap it, never the other way round. Each
method delegates to one part, built and wired once in memlane/components.py (with the one
scheduler of what follows a write, memlane/background.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from memlane.components import Components
from memlane.interfaces import Embedder, GraphStore, Reranker
from memlane.records import (
    Bank,
    Disposition,
    Level,
    RecallRequest,
    RecallResult,
    RetainItem,
    Turn,
)
from memlane.retain.items import DocumentPlan
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.background import Scheduler
    from memlane.banks import Banks
    from memlane.browse import Browse
    from memlane.curated.service import CuratedService
    from memlane.derived import DerivedState
    from memlane.facts.service import FactsService
    from memlane.forget import Forget
    from memlane.reflect import ReflectResult, ReflectService
    from memlane.retain.facts import Extractor
    from memlane.retain.pipeline import Retainer
    from memlane.retain.report import RetainReport
    from memlane.stores.milvus import MilvusStore
    from memlane.tree.build import TreeReport
    from memlane.tree.consolidators import Consolidator
    from memlane.tree.service import TreeService
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

    # the services, each a namespace of its operations (the catalogue, memlane/catalogue.py,
    # lists them with their HTTP, MCP, SDK and CLI names) ------------------------------------
    @property
    def banks(self) -> Banks:
        """Create, update, get, list and delete banks; their stats and doctor (memlane/banks.py)."""
        return self._parts.banks

    @property
    def browse(self) -> Browse:
        """Read a bank: memories, documents, entities, the timeline (memlane/browse.py)."""
        return self._parts.browse

    @property
    def forget(self) -> Forget:
        """Invalidate a memory (kept for as-of recall) or delete memories and documents
        (memlane/forget.py)."""
        return self._parts.forget

    @property
    def facts(self) -> FactsService:
        """Resolve conflicting facts and reinforce cited ones (memlane/facts/service.py)."""
        return self._parts.facts

    @property
    def tree(self) -> TreeService:
        """The temporal memory tree: consolidate it, read its nodes (memlane/tree/service.py)."""
        return self._parts.tree

    @property
    def curated(self) -> CuratedService:
        """Mental models and directives (memlane/curated/service.py)."""
        return self._parts.curated

    def create_bank(
        self,
        bank_id: str,
        *,
        name: str | None = None,
        background: str | None = None,
        disposition: Disposition | dict | None = None,
    ) -> Bank:
        """Create a bank, or update the given profile fields of an existing one (the one
        bank call most scripts need; the rest are :attr:`banks`')."""
        return self._parts.banks.create(bank_id, name=name, background=background, disposition=disposition)

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
        batch LLM stage). Returns a :class:`~memlane.retain.report.RetainReport`."""
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
        self.banks.get(bank_id)
        result = self.reflection.reflect(bank_id, query, **options)
        if result.memory_ids and self.settings.facts.salience_alpha > 0:
            self.facts.reinforce(bank_id, result.memory_ids)  # cited facts gain salience
        return result

    def wait_background(self) -> None:
        """Wait for the background jobs writes queued (deferred extraction, the tree,
        observations and opinions, mental models): one scheduler, so one wait."""
        self._parts.scheduler.flush()

    # the temporal tree -----------------------------------------------------------------------
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

    def close(self) -> None:
        """Run the queued background jobs, then close the models' clients and the store."""
        self._parts.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
