"""TEMPR recall: semantic, lexical, graph and temporal channels -> RRF -> rerank -> boosts ->
greedy packing to the token budget.

Channels run concurrently on a small thread pool: the store's searches and the graph's sparse
products release the GIL in FAISS/NumPy, so they overlap. The graph channel waits for the
semantic one, whose top hits are its seeds.
"""

from __future__ import annotations

import copy
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Callable

from memlane.facts.ordering import order as supersession_order
from memlane.facts.query import current_values_first
from memlane.interfaces import (
    LLM,
    Embedder,
    GraphStore,
    Hit,
    Reranker,
    SearchBackend,
    UnitFilter,
    VectorStore,
)
from memlane.model import Chunk, RecalledMemory, RecalledNode, RecallRequest, RecallResult, now_utc
from memlane.query.analysis import QueryAnalysis, analyse
from memlane.recall.abstain import Abstention
from memlane.recall.candidates import Candidate, proximity_scale, score
from memlane.recall.decompose import BRIDGE_UNITS, bridge, decompose, merge_channels
from memlane.recall.fusion import fuse
from memlane.recall.packing import pack
from memlane.recall.rerank import (
    FALLBACK,
    candidate_text,
    fallback,
    joined,
    newest_among_ties,
    pool,
    rerank_trace,
)
from memlane.recall.stages import TreeStage
from memlane.settings import BUDGET_DEPTH, Settings
from memlane.temporal import proximity
from memlane.units import fields_interval, unit_from_fields

CHANNELS = ("semantic", "lexical", "graph", "temporal")
_TIME_FIELDS = ("occurred_start", "occurred_end", "mentioned_at")


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
        (``search_backend="milvus"``) when None. ``llm`` returns the model that decomposes
        multi-hop questions (None: the rules), built on first use; ``gate_llm`` the
        abstention gate's (default: the reflect role's model, built on first use)."""
        self.settings = settings
        self.store = store
        self.search: SearchBackend = search if search is not None else store
        self.graph = graph
        self.embedder = embedder
        self.reranker = reranker
        self.tree = tree  # the hierarchical stage (memlane/tree/recall.py); None: flat only
        self.llm = llm
        self._gate_llm: list[LLM | None] = []  # built once, on the first gated recall
        self.abstention = Abstention(settings.facts, gate_llm or self._reflect_llm)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memlane-recall")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _reflect_llm(self) -> LLM | None:
        if not self._gate_llm:
            from memlane.llm import build_llm

            self._gate_llm.append(build_llm(self.settings, "reflect"))
        return self._gate_llm[0]

    def recall(
        self, bank_id: str, req: RecallRequest, revision: str = "", search: SearchBackend | None = None
    ) -> RecallResult:
        """Recall for ``req``; ``revision`` is the bank's revision the caller's derived state
        is at (the tree stage caches the bank's tree by it). ``search`` replaces the configured
        backend for this call (the store, for a bank this process does not hold yet)."""
        if search is not None and search is not self.search:
            other = copy.copy(self)  # shares the pool and the models
            other.search = search
            return other.recall(bank_id, req, revision)
        s = self.settings
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        depth = BUDGET_DEPTH[req.budget]
        channels = set(req.channels or CHANNELS)
        missing = sorted(channels & {"lexical"}) if not self.search.has_lexical else []
        channels -= set(missing)
        reference = req.reference_time or req.as_of or now_utc()
        query = analyse(req.query, reference)  # once; every stage below reads it
        history = req.include_history if req.include_history is not None else query.past
        flt = UnitFilter(
            fact_types=req.types,
            tags=req.tags,
            tags_match=req.tags_match,
            as_of=req.as_of,
            only_valid=not history,
        )
        interval = query.interval if "temporal" in channels else None

        vector = self.embedder.embed_queries([req.query]) if channels & {"semantic", "graph"} else None
        timings["embed"] = _ms(t0)

        def timed(name, fn, *args):
            start = time.perf_counter()
            out = fn(*args)
            timings[name] = _ms(start)
            return out

        futures = {}
        if channels & {"semantic", "graph"}:
            assert vector is not None  # embedded above for exactly these channels
            futures["semantic"] = self._pool.submit(
                timed,
                "semantic",
                lambda: self.search.search_dense(
                    bank_id, vector, depth, flt, (), chunk_prior=s.recall.chunk_prior
                )[0],
            )
        if "lexical" in channels:
            futures["lexical"] = self._pool.submit(
                timed, "lexical", self.search.search_lexical, bank_id, req.query, depth, flt, ()
            )
        if interval is not None:
            futures["temporal"] = self._pool.submit(
                timed, "temporal", self._temporal, bank_id, interval, depth, flt
            )
        hits: dict[str, list[Hit]] = {name: f.result() for name, f in futures.items()}
        if "graph" in channels:
            hits["graph"] = timed("graph", self._graph, bank_id, hits.get("semantic", []), depth)
        if "semantic" not in channels:
            hits.pop("semantic", None)

        hits, weights, subqueries = self._with_subqueries(
            bank_id, req, query, channels, depth, flt, hits, timings
        )
        fused = fuse(hits, s.recall.fusion, s.recall.rrf_k, weights)

        # Channels return ids only; fields are read once for the best fused candidates. The
        # store already filtered its channels; graph hits are filtered here.
        start = time.perf_counter()
        n = s.models.reranker_max_candidates
        fields: dict[str, dict[str, Any]] = {}
        for lo in range(0, len(fused), n):  # a second round only when filtering dropped some
            batch = [doc for doc, _ in fused[lo : lo + n]]
            fields.update(self.search.candidates(bank_id, batch, flt))
            if len(fields) >= n or lo >= 2 * n:
                break
        rrf_score = dict(fused)
        cands = [doc for doc, _ in fused if doc in fields][:n]
        # The cross-encoder runs where one is configured and the budget gives it a pool.
        size = s.recall.rerank_size(req.budget) if self.reranker.name != FALLBACK else 0
        head: list[str] = []
        if size:
            missing = [h.id for hs in hits.values() for h in hs[: s.recall.rerank_channel_best]]
            missing = [d for d in dict.fromkeys(missing) if d not in fields]
            if missing:  # a channel's best that fusion ranked below the fetched ones
                fields.update(self.search.candidates(bank_id, missing, flt))
            head = pool([doc for doc, _ in fused if doc in fields], hits, size, s.recall.rerank_channel_best)
        timings["fetch"] = _ms(start)

        start = time.perf_counter()
        # The fused order with the boosts: the answer without a cross-encoder, and what
        # abstention reads (its margins were calibrated on these signals) when one ran.
        fused_order = self._ordered(
            None, score(s, cands, fields, fallback(len(cands)), reference, interval), fields, query, history
        )
        scored = fused_order
        cross: dict[str, float] = {}
        earlier: set[str] = set()
        if head:
            chars = s.recall.rerank_text_chars
            out = self.reranker.rerank(
                req.query, [candidate_text(fields[c], chars) for c in head], list(range(len(head)))
            )
            cross = dict(zip(head, out))
            top = score(s, head, fields, joined(out, s.recall.rerank_weight), reference, interval)
            ranked = [x.id for x in top]
            if s.recall.rerank_current_margin > 0 and not history and interval is None:
                ranked, earlier = newest_among_ties(
                    ranked, cross, fields, s.recall.rerank_current_margin, s.recall.rerank_current_floor
                )
            # The candidates the cross-encoder did not read follow, in the fused order.
            low = [x for x in fused_order if x.id not in cross]
            scored = self._ordered(ranked + [x.id for x in low], top + low, fields, query, history)
        timings["rerank"] = _ms(start)
        cross_rank = {c: r for r, c in enumerate(sorted(cross, key=lambda c: -cross[c]), start=1)}

        ordered = [x.id for x in scored]
        counts = self.embedder.count_tokens([fields[c]["text"] for c in ordered])
        kept = pack(counts, req.max_tokens)
        ranks = {name: {h.id: (r, h.score) for r, h in enumerate(hs, start=1)} for name, hs in hits.items()}
        fused_rank = {doc: r for r, (doc, _) in enumerate(fused, start=1)}
        memories: list[RecalledMemory] = []
        for k in kept:
            x = scored[k]
            c = x.id
            trace = None
            if req.trace:
                trace = {
                    "channels": {
                        name: {"rank": r[c][0], "score": r[c][1]} for name, r in ranks.items() if c in r
                    },
                    "rrf": {"rank": fused_rank[c], "score": rrf_score[c]},
                    "rerank": rerank_trace(
                        c, self.reranker.name, x.rerank, cross, cross_rank, fused_rank[c], c in earlier
                    ),
                    "boosts": {
                        "recency": x.boosts.recency,
                        "temporal": x.boosts.temporal,
                        "proof": x.boosts.proof,
                        "salience": x.boosts.salience,
                    },
                    "final": x.score,
                }
            memories.append(
                RecalledMemory(
                    unit=unit_from_fields(bank_id, c, fields[c]), score=x.score, tokens=counts[k], trace=trace
                )
            )
        nodes: list[RecalledNode] = []
        plan = None
        if self.tree is not None:
            start = time.perf_counter()
            staged = self.tree.apply(
                bank_id,
                revision,
                req,
                query,
                memories,
                self.embedder.count_tokens,
                vector,
                interval,
                reference,
            )
            if staged is not None:
                memories, nodes, plan = staged
                timings["tree"] = _ms(start)
        result = RecallResult(
            memories=memories,
            nodes=nodes,
            plan=plan,
            tokens=sum(m.tokens for m in memories) + sum(n.tokens for n in nodes),
            query_interval=interval,
        )
        result.subqueries = subqueries
        result.channels_missing = missing
        if req.include_chunks:
            result.chunks, result.chunk_tokens = self._chunks(bank_id, memories, req.max_chunk_tokens)
        if s.facts.abstain != "off":  # does the evidence support an answer? (recall/abstain.py)
            start = time.perf_counter()
            self.abstention.apply(
                self.search, bank_id, query, result, [fields[x.id] for x in fused_order], hits, flt
            )
            timings["abstain"] = _ms(start)
        timings["total"] = _ms(t0)
        result.timings_ms = {k: round(v, 2) for k, v in timings.items()}
        return result

    def _ordered(
        self,
        ranking: list[str] | None,
        scored: list[Candidate],
        fields: dict[str, dict[str, Any]],
        query: QueryAnalysis,
        history: bool,
    ) -> list[Candidate]:
        """``scored`` in ``ranking``'s order (None: their own), then Engram's: a superseded or
        possibly superseded fact after its successor (memlane/facts), and the slot asked
        about first."""
        at = {x.id: x for x in scored}
        ranking = supersession_order(ranking or [x.id for x in scored], fields, query, history)
        if self.settings.facts.slot_first and not history:  # "before Leeds" asks for an older value
            ranking = current_values_first(ranking, fields, query)
        return [at[c] for c in ranking]

    def _with_subqueries(
        self,
        bank_id: str,
        req: RecallRequest,
        query: QueryAnalysis,
        channels: set[str],
        depth: int,
        flt: UnitFilter,
        hits: dict[str, list[Hit]],
        timings: dict[str, float],
    ) -> tuple[dict[str, list[Hit]], dict[str, float], list[str]]:
        """Multi-hop decomposition (memlane/recall/decompose.py): the question's channel lists
        with each sub-query's semantic, lexical and graph lists beside them, the fusion weights
        (:func:`~memlane.recall.decompose.merge_channels`) and the sub-queries as recalled.

        A sub-query that bridges from an earlier one ("the city where the person lives" after
        "the person she met in Lisbon") runs second, with the names in that one's best units
        put in (:func:`~memlane.recall.decompose.bridge`). The temporal channel is the
        question's alone: a sub-query's time expression is the question's. Not split: ``hits``
        and the channel weights unchanged."""
        s = self.settings
        start = time.perf_counter()
        split = decompose(query, req.decompose or s.recall.decompose, self.llm)
        timings["decompose"] = _ms(start)
        if not split.subqueries:
            return hits, dict(s.recall.channel_weights), []
        start = time.perf_counter()
        queries = list(split.subqueries)
        subs: list[dict[str, list[Hit]]] = [{} for _ in queries]
        first = [i for i in range(len(queries)) if i not in split.bridges]
        for i, sub in zip(
            first, self._channel_lists(bank_id, [queries[i] for i in first], channels, depth, flt)
        ):
            subs[i] = sub
        later = [i for i in range(len(queries)) if i in split.bridges]
        for i in later:
            src, placeholder = split.bridges[i]
            merged, w = merge_channels({}, [subs[src]], s.recall.channel_weights)
            top = [doc for doc, _ in fuse(merged, s.recall.fusion, s.recall.rrf_k, w)[:BRIDGE_UNITS]]
            found = self.search.candidates(bank_id, top, flt)
            queries[i] = bridge(
                queries[i], placeholder, [found[d]["text"] for d in top if d in found], req.query
            )
        if later:
            for i, sub in zip(
                later, self._channel_lists(bank_id, [queries[i] for i in later], channels, depth, flt)
            ):
                subs[i] = sub
        timings["subqueries"] = _ms(start)
        merged, weights = merge_channels(hits, subs, s.recall.channel_weights)
        return merged, weights, queries

    def _channel_lists(
        self, bank_id: str, queries: list[str], channels: set[str], depth: int, flt: UnitFilter
    ) -> list[dict[str, list[Hit]]]:
        """The semantic, lexical and graph lists of each of ``queries`` (one embedding call,
        one dense search for all; the lexical searches on the pool)."""
        s = self.settings
        lexical = []
        if "lexical" in channels:
            lexical = [
                self._pool.submit(self.search.search_lexical, bank_id, q, depth, flt, ()) for q in queries
            ]
        dense: list[list[Hit]] = [[] for _ in queries]
        if channels & {"semantic", "graph"}:
            vectors = self.embedder.embed_queries(queries)
            dense = self.search.search_dense(
                bank_id, vectors, depth, flt, (), chunk_prior=s.recall.chunk_prior
            )
        out: list[dict[str, list[Hit]]] = []
        for i in range(len(queries)):
            sub: dict[str, list[Hit]] = {}
            if "semantic" in channels:
                sub["semantic"] = dense[i]
            if lexical:
                sub["lexical"] = lexical[i].result()
            if "graph" in channels:
                sub["graph"] = self._graph(bank_id, dense[i], depth)
            out.append(sub)
        return out

    def _temporal(
        self, bank_id: str, interval: tuple[datetime, datetime], depth: int, flt: UnitFilter
    ) -> list[Hit]:
        """Units whose occurrence lies near ``interval``, by proximity, then by the distance of
        their middle to the window's middle."""
        q0, q1 = interval[0].timestamp(), interval[1].timestamp()
        scale = proximity_scale(interval)
        margin = (q1 - q0) / 2 + 86400
        found = self.search.search_time(
            bank_id,
            datetime.fromtimestamp(q0 - margin, interval[0].tzinfo),
            datetime.fromtimestamp(q1 + margin, interval[0].tzinfo),
            depth * 3,
            flt,
            _TIME_FIELDS,
        )
        mid = (q0 + q1) / 2
        gap: dict[str, float] = {}
        for h in found:
            start, end = fields_interval(h.fields) or (mid, mid)
            h.score = proximity(start, end, q0, q1, scale)
            gap.setdefault(h.id, abs((start + end) / 2 - mid))
        found.sort(key=lambda h: (-h.score, gap[h.id], h.id))
        return found[:depth]

    def _graph(self, bank_id: str, semantic: list[Hit], depth: int) -> list[Hit]:
        """Seeds keep their own activation and rank beside what they activate: leaving them
        out made the channel vote for the neighbours of the best semantic hits but never for
        those hits themselves, which pushed the right answer down in fusion."""
        seeds = {h.id: max(h.score, 0.0) for h in semantic[: self.settings.recall.graph_seeds]}
        if not seeds:
            return []
        spread = self.graph.spread(
            bank_id,
            seeds,
            hops=self.settings.recall.graph_hops,
            decay=self.settings.recall.graph_decay,
            limit=depth,
        )
        ranked = sorted([*seeds.items(), *spread], key=lambda kv: (-kv[1], kv[0]))[:depth]
        return [Hit(id=i, score=a) for i, a in ranked]

    def _chunks(self, bank_id: str, memories: list[RecalledMemory], budget: int) -> tuple[list[Chunk], int]:
        ids = list(dict.fromkeys(m.unit.chunk_id for m in memories if m.unit.chunk_id))
        if not ids:
            return [], 0
        by_id = {c.chunk_id: c for c in self.store.get_chunks(bank_id, ids)}
        chunks = [by_id[i] for i in ids if i in by_id]
        counts = self.embedder.count_tokens([c.text for c in chunks])
        kept = pack(counts, budget)
        return [chunks[i] for i in kept], sum(counts[i] for i in kept)


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0


__all__ = ["Recaller", "TreeStage"]
