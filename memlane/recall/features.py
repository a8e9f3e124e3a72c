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

from memlane.facts.ordering import successors
from memlane.query.analysis import QueryAnalysis
from memlane.query.words import is_assistant
from memlane.recall.candidates import proximity_scale
from memlane.recall.state import RecallState
from memlane.stored_fields import json_value
from memlane.temporal import proximity
from memlane.units import fields_interval

NAN = float("nan")
DAY_S = 86400.0
CHANNEL_NAMES = ("semantic", "lexical", "graph", "temporal")

_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")

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
    # speaker and form
    "assistant",
    "question",
    "words",
    # slots and supersession
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
)
INDEX = {name: i for i, name in enumerate(FEATURES)}


def speaker_of(fields: Mapping[str, Any]) -> str:
    meta = json_value(fields.get("metadata")) or {}
    return str(meta.get("speaker") or "") if isinstance(meta, dict) else ""


def said_text(fields: Mapping[str, Any]) -> str:
    """The memory's text without the ``"Speaker: "`` the turn's text starts with."""
    text = str(fields.get("text") or "")
    speaker = speaker_of(fields)
    if speaker and text.startswith(f"{speaker}: "):
        return text[len(speaker) + 2 :]
    return text


def question_share(text: str) -> float:
    """The share of the text's sentences that are questions (0 for no sentence)."""
    ends = _SENTENCE_END.findall(text.strip() + (" " if text.strip()[-1:].isalnum() else ""))
    if not ends:
        return 0.0
    return sum(1 for e in ends if "?" in e) / len(ends)


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
) -> np.ndarray:
    """The feature rows (len(ids) x len(FEATURES)) of ``ids``, candidates of ``state`` whose
    fields were fetched. ``lexical_parts``: each id's BM25 of text and context (the bank index
    gives them; absent: NaN); ``fills_slot``: whether each fills the slot the question asks."""
    assert state.query is not None and state.reference is not None
    q = state.query
    ref = state.reference.timestamp()
    X = np.full((len(ids), len(FEATURES)), NAN, dtype=np.float64)
    rrf = dict(state.fused)
    fused_rank = {doc: r for r, (doc, _) in enumerate(state.fused, start=1)}
    channel = {
        name: {h.id: (r, h.score) for r, h in enumerate(hs, start=1)} for name, hs in state.hits.items()
    }
    lex_top = max((h.score for h in state.hits.get("lexical", [])[:1]), default=0.0)
    cross = state.cross
    cross_rank = {c: r for r, c in enumerate(sorted(cross, key=lambda c: -cross[c]), start=1)}
    when = {c: float(state.fields[c].get("mentioned_at") or NAN) for c in ids}
    order = sorted(ids, key=lambda c: -(when[c] if not math.isnan(when[c]) else -1e18))
    newest = {c: r for r, c in enumerate(order)}
    parts = lexical_parts or {}
    text_top = max((p[0] for p in parts.values()), default=0.0)
    now = asks_now(q)
    q_words = len(q.text.split())
    for i, c in enumerate(ids):
        f = state.fields[c]
        row = X[i]
        row[INDEX["rrf"]] = rrf.get(c, 0.0)
        row[INDEX["fused_rank"]] = _log_rank(fused_rank.get(c))
        for name in CHANNEL_NAMES:
            got = channel.get(name, {}).get(c)
            if got is not None:
                row[INDEX[f"{name}_rank"]] = math.log1p(got[0])
                score = got[1] / lex_top if name == "lexical" and lex_top > 0 else got[1]
                row[INDEX[f"{name}_score"]] = score
        if c in parts:
            t, x = parts[c]
            row[INDEX["lex_text"]] = t / text_top if text_top > 0 else 0.0
            row[INDEX["lex_context"]] = x / text_top if text_top > 0 else 0.0
        if c in cross:
            row[INDEX["cross"]] = cross[c]
            row[INDEX["cross_rank"]] = math.log1p(cross_rank[c])
        mentioned = when[c]
        if not math.isnan(mentioned):
            age = (ref - mentioned) / DAY_S
            row[INDEX["age_days"]] = math.copysign(math.log1p(abs(age)), age)
        occ = fields_interval(f)
        row[INDEX["future"]] = 1.0 if occ is not None and occ[0] > ref + DAY_S else 0.0
        row[INDEX["newest_rank"]] = newest[c] / max(1, len(ids) - 1)
        if state.interval is not None and occ is not None:
            q0, q1 = state.interval[0].timestamp(), state.interval[1].timestamp()
            row[INDEX["temporal_overlap"]] = proximity(
                occ[0], occ[1], q0, q1, proximity_scale(state.interval)
            )
        said = said_text(f)
        row[INDEX["assistant"]] = 1.0 if is_assistant(speaker_of(f)) else 0.0
        row[INDEX["question"]] = question_share(said)
        row[INDEX["words"]] = math.log1p(len(said.split()))
        if fills_slot is not None:
            row[INDEX["fills_asked_slot"]] = 1.0 if fills_slot.get(c) else 0.0
        row[INDEX["superseded"]] = 1.0 if any(k == "superseded" for k, _, _ in successors(f, q)) else 0.0
        row[INDEX["q_interval"]] = 1.0 if state.interval is not None else 0.0
        row[INDEX["q_past"]] = 1.0 if q.past else 0.0
        row[INDEX["q_now"]] = 1.0 if now else 0.0
        row[INDEX["q_aggregate"]] = 1.0 if q.aggregate else 0.0
        row[INDEX["q_first_person"]] = 1.0 if q.first_person else 0.0
        row[INDEX["q_slot"]] = 1.0 if q.asked_slots else 0.0
        row[INDEX["q_words"]] = math.log1p(q_words)
        if q.names:
            low = said.casefold()
            row[INDEX["q_names_in_text"]] = sum(1 for n in q.names if n.casefold() in low) / len(q.names)
    return X


def boosts_into(X: np.ndarray, ids: Sequence[str], boosts: Mapping[str, Any]) -> None:
    """Write the proof and salience boosts the fused order computed (``boosts``: id ->
    :class:`~memlane.recall.candidates.Boosts`) into the rows of ``X``."""
    for i, c in enumerate(ids):
        b = boosts.get(c)
        if b is not None:
            X[i, INDEX["boost_proof"]] = b.proof
            X[i, INDEX["boost_salience"]] = b.salience
