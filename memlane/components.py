"""The engine's parts, built lazily from the settings unless given: the store, the derived
per-bank state, the write path, the models, the retain / recall pipelines and CARA. The facade
(memlane/engine.py) holds the API; this module holds the wiring, so each stays small."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlane.errors import ConfigError
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.derived import DerivedState
    from memlane.recall.pipeline import Recaller
    from memlane.reflect import CARA
    from memlane.retain.pipeline import Retainer
    from memlane.writes import BankWriter


class Components:
    """Builds each backend on first use from ``settings``, unless one is given."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store=None,
        graph=None,
        embedder=None,
        reranker=None,
        extractor=None,
    ) -> None:
        self.settings = settings or Settings()
        self._store, self._graph = store, graph
        self._embedder, self._reranker, self._extractor = embedder, reranker, extractor
        # built on first use by the properties below
        self._retainer: Retainer | None = None
        self._recaller: Recaller | None = None
        self._derived: DerivedState | None = None
        self._writer: BankWriter | None = None
        self._cara: CARA | None = None  # reflect and consolidation (memlane/reflect)
        self._tree_llm: list = []  # [llm or None] once built: the consolidation role's model
        self._tree_worker = None  # background tree consolidation (memlane/tree)
        self._extract_worker = None  # deferred LLM extraction (memlane/retain/deferred.py)

    # backends -----------------------------------------------------------------------------
    @property
    def store(self):
        if self._store is None:
            from memlane.stores.milvus import MilvusStore

            self._store = MilvusStore(self.settings, dim=self.settings.models.embedding_dim)
        return self._store

    @property
    def graph(self):
        if self._graph is None:
            from memlane.stores.sparse_graph import SparseGraphStore

            self._graph = SparseGraphStore(
                temporal_sigma_hours=self.settings.retain.temporal_link_sigma_hours,
                temporal_neighbors=self.settings.retain.temporal_link_neighbors,
            )
        return self._graph

    @property
    def derived(self):
        """Per-bank search indexes and graphs, derived from the store (memlane/derived.py)."""
        if self._derived is None:
            from memlane.derived import DerivedState

            self._derived = DerivedState(
                self.store,
                self.graph,
                self.settings.models.embedding_dim,
                with_index=self.settings.store.search_backend == "memory",
                ann_threshold=self.settings.recall.ann_threshold,
            )
        return self._derived

    @property
    def writer(self) -> BankWriter:
        """The one write path to banks: store, derived state, revision (memlane/writes.py)."""
        if self._writer is None:
            from memlane.facts.service import restore_superseded
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
            )
        return self._writer

    @property
    def embedder(self):
        if self._embedder is None:
            from memlane.models.embedder import build_embedder

            self._embedder = build_embedder(self.settings)
        if self._embedder.dim != self.settings.models.embedding_dim:
            raise ConfigError(
                f"embedder produces {self._embedder.dim}-d vectors but "
                f"MEMLANE_MODELS__EMBEDDING_DIM is {self.settings.models.embedding_dim}"
            )
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
            from memlane.retain.extractors import build_extractor

            self._extractor = build_extractor(self.settings)
        return self._extractor

    @property
    def recaller(self):
        if self._recaller is None:
            from memlane.models.tokens import CachedCounts
            from memlane.recall.pipeline import Recaller
            from memlane.tree.recall import TreeRecall

            derived = self.derived
            embedder = CachedCounts(self.embedder)
            self._recaller = Recaller(
                self.settings,
                self.store,
                self.graph,
                embedder,
                self.reranker,
                derived if derived.with_index else None,
                tree=TreeRecall(self.store, embedder, self.settings, self.tree_llm),
                llm=self.tree_llm,  # multi-hop decomposition: the planner's model
            )
        return self._recaller

    def tree_llm(self):
        """The consolidation role's LLM (the tree's consolidator and planner, recall's
        decomposer), or None."""
        if not self._tree_llm:
            from memlane.llm import build_llm

            self._tree_llm.append(build_llm(self.settings, "consolidation"))
        return self._tree_llm[0]

    def consolidator(self, kind: str | None = None):
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

    def close(self) -> None:
        """Flush CARA's queued jobs, stop the recall pool and close the store."""
        if self._extract_worker is not None:
            self._extract_worker.close()  # deferred extractions first: they queue consolidations
        if self._tree_worker is not None:
            self._tree_worker.close()  # runs queued consolidations first: they write too
        if self._cara is not None:
            self._cara.close()  # runs the queued jobs first: they write to the store
        if self._recaller is not None:
            self._recaller.close()
        if self._derived is not None:
            self._derived.close()  # background loads of cold banks
        if self._store is not None:
            self._store.close()
