"""Recall's first stages: the query analysed once, the four channels searched (semantic,
lexical, temporal side by side on a small thread pool, the graph after the semantic channel,
whose best hits are its seeds) and multi-hop sub-queries (memlane/recall/decompose.py).

The store's searches and the graph's sparse products release the GIL in FAISS/NumPy, so the
channels overlap.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Callable

from memlane.interfaces import Embedder, GraphStore, Hit, SearchBackend, UnitFilter
from memlane.query.analysis import analyse
from memlane.recall.candidates import proximity_scale
from memlane.recall.decompose import BRIDGE_UNITS, bridge, decompose, merge_channels
from memlane.recall.fusion import fuse
from memlane.recall.state import RecallState
from memlane.records import now_utc
from memlane.settings import BUDGET_DEPTH, Settings
from memlane.temporal import proximity
from memlane.units import fields_interval

CHANNELS = ("semantic", "lexical", "graph", "temporal")
_TIME_FIELDS = ("occurred_start", "occurred_end", "mentioned_at")


def ms_since(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()`` reading)."""
    return (time.perf_counter() - start) * 1000.0


class Searcher:
    """The channels' searches over one backend and with one embedder, both given per call
    (the in-process index, or the store for a bank this process does not hold yet; the bank's
    embedder)."""

    def __init__(self, settings: Settings, graph: GraphStore, pool: ThreadPoolExecutor) -> None:
        self.settings = settings
        self.graph = graph
        self.pool = pool

    def temporal(
        self,
        search: SearchBackend,
        bank_id: str,
        interval: tuple[datetime, datetime],
        depth: int,
        flt: UnitFilter,
    ) -> list[Hit]:
        """Units whose occurrence lies near ``interval``, by proximity, then by the distance of
        their middle to the window's middle."""
        q0, q1 = interval[0].timestamp(), interval[1].timestamp()
        scale = proximity_scale(interval)
        margin = (q1 - q0) / 2 + 86400
        found = search.search_time(
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

    def spread(self, bank_id: str, semantic: list[Hit], depth: int) -> list[Hit]:
        """The graph channel. Seeds keep their own activation and rank beside what they
        activate: leaving them out made the channel vote for the neighbours of the best
        semantic hits but never for those hits themselves, which pushed the right answer down
        in fusion."""
        r = self.settings.recall
        seeds = {h.id: max(h.score, 0.0) for h in semantic[: r.graph_seeds]}
        if not seeds:
            return []
        spread = self.graph.spread(bank_id, seeds, hops=r.graph_hops, decay=r.graph_decay, limit=depth)
        ranked = sorted([*seeds.items(), *spread], key=lambda kv: (-kv[1], kv[0]))[:depth]
        return [Hit(id=i, score=a) for i, a in ranked]

    def lists(
        self,
        search: SearchBackend,
        embedder: Embedder,
        bank_id: str,
        queries: list[str],
        channels: set[str],
        depth: int,
        flt: UnitFilter,
    ) -> list[dict[str, list[Hit]]]:
        """The semantic, lexical and graph lists of each of ``queries`` (one embedding call,
        one dense search for all; the lexical searches on the pool)."""
        lexical = []
        if "lexical" in channels:
            lexical = [self.pool.submit(search.search_lexical, bank_id, q, depth, flt, ()) for q in queries]
        dense: list[list[Hit]] = [[] for _ in queries]
        if channels & {"semantic", "graph"}:
            vectors = embedder.embed_queries(queries)
            dense = search.search_dense(
                bank_id, vectors, depth, flt, (), chunk_prior=self.settings.recall.chunk_prior
            )
        out: list[dict[str, list[Hit]]] = []
        for i in range(len(queries)):
            sub: dict[str, list[Hit]] = {}
            if "semantic" in channels:
                sub["semantic"] = dense[i]
            if lexical:
                sub["lexical"] = lexical[i].result()
            if "graph" in channels:
                sub["graph"] = self.spread(bank_id, dense[i], depth)
            out.append(sub)
        return out


class QueryStage:
    """The query analysed once (every later stage reads the analysis), the validity filter,
    the channels to search and the query's time window."""

    name = "query"
    reads = ("req", "search")
    writes = ("query", "reference", "history", "flt", "channels", "missing", "interval")
    timing = None

    def run(self, state: RecallState) -> None:
        req = state.req
        channels = set(req.channels or CHANNELS)
        state.missing = sorted(channels & {"lexical"}) if not state.search.has_lexical else []
        state.channels = channels - set(state.missing)
        state.reference = req.reference_time or req.as_of or now_utc()
        state.query = analyse(req.query, state.reference)
        q = state.query
        state.history = req.include_history if req.include_history is not None else q.past
        state.flt = UnitFilter(
            fact_types=req.types,
            tags=req.tags,
            tags_match=req.tags_match,
            as_of=req.as_of,
            only_valid=not state.history,
        )
        state.interval = q.interval if "temporal" in state.channels else None


class ChannelStage:
    """The question's own channel lists (timings: embed, semantic, lexical, temporal, graph)."""

    name = "channels"
    reads = ("bank_id", "req", "search", "embedder", "query", "channels", "flt", "interval")
    writes = ("vector", "hits")
    timing = None

    def __init__(self, searcher: Searcher) -> None:
        self.searcher = searcher

    def run(self, state: RecallState) -> None:
        s, searcher, search = self.searcher.settings, self.searcher, state.search
        assert state.flt is not None and state.query is not None  # the query stage's
        t0 = time.perf_counter()
        bank_id, req, flt, channels = state.bank_id, state.req, state.flt, state.channels
        depth = BUDGET_DEPTH[req.budget]
        timings = state.timings
        vector = state.embedder.embed_queries([req.query]) if channels & {"semantic", "graph"} else None
        timings["embed"] = ms_since(t0)

        def timed(name: str, fn: Callable, *args):
            start = time.perf_counter()
            out = fn(*args)
            timings[name] = ms_since(start)
            return out

        futures = {}
        if vector is not None:
            futures["semantic"] = searcher.pool.submit(
                timed,
                "semantic",
                lambda: search.search_dense(
                    bank_id, vector, depth, flt, (), chunk_prior=s.recall.chunk_prior
                )[0],
            )
        if "lexical" in channels:
            futures["lexical"] = searcher.pool.submit(
                timed, "lexical", search.search_lexical, bank_id, state.query.lexical, depth, flt, ()
            )
        if state.interval is not None:
            futures["temporal"] = searcher.pool.submit(
                timed, "temporal", searcher.temporal, search, bank_id, state.interval, depth, flt
            )
        hits: dict[str, list[Hit]] = {name: f.result() for name, f in futures.items()}
        if "graph" in channels:
            hits["graph"] = timed("graph", searcher.spread, bank_id, hits.get("semantic", []), depth)
        if "semantic" not in channels:
            hits.pop("semantic", None)
        state.vector, state.hits = vector, hits


class SubqueryStage:
    """Multi-hop decomposition (memlane/recall/decompose.py): the question's channel lists
    with each sub-query's semantic, lexical and graph lists beside them, and the fusion
    weights (:func:`~memlane.recall.decompose.merge_channels`); not split, the lists and the
    settings' channel weights unchanged (timings: decompose, subqueries).

    A sub-query that bridges from an earlier one ("the city where the person lives" after "the
    person she met in Lisbon") runs second, with the names in that one's best units put in
    (:func:`~memlane.recall.decompose.bridge`). The temporal channel is the question's alone:
    a sub-query's time expression is the question's."""

    name = "subqueries"
    reads = ("bank_id", "req", "search", "embedder", "query", "channels", "flt", "hits")
    writes = ("hits", "weights", "subqueries")
    timing = None

    def __init__(self, searcher: Searcher, llm: Callable[[], object | None]) -> None:
        self.searcher = searcher
        self.llm = llm  # the decomposer's model (None: the rules), built on first use

    def run(self, state: RecallState) -> None:
        s, req = self.searcher.settings, state.req
        assert state.query is not None and state.flt is not None
        start = time.perf_counter()
        split = decompose(state.query, req.decompose or s.recall.decompose, self.llm)
        state.timings["decompose"] = ms_since(start)
        state.weights = dict(s.recall.channel_weights)
        if not split.subqueries:
            return
        start = time.perf_counter()
        depth = BUDGET_DEPTH[req.budget]
        args = (state.search, state.embedder, state.bank_id)
        queries = list(split.subqueries)
        subs: list[dict[str, list]] = [{} for _ in queries]
        first = [i for i in range(len(queries)) if i not in split.bridges]
        for i, sub in zip(
            first, self.searcher.lists(*args, [queries[i] for i in first], state.channels, depth, state.flt)
        ):
            subs[i] = sub
        later = [i for i in range(len(queries)) if i in split.bridges]
        for i in later:
            src, placeholder = split.bridges[i]
            merged, w = merge_channels({}, [subs[src]], s.recall.channel_weights)
            top = [doc for doc, _ in fuse(merged, s.recall.fusion, s.recall.rrf_k, w)[:BRIDGE_UNITS]]
            found = state.search.candidates(state.bank_id, top, state.flt)
            queries[i] = bridge(
                queries[i], placeholder, [found[d]["text"] for d in top if d in found], req.query
            )
        if later:
            for i, sub in zip(
                later,
                self.searcher.lists(*args, [queries[i] for i in later], state.channels, depth, state.flt),
            ):
                subs[i] = sub
        state.timings["subqueries"] = ms_since(start)
        state.hits, state.weights = merge_channels(state.hits, subs, s.recall.channel_weights)
        state.subqueries = queries
