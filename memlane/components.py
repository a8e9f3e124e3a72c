"""The engine's wiring: each part built once, on first use, from the settings unless given (the
store, the derived per-bank state, the write path, the models, the retain / recall pipelines,
CARA and the services of memlane/banks.py, browse.py, facts/, tree/, curated/ and
retain/deferred.py), the one background scheduler, what follows a write, and the one shutdown
order. The facade (memlane/engine.py) holds the API; this module holds the wiring, so each
stays small."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable

from memlane.background import Kind, Scheduler
from memlane.errors import ConfigError
from memlane.interfaces import LLM, Embedder, GraphStore, Reranker
from memlane.records import RecallResult
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.banks import BankEmbedders, Banks
    from memlane.browse import Browse
    from memlane.curated.service import CuratedService
    from memlane.derived import DerivedState
    from memlane.facts.service import FactsService
    from memlane.forget import Forget
    from memlane.recall.pipeline import Recaller
    from memlane.recall.service import RecallService
    from memlane.reflect import ReflectService
    from memlane.retain.deferred import DeferredExtraction
    from memlane.retain.facts import Extractor
    from memlane.retain.pipeline import Retainer
    from memlane.retain.relink import Linker
    from memlane.retain.service import RetainService
    from memlane.stores.milvus import MilvusStore
    from memlane.tree.consolidators import Consolidator
    from memlane.tree.service import TreeService
    from memlane.writes import BankWriter

# recall(bank_id, query, **RecallRequest fields): the engine's Memory.recall
Recall = Callable[..., RecallResult]


class Components:
    """Builds each part on first use from ``settings``, unless one is given."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        recall: Recall,
        store: MilvusStore | None = None,
        graph: GraphStore | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        extractor: Extractor | None = None,
    ) -> None:
        """``recall`` is the facade's (CARA and the mental models answer through it)."""
        self.settings = settings or Settings()
        self.recall = recall
        self._store, self._graph = store, graph
        self._embedder, self._reranker, self._extractor = embedder, reranker, extractor
        # No thread until a job is queued: an engine that only reads starts none.
        self.scheduler = Scheduler(self.settings.background.mode)
        # built on first use by the properties below
        self._embedders: BankEmbedders | None = None
        self._retainer: Retainer | None = None
        self._linker: Linker | None = None
        self._recaller: Recaller | None = None
        self._derived: DerivedState | None = None
        self._writer: BankWriter | None = None
        self._reflection: ReflectService | None = None
        self._tree_llm: list[LLM | None] = []  # [llm or None] once built
        self._banks: Banks | None = None
        self._browse: Browse | None = None
        self._facts: FactsService | None = None
        self._tree: TreeService | None = None
        self._curated: CuratedService | None = None
        self._extraction: DeferredExtraction | None = None
        self._retain: RetainService | None = None
        self._forget: Forget | None = None
        self._recall_service: RecallService | None = None

    # backends -----------------------------------------------------------------------------
    @property
    def store(self) -> MilvusStore:
        if self._store is None:
            from memlane.stores.milvus import MilvusStore

            self._store = MilvusStore(self.settings, dim=self.settings.models.embedding_dim)
        return self._store

    @property
    def graph(self) -> GraphStore:
        if self._graph is None:
            from memlane.stores.sparse_graph import SparseGraphStore

            self._graph = SparseGraphStore(
                temporal_sigma_hours=self.settings.retain.temporal_link_sigma_hours,
                temporal_neighbors=self.settings.retain.temporal_link_neighbors,
            )
        return self._graph

    @property
    def derived(self) -> DerivedState:
        """Per-bank search indexes and graphs, derived from the store (memlane/derived.py)."""
        if self._derived is None:
            from memlane.derived import DerivedState

            self._derived = DerivedState(
                self.store,
                self.graph,
                self.settings.models.embedding_dim,
                with_index=self.settings.store.search_backend == "memory",
                ann_threshold=self.settings.recall.ann_threshold,
                max_bytes=self.settings.recall.state_max_mb * 2**20,
                max_banks=self.settings.recall.state_max_banks,
                context_weight=self.settings.recall.lexical_context_weight,
            )
        return self._derived

    @property
    def writer(self) -> BankWriter:
        """The one write path to banks: store, derived state, revision (memlane/writes.py)."""
        if self._writer is None:
            from memlane.facts.classifier import write_slots
            from memlane.facts.resolver import restore_superseded
            from memlane.leases import BankLeases
            from memlane.reflect.observations import prune_observations
            from memlane.tree.invariants import prune_tree
            from memlane.writes import BankWriter

            store = self.settings.store
            leases = BankLeases(self.store, ttl_s=store.write_lease_ttl_s, timeout_s=store.write_lease_wait_s)
            self._writer = BankWriter(
                self.store,
                self.derived,
                on_delete=[prune_observations, prune_tree, restore_superseded],
                leases=leases,
                relink=self.linker.relink,
                signals=partial(write_slots, self.embedders.writing),
            )
        return self._writer

    @property
    def linker(self) -> Linker:
        """Semantic links, chosen and kept as a function of a bank's units (memlane/retain/relink.py)."""
        if self._linker is None:
            from memlane.retain.relink import Linker

            derived, retain = self.derived, self.settings.retain
            self._linker = Linker(
                derived if derived.with_index else self.store,
                self.store,
                threshold=retain.semantic_link_threshold,
                top_k=retain.semantic_link_top_k,
            )
        return self._linker

    @property
    def embedders(self) -> BankEmbedders:
        """Which embedder each bank reads and writes with (memlane/banks.py)."""
        if self._embedders is None:
            from memlane.banks import BankEmbedders

            given = self._embedder
            if given is not None and given.dim != self.settings.models.embedding_dim:
                raise ConfigError(
                    f"embedder produces {given.dim}-d vectors but "
                    f"MEMLANE_MODELS__EMBEDDING_DIM is {self.settings.models.embedding_dim}"
                )
            self._embedders = BankEmbedders(self.store, self.settings, given)
        return self._embedders

    @property
    def embedder(self) -> Embedder:
        """The embedder of new banks, and the one that counts tokens (loaded on first use)."""
        return self.embedders.default

    @property
    def reranker(self) -> Reranker:
        if self._reranker is None:
            from memlane.models.reranker import build_reranker

            self._reranker = build_reranker(self.settings)
        return self._reranker

    @property
    def extractor(self) -> Extractor:
        if self._extractor is None:
            from memlane.retain.extractors import build_extractor

            self._extractor = build_extractor(self.settings)
        return self._extractor

    def tree_llm(self) -> LLM | None:
        """The consolidation role's LLM (the tree's consolidator and planner, recall's
        decomposer, fact adjudication), or None."""
        if not self._tree_llm:
            from memlane.llm import build_llm

            self._tree_llm.append(build_llm(self.settings, "consolidation"))
        return self._tree_llm[0]

    def consolidator(self, kind: str | None = None) -> Consolidator:
        """The tree consolidator ``kind`` ("auto", "rules", "llm"; default: the settings'):
        the LLM one needs the consolidation role's model (ConfigError naming it otherwise)."""
        from memlane.tree.consolidators import ExtractiveConsolidator, LLMConsolidator

        kind = kind or self.settings.tree.consolidator
        if kind not in ("auto", "rules", "llm"):
            raise ConfigError(f"tree consolidator must be auto, rules or llm, got {kind!r}")
        llm = self.tree_llm() if kind != "rules" else None
        if llm is None:
            if kind == "llm":
                from memlane.llm import not_configured

                raise not_configured("consolidation", "LLM tree consolidation")
            return ExtractiveConsolidator()
        return LLMConsolidator(llm, getattr(llm, "model", "llm"))

    # pipelines ----------------------------------------------------------------------------
    @property
    def recaller(self) -> Recaller:
        if self._recaller is None:
            from memlane.models.tokens import CachedCounts
            from memlane.recall.pipeline import Recaller
            from memlane.tree.recall import TreeRecall

            derived = self.derived
            embedder = CachedCounts(self.embedder)  # the default's: it counts the tokens
            self._recaller = Recaller(
                self.settings,
                self.store,
                self.graph,
                embedder,
                self.reranker,
                derived if derived.with_index else None,
                tree=TreeRecall(self.store, embedder, self.settings, self.tree_llm, budget=derived),
                llm=self.tree_llm,  # multi-hop decomposition: the planner's model
            )
        return self._recaller

    @property
    def retainer(self) -> Retainer:
        if self._retainer is None:
            from memlane.retain.pipeline import Retainer

            self._retainer = Retainer(
                self.settings, self.store, self.derived, self.embedders, self.extractor, self.linker
            )
            if self.reflection.consolidates:
                self._retainer.on_units = self.reflection.units_written
        return self._retainer

    @property
    def reflection(self) -> ReflectService:
        """Reflect, opinions, observations and background merging (memlane/reflect)."""
        if self._reflection is None:
            from memlane.reflect import ReflectService

            self._reflection = ReflectService(
                self.settings,
                self.store,
                self.writer,
                lambda bank_id, texts: self.embedders.for_bank(bank_id).embed(texts),
                self.recall,
                self.scheduler,
            )
        return self._reflection

    # services -----------------------------------------------------------------------------
    @property
    def banks(self) -> Banks:
        if self._banks is None:
            from memlane.banks import Banks

            self._banks = Banks(
                self.store, self.writer, self.derived, self.graph, self.settings, self.embedders
            )
        return self._banks

    @property
    def browse(self) -> Browse:
        if self._browse is None:
            from memlane.browse import Browse

            self._browse = Browse(self.store)
        return self._browse

    @property
    def facts(self) -> FactsService:
        if self._facts is None:
            from memlane.facts.service import FactsService

            self._facts = FactsService(self.settings, self.store, self.writer, self.embedder, self.tree_llm)
        return self._facts

    @property
    def tree(self) -> TreeService:
        if self._tree is None:
            from memlane.tree.service import TreeService

            self._tree = TreeService(
                self.settings, self.store, self.writer, self.embedders, self.consolidator, self.facts
            )
        return self._tree

    @property
    def curated(self) -> CuratedService:
        if self._curated is None:
            from memlane.curated.service import CuratedService

            self._curated = CuratedService(
                self.store, self.embedder, self.recall, self.consolidator, writer=lambda: self.writer
            )
        return self._curated

    @property
    def extraction(self) -> DeferredExtraction:
        if self._extraction is None:
            from memlane.retain.deferred import DeferredExtraction

            self._extraction = DeferredExtraction(
                self.settings, self.store, self.writer, self.retainer, self.scheduler, self.after_retain
            )
        return self._extraction

    @property
    def retain(self) -> RetainService:
        if self._retain is None:
            from memlane.retain.service import RetainService

            self._retain = RetainService(
                self.banks, self.writer, self.retainer, self.extraction, self.after_retain
            )
        return self._retain

    @property
    def forget(self) -> Forget:
        if self._forget is None:
            from memlane.forget import Forget

            self._forget = Forget(self.store, self.writer, self.after_write)
        return self._forget

    @property
    def recall_service(self) -> RecallService:
        if self._recall_service is None:
            from memlane.recall.service import RecallService

            self._recall_service = RecallService(
                self.settings,
                self.store,
                self.derived,
                self.recaller,
                self.curated,
                self.embedders,
                settle=self.settle_facts,
            )
        return self._recall_service

    # what follows a write -----------------------------------------------------------------
    def after_retain(self, bank_id: str) -> None:
        """After a retain: CARA's consolidation of the new facts, then what follows any write."""
        if self._retainer is not None and self._retainer.on_units is not None:
            self.reflection.retained(bank_id)  # observations and opinions: see memlane/reflect/
        self.after_write(bank_id)

    def after_write(self, bank_id: str) -> None:
        """After a retain or a deletion, as ``background`` says: the bank's facts and tree
        (memlane/tree/), then the mental models new facts touch (memlane/curated/); each
        queued once per bank, never blocking the write that asked. The services are built
        when the job runs, so a write that queues nothing builds nothing."""
        background = self.settings.background
        later = {"delay_s": background.delay_s, "max_delay_s": background.max_delay_s}
        if background.tree:
            # The facts job first, on its own: a recall settles it (read-your-writes) without
            # waiting for the tree build too.
            self.scheduler.submit(Kind.facts, bank_id, lambda: self.facts.resolve_quietly(bank_id), **later)
            self.scheduler.submit(Kind.tree, bank_id, lambda: self.tree.consolidate_quietly(bank_id), **later)
        if background.models:
            self.scheduler.submit(Kind.models, bank_id, lambda: self._refresh_models(bank_id), **later)

    def settle_facts(self, bank_id: str) -> float:
        """Wait (at most ``recall.read_your_writes_s``) for the bank's queued fact resolution,
        run at once: the seconds waited (0: nothing was pending)."""
        return self.scheduler.settle(Kind.facts, bank_id, self.settings.recall.read_your_writes_s)

    def _refresh_models(self, bank_id: str) -> None:
        # Most banks hold no model: answered from the store, without building the service
        # (and the embedder it needs) for a deletion.
        if self.store.list_curated("model", bank_id):
            self.curated.refresh_touched(bank_id)

    def close(self) -> None:
        """Run the queued background jobs (they write: in the scheduler's priority order),
        then close CARA's LLM clients, the recall pool, the derived state's loads and the
        store."""
        self.scheduler.close()
        if self._reflection is not None:
            self._reflection.close()
        if self._recaller is not None:
            self._recaller.close()
        if self._derived is not None:
            self._derived.close()  # background loads of cold banks
        if self._store is not None:
            self._store.close()
