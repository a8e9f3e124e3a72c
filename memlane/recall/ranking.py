"""Recall's ranking stages: fusion, the fetch of the best candidates' fields, the fused order
with the boosts, the cross-encoder, and the packing to the token budget.

Every ranked memory leaves the rerank stage with its :class:`~memlane.recall.state.Scores`:
the fused order's score, the cross-encoder's (where it read the memory) and the final one its
place came from. Stages after it read the scale they were tuned on from there.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from memlane.facts.ordering import order as supersession_order
from memlane.facts.query import current_values_first
from memlane.interfaces import Embedder, Reranker
from memlane.recall.answer_form import answer_form_first
from memlane.recall.candidates import Candidate, score
from memlane.recall.exchanges import asked_of, replies_first, sayer_first, turns_of
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
from memlane.recall.state import RecallState, Scores
from memlane.records import RecalledMemory
from memlane.settings import Settings
from memlane.stored_fields import json_value
from memlane.units import unit_from_fields


class FuseStage:
    """The channels' lists fused into one ranking (memlane/recall/fusion.py)."""

    name = "fuse"
    reads = ("hits", "weights")
    writes = ("fused",)
    timing = None

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run(self, state: RecallState) -> None:
        r = self.settings.recall
        state.fused = fuse(state.hits, r.fusion, r.rrf_k, state.weights)


class FetchStage:
    """Channels return ids only: the fields of the best fused candidates are read once (the
    store filtered its channels already; graph hits are filtered here), and the
    cross-encoder's pool is chosen where one runs at the request's budget."""

    name = "fetch"
    reads = ("bank_id", "req", "search", "flt", "hits", "fused")
    writes = ("fields", "candidates", "pool")
    timing = "fetch"

    def __init__(self, settings: Settings, reranker: Reranker) -> None:
        self.settings = settings
        self.reranker = reranker

    def run(self, state: RecallState) -> None:
        s, fused, flt = self.settings, state.fused, state.flt
        assert flt is not None
        n = s.models.reranker_max_candidates
        fields: dict[str, dict[str, Any]] = {}
        for lo in range(0, len(fused), n):  # a second round only when filtering dropped some
            fields.update(state.search.candidates(state.bank_id, [doc for doc, _ in fused[lo : lo + n]], flt))
            if len(fields) >= n or lo >= 2 * n:
                break
        state.candidates = [doc for doc, _ in fused if doc in fields][:n]
        size = s.recall.rerank_size(state.req.budget) if self.reranker.name != FALLBACK else 0
        if size:
            best = s.recall.rerank_channel_best
            missing = [h.id for hs in state.hits.values() for h in hs[:best]]
            missing = [d for d in dict.fromkeys(missing) if d not in fields]
            if missing:  # a channel's best that fusion ranked below the fetched ones
                fields.update(state.search.candidates(state.bank_id, missing, flt))
            state.pool = pool([doc for doc, _ in fused if doc in fields], state.hits, size, best)
        state.fields = fields


class OrderStage:
    """The fused order with the boosts and the facts' ordering: the answer without a
    cross-encoder, and what abstention reads (its margins were calibrated on these scores)."""

    name = "order"
    reads = ("candidates", "fields", "reference", "interval", "query", "history")
    writes = ("fused_order",)
    timing = "rerank"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run(self, state: RecallState) -> None:
        assert state.reference is not None
        cands = state.candidates
        boosted = score(
            self.settings, cands, state.fields, fallback(len(cands)), state.reference, state.interval
        )
        state.fused_order = ordered(self.settings, None, boosted, state)


class RerankStage:
    """The cross-encoder over the pool: its joined score with the boosts orders the pool, the
    current value first among near-ties (memlane/recall/rerank.py), then the candidates it did
    not read in the fused order. Without a pool the fused order is the ranking."""

    name = "rerank"
    reads = ("req", "fields", "pool", "fused_order", "reference", "interval", "query", "history")
    writes = ("ranking", "scores", "cross", "earlier", "moved")
    timing = "rerank"

    def __init__(self, settings: Settings, reranker: Reranker) -> None:
        self.settings = settings
        self.reranker = reranker

    def run(self, state: RecallState) -> None:
        r, head = self.settings.recall, state.pool
        fused = {x.id: x.score for x in state.fused_order}
        if not head:
            state.ranking, state.moved = monotone(state.fused_order)
            state.scores = {c: Scores(fused=v, cross=None, final=v) for c, v in fused.items()}
            return
        assert state.reference is not None
        by_turn = turns_of(state.fields, state.fields)
        asked = {c: asked_of(state.fields[c], state.fields, by_turn) for c in head}
        texts = [
            candidate_text(state.fields[c], r.rerank_text_chars, state.fields.get(asked[c] or ""))
            for c in head
        ]
        out = self.reranker.rerank(state.req.query, texts, list(range(len(head))))
        cross = dict(zip(head, out))
        top = score(
            self.settings, head, state.fields, joined(out, r.rerank_weight), state.reference, state.interval
        )
        ranked = [x.id for x in top]
        if r.rerank_current_margin > 0 and not state.history and state.interval is None:
            ranked, state.earlier = newest_among_ties(
                ranked, cross, state.fields, r.rerank_current_margin, r.rerank_current_floor
            )
        # The candidates the cross-encoder did not read follow in the fused order, their
        # scores scaled under the last one it read (the order is unchanged by the scaling).
        low = [x for x in state.fused_order if x.id not in cross]
        floor = min((x.score for x in top), default=0.0)
        scale = min(1.0, floor / low[0].score) if low and low[0].score > 0 else 1.0
        low = [dataclasses.replace(x, score=x.score * scale) for x in low]
        state.ranking, state.moved = monotone(
            ordered(self.settings, ranked + [x.id for x in low], top + low, state)
        )
        state.cross = cross
        # A pool member among no fused candidates (a channel's best past the fetched ones)
        # has no fused score: 0.0, below every fused candidate.
        state.scores = {
            x.id: Scores(fused=fused.get(x.id, 0.0), cross=cross.get(x.id), final=x.score)
            for x in state.ranking
        }


def session_of(fields: dict[str, Any]) -> str:
    """The session a memory was said in: its document and session id, else its chunk (a run
    of one session's turns)."""
    meta = json_value(fields.get("metadata")) or {}
    session = meta.get("session_id") if isinstance(meta, dict) else None
    if session:
        return f"{fields.get('document_id')}|{session}"
    return str(fields.get("chunk_id") or "")


class SpreadStage:
    """At most ``recall.session_cap`` memories of one session among the first
    ``recall.session_window`` places; a session's further memories move to just after the
    window, in their order (issue 37 item 5: a question whose evidence lies in several sessions
    loses the others when one session's turns fill the top). Reorders, never drops; off at 0."""

    name = "spread"
    reads = ("fields", "ranking")
    writes = ("ranking",)
    timing = None

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run(self, state: RecallState) -> None:
        cap, window = self.settings.recall.session_cap, self.settings.recall.session_window
        if not cap:
            return
        head: list[Candidate] = []
        later: list[Candidate] = []
        seen: dict[str, int] = {}
        for x in state.ranking:
            key = session_of(state.fields[x.id])
            if len(head) < window and seen.get(key, 0) < cap:
                seen[key] = seen.get(key, 0) + 1
                head.append(x)
            else:
                later.append(x)
        state.ranking = head + later


class PackStage:
    """The ranking packed greedily to the request's token budget, with each memory's trace
    (channels, fusion, rerank, boosts, scores) on request."""

    name = "pack"
    reads = (
        "bank_id",
        "req",
        "hits",
        "fused",
        "fields",
        "ranking",
        "scores",
        "cross",
        "earlier",
        "learned",
        "moved",
    )
    writes = ("memories",)
    timing = None

    def __init__(self, embedder: Embedder, reranker: Reranker) -> None:
        self.embedder = embedder
        self.reranker = reranker

    def run(self, state: RecallState) -> None:
        ranking, fields, req = state.ranking, state.fields, state.req
        counts = self.embedder.count_tokens([fields[x.id]["text"] for x in ranking])
        kept = pack(counts, req.max_tokens)
        trace: Callable[[Candidate], dict[str, Any] | None] = lambda x: None  # noqa: E731
        if req.trace:
            trace = _tracer(state, self.reranker.name)
        state.memories = [
            RecalledMemory(
                unit=unit_from_fields(state.bank_id, ranking[k].id, fields[ranking[k].id]),
                score=ranking[k].score,
                tokens=counts[k],
                trace=trace(ranking[k]),
            )
            for k in kept
        ]


def _tracer(state: RecallState, model: str) -> Callable[[Candidate], dict[str, Any]]:
    """Each memory's trace: its rank and score in each channel, fusion, the rerank stage, the
    boosts and its scores on each scale."""
    ranks = {name: {h.id: (r, h.score) for r, h in enumerate(hs, start=1)} for name, hs in state.hits.items()}
    fused_rank = {doc: r for r, (doc, _) in enumerate(state.fused, start=1)}
    rrf_score = dict(state.fused)
    cross = state.cross
    cross_rank = {c: r for r, c in enumerate(sorted(cross, key=lambda c: -cross[c]), start=1)}

    learned_rank = {
        c: r for r, c in enumerate(sorted(state.learned, key=lambda c: -state.learned[c]), start=1)
    }

    def trace(x: Candidate) -> dict[str, Any]:
        c, s = x.id, state.scores[x.id]
        out = {
            "channels": {name: {"rank": r[c][0], "score": r[c][1]} for name, r in ranks.items() if c in r},
            "rrf": {"rank": fused_rank[c], "score": rrf_score[c]},
            "rerank": rerank_trace(c, model, x.rerank, cross, cross_rank, fused_rank[c], c in state.earlier),
            "boosts": {
                "recency": x.boosts.recency,
                "temporal": x.boosts.temporal,
                "proof": x.boosts.proof,
                "salience": x.boosts.salience,
            },
            "scores": {"fused": s.fused, "cross": s.cross, "final": s.final},
            "final": x.score,
        }
        if c in state.learned:
            out["learned"] = {"score": state.learned[c], "rank": learned_rank[c]}
        if c in state.moved:
            out["moved"] = (
                "scored lower to follow the order: an ordering rule put a lower-scored memory "
                "before it (a fact's successor, the asked slot's latest value, a newer near-tie)"
            )
        return out

    return trace


def ordered(
    settings: Settings,
    ranking: list[str] | None,
    scored: list[Candidate],
    state: RecallState,
    *,
    slot_first: bool = True,
) -> list[Candidate]:
    """``scored`` in ``ranking``'s order (None: their own), then Engram's: a superseded or
    possibly superseded fact after its successor (memlane/facts), and (with ``slot_first`` and
    ``facts.slot_first``) the slot asked about first. Reorders, never drops."""
    assert state.query is not None
    at = {x.id: x for x in scored}
    ids = replies_first(ranking or [x.id for x in scored], state.fields)
    ids = answer_form_first(ids, state.fields, state.query.text)
    ids = sayer_first(ids, state.fields, state.query.text)
    ids = supersession_order(ids, state.fields, state.query, state.history)
    if slot_first and settings.facts.slot_first and not state.history:  # "before Leeds": an older value
        when = state.reference.timestamp() if state.reference is not None else None
        ids = current_values_first(ids, state.fields, state.query, when)
    return [at[c] for c in ids]


def monotone(ranking: list[Candidate]) -> tuple[list[Candidate], set[str]]:
    """``ranking`` with one score falling down the list: a memory scored above the one before
    it (an ordering rule put that one first: a superseded fact after its successor, the asked
    slot's latest value first, the newest among near-ties) gets a score just under it. Also
    the ids whose score was lowered so."""
    out: list[Candidate] = []
    moved: set[str] = set()
    for x in ranking:
        if out and x.score > out[-1].score:
            x = dataclasses.replace(x, score=out[-1].score * (1 - 1e-6))
            moved.add(x.id)
        out.append(x)
    return out, moved
