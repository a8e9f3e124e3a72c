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

from memlane.facts import salience
from memlane.facts.ordering import history_intent
from memlane.facts.ordering import order as supersession_order
from memlane.facts.query import current_values_first
from memlane.interfaces import (
    Embedder,
    GraphStore,
    Hit,
    Reranker,
    SearchBackend,
    UnitFilter,
    VectorStore,
)
from memlane.model import Chunk, RecalledMemory, RecalledNode, RecallRequest, RecallResult, now_utc
from memlane.recall import boosts
from memlane.recall.decompose import BRIDGE_UNITS, bridge, decompose, merge_channels
from memlane.recall.fusion import fuse
from memlane.recall.packing import pack
from memlane.settings import BUDGET_DEPTH, Settings
from memlane.tree.recall import TreeRecall
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
        tree: TreeRecall | None = None,
        llm: Callable[[], object | None] = lambda: None,
    ) -> None:
        """``search`` serves the channels: the in-process DerivedState, or the store itself
        (``search_backend="milvus"``) when None. ``llm`` returns the model that decomposes
        multi-hop questions (None: the rules), built on first use."""
        self.settings = settings
        self.store = store
        self.search: SearchBackend = search if search is not None else store
        self.graph = graph
        self.embedder = embedder
        self.reranker = reranker
        self.tree = tree  # the hierarchical stage (memlane/tree/recall.py); None: flat only
        self.llm = llm
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memlane-recall")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

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
        from memlane.temporal import proximity, query_interval

        s = self.settings
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        depth = BUDGET_DEPTH[req.budget]
        channels = set(req.channels or CHANNELS)
        history = req.include_history if req.include_history is not None else history_intent(req.query)
        flt = UnitFilter(
            fact_types=req.types,
            tags=req.tags,
            tags_match=req.tags_match,
            as_of=req.as_of,
            only_valid=not history,
        )
        reference = req.reference_time or req.as_of or now_utc()
        interval = query_interval(req.query, reference) if "temporal" in channels else None

        vector = self.embedder.embed([req.query]) if channels & {"semantic", "graph"} else None
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
                timed, "temporal", self._temporal, bank_id, interval, depth, flt, proximity
            )
        hits: dict[str, list[Hit]] = {name: f.result() for name, f in futures.items()}
        if "graph" in channels:
            hits["graph"] = timed("graph", self._graph, bank_id, hits.get("semantic", []), depth)
        if "semantic" not in channels:
            hits.pop("semantic", None)

        hits, weights, subqueries = self._with_subqueries(bank_id, req, channels, depth, flt, hits, timings)
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
        timings["fetch"] = _ms(start)

        start = time.perf_counter()
        texts = [fields[c]["text"] for c in cands]
        rerank = self.reranker.rerank(req.query, texts, list(range(len(cands))))
        timings["rerank"] = _ms(start)

        ref_s = reference.timestamp()
        max_proof = max((fields[c].get("proof_count") or 0 for c in cands), default=0)
        scored = []
        for i, c in enumerate(cands):
            f = fields[c]
            b_rec = boosts.factor(
                s.recall.recency_alpha,
                boosts.recency(f.get("mentioned_at"), ref_s, s.recall.recency_half_life_days),
            )
            b_tmp = 1.0
            occ = fields_interval(f) if interval is not None else None
            if interval is not None and occ is not None:
                occ_s, occ_e = occ
                b_tmp = boosts.factor(
                    s.recall.temporal_alpha,
                    proximity(
                        occ_s, occ_e, interval[0].timestamp(), interval[1].timestamp(), _scale(interval)
                    ),
                )
            b_prf = boosts.factor(s.recall.proof_alpha, boosts.proof(f.get("proof_count"), max_proof))
            b_sal = salience.boost(f, ref_s, s.facts.salience_half_life_days, s.facts.salience_alpha)
            scored.append((rerank[i] * b_rec * b_tmp * b_prf * b_sal, i, (b_rec, b_tmp, b_prf, b_sal)))
        scored.sort(key=lambda x: (-x[0], x[1]))
        # Engram: a superseded or possibly superseded fact after its successor (memlane/facts).
        at = {cands[x[1]]: x for x in scored}
        ranking = supersession_order([cands[x[1]] for x in scored], fields, req.query, history)
        if s.facts.slot_first and not history:  # "before Leeds" asks for an older value
            ranking = current_values_first(ranking, fields, req.query)
        scored = [at[c] for c in ranking]

        ordered = [cands[i] for _, i, _ in scored]
        counts = self.embedder.count_tokens([fields[c]["text"] for c in ordered])
        kept = pack(counts, req.max_tokens)
        ranks = {name: {h.id: (r, h.score) for r, h in enumerate(hs, start=1)} for name, hs in hits.items()}
        fused_rank = {doc: r for r, (doc, _) in enumerate(fused, start=1)}
        memories: list[RecalledMemory] = []
        for k in kept:
            final, i, (b_rec, b_tmp, b_prf, b_sal) = scored[k]
            c = cands[i]
            trace = None
            if req.trace:
                trace = {
                    "channels": {
                        name: {"rank": r[c][0], "score": r[c][1]} for name, r in ranks.items() if c in r
                    },
                    "rrf": {"rank": fused_rank[c], "score": rrf_score[c]},
                    "rerank": {"model": self.reranker.name, "score": rerank[i]},
                    "boosts": {"recency": b_rec, "temporal": b_tmp, "proof": b_prf, "salience": b_sal},
                    "final": final,
                }
            memories.append(
                RecalledMemory(
                    unit=unit_from_fields(bank_id, c, fields[c]), score=final, tokens=counts[k], trace=trace
                )
            )
        nodes: list[RecalledNode] = []
        plan = None
        if self.tree is not None:
            start = time.perf_counter()
            staged = self.tree.apply(
                bank_id, revision, req, memories, self.embedder.count_tokens, vector, interval, reference
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
        if req.include_chunks:
            result.chunks, result.chunk_tokens = self._chunks(bank_id, memories, req.max_chunk_tokens)
        if s.facts.abstain != "off":  # does the evidence support an answer? (recall/abstain.py)
            from memlane.recall import abstain

            start = time.perf_counter()
            abstain.apply(self, bank_id, req, result, [fields[c] for c in ordered], hits, flt)
            timings["abstain"] = _ms(start)
        timings["total"] = _ms(t0)
        result.timings_ms = {k: round(v, 2) for k, v in timings.items()}
        return result

    def _with_subqueries(
        self,
        bank_id: str,
        req: RecallRequest,
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
        split = decompose(req.query, req.decompose or s.recall.decompose, self.llm)
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
            vectors = self.embedder.embed(queries)
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

    def _temporal(self, bank_id, interval, depth, flt, proximity) -> list[Hit]:
        q0, q1 = interval[0].timestamp(), interval[1].timestamp()
        scale = _scale(interval)
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
        for h in found:
            start, end = fields_interval(h.fields) or (mid, mid)
            h.score = proximity(start, end, q0, q1, scale)
            h.fields.setdefault("_mid_gap", abs((start + end) / 2 - mid))
        found.sort(key=lambda h: (-h.score, h.fields.pop("_mid_gap"), h.id))
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


def _scale(interval: tuple[datetime, datetime]) -> float:
    """Proximity decay scale: half the queried period, at least a day."""
    return max(86400.0, (interval[1] - interval[0]).total_seconds() / 2)


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0


__all__ = ["Recaller"]
