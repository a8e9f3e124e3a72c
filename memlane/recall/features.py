"""What the learned ranker reads about each candidate: the figures recall's stages already
computed (each channel's rank and score, fusion, the cross-encoder), the memory's time against
the reference, its speaker and form, its time against the question's window, and the
question's own cues. One row per candidate, :data:`FEATURES` in order; a figure a recall does
not have (no cross-encoder at this budget, no time window in the question) is NaN, which the
ranker reads as missing.

The same function builds the training rows (evals/ranker_data.py) and the rows ranked online
(memlane/recall/learned.py), so the model never sees figures computed two ways.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

import numpy as np

from memlane.facts.cues import CUES
from memlane.facts.ordering import successors
from memlane.query.analysis import QueryAnalysis
from memlane.query.sayer import asks_said, sayer
from memlane.recall.candidates import proximity_scale
from memlane.recall.exchanges import neighbour, said_by
from memlane.recall.state import RecallState
from memlane.recall.traits import TRAIT_FEATURES, question_share, said_text, speaker_of, traits_of
from memlane.temporal import proximity
from memlane.units import fields_interval

# what memlane/recall/ranking.py reads of a memory's speaker and form (their home: traits.py)
__all__ = [
    "FEATURES",
    "INDEX",
    "boosts_into",
    "candidate_features",
    "question_share",
    "said_by",
    "said_text",
    "speaker_of",
]

NAN = float("nan")
DAY_S = 86400.0
CHANNEL_NAMES = ("semantic", "lexical", "graph", "temporal")

_WH = {
    "q_when": re.compile(r"\b(?:when|what date|what day|what time|how long ago)\b", re.I),
    "q_where": re.compile(r"\bwhere\b", re.I),
    "q_who": re.compile(r"\b(?:who|whom|whose)\b", re.I),
    "q_how_many": re.compile(r"\b(?:how many|how much|how often)\b", re.I),
}
# Slot statements: a candidate counts as stating the asked slot from this classifier
# probability (memlane/facts/classifier.py's recall interface, calibrated at 0.5: precision
# 0.936 / recall 0.662 on the statement set's calibration half, bge-small).
SLOT_STATEMENT = 0.5

FEATURES = (
    # fusion
    "rrf",
    "fused_rank",
    # the channels: log(1 + rank) (NaN: the channel did not return it) and its score there
    *(f"{c}_rank" for c in CHANNEL_NAMES),
    "semantic_score",
    "lexical_score",
    "graph_score",
    "temporal_score",
    # BM25 of the text and of the context (the neighbouring turns), over the best text score
    "lex_text",
    "lex_context",
    # the cross-encoder (NaN where it did not read the memory)
    "cross",
    "cross_rank",
    # time
    "age_days",
    "future",
    "newest_rank",
    "temporal_overlap",
    # speaker and form: the share of its sentences that show each cue of memlane/facts/cues.py
    # (first person, another person, a question, a plan, a past state, a change ...)
    "assistant",
    "question",
    "words",
    *(f"cue_{c}" for c in CUES),
    # what the memory says: the question's content words in its own text, names and numbers
    "content_overlap",
    "capitals",
    "number",
    "dated",
    # the turn before it and after it in the conversation, where fetched among the candidates:
    # a short reply answers the question asked just before it ("Which engine?" "Godot.")
    "prev_semantic",
    "prev_lexical",
    "prev_question",
    "prev_assistant",
    "next_semantic",
    "next_question",
    # slots and supersession: the slot classifier's probability that it states the asked
    # slot's current value for its speaker, its place by time among the candidates that do
    # (0: the newest), and the facts resolution stored
    "slot_p",
    "slot_newest",
    "slot_statements",
    "slot_topic",
    "topic_newest",
    "gate",
    "fills_asked_slot",
    "superseded",
    "boost_proof",
    "boost_salience",
    # the question
    "q_interval",
    "q_past",
    "q_now",
    "q_aggregate",
    "q_first_person",
    "q_slot",
    "q_words",
    "q_names_in_text",
    "q_when",
    "q_where",
    "q_who",
    "q_how_many",
    # whom the question asks about as the one who said it (memlane/query/sayer.py) against the
    # memory's speaker (1: the one asked about, 0: another, NaN: the question names no sayer);
    # whether it asks about something said at all; whether the memory puts something forward
    "sayer_match",
    "q_asks_said",
    "offers",
)
INDEX = {name: i for i, name in enumerate(FEATURES)}
_TRAIT_COLUMNS = [INDEX[n] for n in TRAIT_FEATURES]
_QUESTION_FEATURES = (
    *_WH,
    "q_asks_said",
    "q_interval",
    "q_past",
    "q_now",
    "q_aggregate",
    "q_first_person",
    "q_slot",
    "q_words",
)
_QUESTION_COLUMNS = [INDEX[n] for n in _QUESTION_FEATURES]


def asks_now(query: QueryAnalysis) -> bool:
    """The question asks for the present value: a "now" word, no past cue and no time window."""
    return query.now is not None and not query.past and query.interval is None


def _log_rank(rank: int | None) -> float:
    return NAN if rank is None else math.log1p(rank)


def candidate_features(
    state: RecallState,
    ids: Sequence[str],
    *,
    lexical_parts: Mapping[str, tuple[float, float]] | None = None,
    fills_slot: Mapping[str, bool] | None = None,
    slots: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """The feature rows (len(ids) x len(FEATURES)) of ``ids``, candidates of ``state`` whose
    fields were fetched. ``lexical_parts``: each id's BM25 of text and context (the bank index
    gives them; absent: NaN); ``fills_slot``: whether each fills the slot the question asks;
    ``slots``: the slot classifier's signals per id (memlane/recall/learned.py SlotSignals:
    ``p``, ``topic``, ``gate``; absent: no classifier for the bank's embedder).

    Column by column: what a memory says whatever the question comes from its kept
    :class:`~memlane.recall.traits.Traits`, the question's own figures are one value for every
    row, and the rest is one list per column (the same expressions a loop per candidate wrote
    before, so the same figures to the last bit)."""
    assert state.query is not None and state.reference is not None
    q = state.query
    ref = state.reference.timestamp()
    X = np.full((len(ids), len(FEATURES)), NAN, dtype=np.float64)
    if not ids:
        return X
    rows = range(len(ids))
    fields = [state.fields[c] for c in ids]
    mine = [traits_of(f) for f in fields]
    X[:, _TRAIT_COLUMNS] = np.stack([t.row for t in mine])
    X[:, _QUESTION_COLUMNS] = _question_row(state)

    def put(name: str, at: Sequence[int], values: Sequence[float]) -> None:
        if len(at):
            X[at, INDEX[name]] = values

    def every(name: str, values: Sequence[float]) -> None:
        X[:, INDEX[name]] = values

    # fusion and the channels
    rrf = dict(state.fused)
    fused_rank = {doc: r for r, (doc, _) in enumerate(state.fused, start=1)}
    every("rrf", [rrf.get(c, 0.0) for c in ids])
    every("fused_rank", [_log_rank(fused_rank.get(c)) for c in ids])
    channel = {
        name: {h.id: (r, h.score) for r, h in enumerate(hs, start=1)} for name, hs in state.hits.items()
    }
    lex_top = max((h.score for h in state.hits.get("lexical", [])[:1]), default=0.0)
    for name in CHANNEL_NAMES:
        got = channel.get(name, {})
        at = [i for i in rows if ids[i] in got]
        put(f"{name}_rank", at, [math.log1p(got[ids[i]][0]) for i in at])
        scale = name == "lexical" and lex_top > 0
        put(f"{name}_score", at, [got[ids[i]][1] / lex_top if scale else got[ids[i]][1] for i in at])
    parts = lexical_parts or {}
    text_top = max((p[0] for p in parts.values()), default=0.0)
    at = [i for i in rows if ids[i] in parts]
    put("lex_text", at, [parts[ids[i]][0] / text_top if text_top > 0 else 0.0 for i in at])
    put("lex_context", at, [parts[ids[i]][1] / text_top if text_top > 0 else 0.0 for i in at])
    cross = state.cross
    cross_rank = {c: r for r, c in enumerate(sorted(cross, key=lambda c: -cross[c]), start=1)}
    at = [i for i in rows if ids[i] in cross]
    put("cross", at, [cross[ids[i]] for i in at])
    put("cross_rank", at, [math.log1p(cross_rank[ids[i]]) for i in at])

    # time
    when = {c: float(f.get("mentioned_at") or NAN) for c, f in zip(ids, fields)}
    mentioned = [when[c] for c in ids]
    order = sorted(ids, key=lambda c: -(when[c] if not math.isnan(when[c]) else -1e18))
    newest = {c: r for r, c in enumerate(order)}
    known = [i for i in rows if not math.isnan(mentioned[i])]
    ages = [(ref - mentioned[i]) / DAY_S for i in known]
    put("age_days", known, [math.copysign(math.log1p(abs(age)), age) for age in ages])
    occ = [fields_interval(f) for f in fields]
    every("future", [1.0 if o is not None and o[0] > ref + DAY_S else 0.0 for o in occ])
    every("newest_rank", [newest[c] / max(1, len(ids) - 1) for c in ids])
    timed = [(i, o) for i, o in enumerate(occ) if o is not None]
    if state.interval is not None:
        q0, q1 = state.interval[0].timestamp(), state.interval[1].timestamp()
        near = proximity_scale(state.interval)
        put(
            "temporal_overlap", [i for i, _ in timed], [proximity(o[0], o[1], q0, q1, near) for _, o in timed]
        )
    both = [(i, o) for i, o in timed if not math.isnan(mentioned[i])]
    put("dated", [i for i, _ in both], [1.0 if abs(o[0] - mentioned[i]) > DAY_S else 0.0 for i, o in both])

    # what it says, against the question
    if q.content:
        every("content_overlap", [len(q.content & t.stems) / len(q.content) for t in mine])
    if q.names:
        names = [n.casefold() for n in q.names]
        every("q_names_in_text", [sum(1 for n in names if n in t.folded) / len(q.names) for t in mine])
    who = sayer(q.text)
    if who is not None:
        every("sayer_match", [1.0 if said_by(t.speaker, who) else 0.0 for t in mine])
    if fills_slot is not None:
        every("fills_asked_slot", [1.0 if fills_slot.get(c) else 0.0 for c in ids])
    every(
        "superseded",
        [1.0 if any(k == "superseded" for k, _, _ in successors(f, q)) else 0.0 for f in fields],
    )

    # the turns before and after it, where among the candidates
    by_turn: dict[str, str] = {}
    for c, f in zip(ids, fields):
        for turn in f.get("source_turns") or ():
            by_turn.setdefault(str(turn), c)
    semantic = channel.get("semantic", {})
    lexical = channel.get("lexical", {})
    for side, step in (("prev", -1), ("next", 1)):
        others = [by_turn.get(neighbour(f, step)) for f in fields]
        at = [i for i, o in enumerate(others) if o is not None]
        there = [o for o in others if o is not None]
        put(f"{side}_semantic", at, [semantic[o][1] if o in semantic else 0.0 for o in there])
        near_traits = [traits_of(state.fields[o]) for o in there]
        put(f"{side}_question", at, [t.question for t in near_traits])
        if side == "prev":
            put(
                "prev_lexical",
                at,
                [lexical[o][1] / lex_top if o in lexical and lex_top > 0 else 0.0 for o in there],
            )
            put("prev_assistant", at, [1.0 if t.assistant else 0.0 for t in near_traits])

    # the slot classifier's signals
    signals = slots or {}
    person = {c: not t.assistant for c, t in zip(ids, mine)}

    def newest_first(test) -> dict[str, float]:
        """The candidates a person said that pass ``test`` (on their signals), by time: 0 the
        newest, 1 the oldest."""
        said = [c for c in ids if c in signals and test(signals[c]) and person[c]]
        said.sort(key=lambda c: -(when[c] if not math.isnan(when[c]) else -1e18))
        return {c: r / max(1, len(said) - 1) for r, c in enumerate(said)}

    if signals:
        slot_rank = newest_first(lambda s: s.p >= SLOT_STATEMENT)
        topic_rank = newest_first(lambda s: s.topic >= SLOT_STATEMENT and s.gate >= SLOT_STATEMENT)
        at = [i for i in rows if ids[i] in signals]
        put("gate", at, [signals[ids[i]].gate for i in at])
        at = [i for i in at if not math.isnan(signals[ids[i]].p)]
        put("slot_p", at, [signals[ids[i]].p for i in at])
        put("slot_topic", at, [signals[ids[i]].topic for i in at])
        put("slot_statements", at, [math.log1p(len(slot_rank))] * len(at))
        put("slot_newest", at, [slot_rank.get(ids[i], NAN) for i in at])
        put("topic_newest", at, [topic_rank.get(ids[i], NAN) for i in at])
    return X


def _question_row(state: RecallState) -> list[float]:
    """The question's own figures, :data:`_QUESTION_FEATURES` order."""
    assert state.query is not None
    q = state.query
    return [
        *(1.0 if pattern.search(q.text) else 0.0 for pattern in _WH.values()),
        1.0 if asks_said(q.text) else 0.0,
        1.0 if state.interval is not None else 0.0,
        1.0 if q.past else 0.0,
        1.0 if asks_now(q) else 0.0,
        1.0 if q.aggregate else 0.0,
        1.0 if q.first_person else 0.0,
        1.0 if q.asked_slots else 0.0,
        math.log1p(len(q.text.split())),
    ]


def boosts_into(X: np.ndarray, ids: Sequence[str], boosts: Mapping[str, Any]) -> None:
    """Write the proof and salience boosts the fused order computed (``boosts``: id ->
    :class:`~memlane.recall.candidates.Boosts`) into the rows of ``X``."""
    for i, c in enumerate(ids):
        b = boosts.get(c)
        if b is not None:
            X[i, INDEX["boost_proof"]] = b.proof
            X[i, INDEX["boost_salience"]] = b.salience
