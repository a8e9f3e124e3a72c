"""TEMPR recall as a chain of stages over one :class:`~memlane.recall.state.RecallState`:

query -> channels (semantic, lexical, temporal side by side; graph after semantic) ->
subqueries -> fuse (RRF) -> fetch -> order (boosts) -> rerank (cross-encoder) -> learn (the
learned ranker, where a model ships) -> spread (sessions) -> pack (token budget) -> tree ->
chunks -> abstain.

Each stage declares what it reads and writes (memlane/recall/stages.py checks the chain when
it is built), and a stage that gates by a score reads the scale it declares
(:class:`~memlane.recall.state.Scores`).
"""

from __future__ import annotations

import copy
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from memlane.interfaces import LLM, Embedder, GraphStore, Reranker, SearchBackend, VectorStore
from memlane.recall.abstain import Abstention
from memlane.recall.channels import CHANNELS, ChannelStage, QueryStage, Searcher, SubqueryStage, ms_since
from memlane.recall.learned import LearnStage
from memlane.recall.packing import pack
from memlane.recall.ranking import FetchStage, FuseStage, OrderStage, PackStage, RerankStage, SpreadStage
from memlane.recall.stages import Stage, TreeStage, check_chain
from memlane.recall.state import RecallState
from memlane.records import Chunk, RecalledMemory, RecallRequest, RecallResult
from memlane.settings import Settings


class TreeGate:
    """The temporal tree after packing (memlane/tree/recall.py): it may drop units by its
    gate, which reads the scores it declares from ``state.scores``, and adds nodes."""

    name = "tree"
    reads = (
        "bank_id",
        "revision",
        "req",
        "embedder",
        "query",
        "memories",
        "scores",
        "vector",
        "interval",
        "reference",
    )
    writes = ("memories", "nodes", "plan")
    timing = None

    def __init__(self, tree: TreeStage, embedder: Embedder) -> None:
        self.tree = tree
        self.embedder = embedder

    def run(self, state: RecallState) -> None:
        assert state.query is not None and state.reference is not None
        start = time.perf_counter()
        embedder, text = state.embedder, state.req.query
        staged = self.tree.apply(
            state.bank_id,
            state.revision,
            state.req,
            state.query,
            state.memories,
            state.scores,
            self.embedder.count_tokens,
            state.vector if state.vector is not None else (lambda: embedder.embed_queries([text])),
            state.interval,
            state.reference,
        )
        if staged is not None:
            state.memories, state.nodes, state.plan = staged
            state.timings["tree"] = ms_since(start)


class Recaller:
    """Runs recall for a bank against the configured backends."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        graph: GraphStore,
        embedder: Embedder,
        reranker: Reranker,
        search: SearchBackend | None = None,
        tree: TreeStage | None = None,
        llm: Callable[[], object | None] = lambda: None,
        gate_llm: Callable[[], LLM | None] | None = None,
    ) -> None:
        """``search`` serves the channels: the in-process DerivedState, or the store itself
        (``search_backend="milvus"``) when None. ``tree`` is the hierarchical stage
        (memlane/tree/recall.py; None: flat only). ``llm`` returns the model that decomposes
        multi-hop questions (None: the rules), built on first use; ``gate_llm`` the
        abstention gate's (default: the reflect role's model, built on first use)."""
        self.settings = settings
        self.store = store
        self.search: SearchBackend = search if search is not None else store
        self.graph = graph
        self.embedder = embedder
        self.reranker = reranker
        self.tree = tree
        self.llm = llm
        self._gate_llm: list[LLM | None] = []  # built once, on the first gated recall
        self.abstention = Abstention(settings.facts, gate_llm or self._reflect_llm)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memlane-recall")
        searcher = Searcher(settings, graph, self._pool)
        stages: list[Stage] = [
            QueryStage(),
            ChannelStage(searcher),
            SubqueryStage(searcher, llm),
            FuseStage(settings),
            FetchStage(settings, reranker),
            OrderStage(settings),
            RerankStage(settings, reranker),
            LearnStage(settings),
            SpreadStage(settings),
            PackStage(embedder, reranker),
        ]
        if tree is not None:
            stages.append(TreeGate(tree, embedder))
        check_chain(stages)
        self.stages = stages
        # Called with each stage's name and the state after it ran (tests, tracing tools).
        self.observer: Callable[[str, RecallState], None] | None = None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _reflect_llm(self) -> LLM | None:
        if not self._gate_llm:
            from memlane.llm import build_llm

            self._gate_llm.append(build_llm(self.settings, "reflect"))
        return self._gate_llm[0]

    def recall(
        self,
        bank_id: str,
        req: RecallRequest,
        revision: str = "",
        search: SearchBackend | None = None,
        embedder: Embedder | None = None,
    ) -> RecallResult:
        """Recall for ``req``; ``revision`` is the bank's revision the caller's derived state
        is at (the tree stage caches the bank's tree by it). ``search`` replaces the configured
        backend for this call (the store, for a bank this process does not hold yet);
        ``embedder`` embeds the query: the bank's (default: the one given at construction)."""
        if search is not None and search is not self.search:
            other = copy.copy(self)  # shares the pool, the models and the stages
            other.search = search
            return other.recall(bank_id, req, revision, embedder=embedder)
        t0 = time.perf_counter()
        state = RecallState(
            bank_id=bank_id,
            req=req,
            revision=revision,
            search=self.search,
            embedder=embedder or self.embedder,
        )
        for stage in self.stages:
            start = time.perf_counter()
            stage.run(state)
            if stage.timing is not None:
                state.timings[stage.timing] = state.timings.get(stage.timing, 0.0) + ms_since(start)
            if self.observer is not None:
                self.observer(stage.name, state)
        result = RecallResult(
            memories=state.memories,
            nodes=state.nodes,
            plan=state.plan,
            tokens=sum(m.tokens for m in state.memories) + sum(n.tokens for n in state.nodes),
            query_interval=state.interval,
        )
        result.subqueries = state.subqueries
        result.channels_missing = state.missing
        if req.include_chunks:
            result.chunks, result.chunk_tokens = self._chunks(bank_id, state.memories, req.max_chunk_tokens)
        if self.settings.facts.abstain != "off":  # does the evidence support an answer? (recall/abstain.py)
            assert state.query is not None and state.flt is not None
            start = time.perf_counter()
            self.abstention.apply(
                state.search,
                bank_id,
                state.query,
                result,
                [state.fields[x.id] for x in state.fused_order],
                state.hits,
                state.flt,
            )
            state.timings["abstain"] = ms_since(start)
        state.timings["total"] = ms_since(t0)
        result.timings_ms = {k: round(v, 2) for k, v in state.timings.items()}
        return result

    def _chunks(self, bank_id: str, memories: list[RecalledMemory], budget: int) -> tuple[list[Chunk], int]:
        ids = list(dict.fromkeys(m.unit.chunk_id for m in memories if m.unit.chunk_id))
        if not ids:
            return [], 0
        by_id = {c.chunk_id: c for c in self.store.get_chunks(bank_id, ids)}
        chunks = [by_id[i] for i in ids if i in by_id]
        counts = self.embedder.count_tokens([c.text for c in chunks])
        kept = pack(counts, budget)
        return [chunks[i] for i in kept], sum(counts[i] for i in kept)


__all__ = ["CHANNELS", "Recaller", "TreeStage"]
