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

from memlane.facts.cues import CUES, turn_cues
from memlane.facts.ordering import successors
from memlane.query.analysis import QueryAnalysis
from memlane.query.sayer import asks_said, offers, sayer
from memlane.query.words import content_stems, is_assistant
from memlane.recall.candidates import proximity_scale
from memlane.recall.state import RecallState
from memlane.stored_fields import json_value
from memlane.temporal import proximity
from memlane.units import fields_interval

NAN = float("nan")
DAY_S = 86400.0
CHANNEL_NAMES = ("semantic", "lexical", "graph", "temporal")

_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")
# A capitalised word that does not start a sentence: a name, a place, an organisation.
_INNER_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"hundred|thousand|twins?|dozen)\b",
    re.I,
)
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


def said_by(speaker: str, who: str) -> bool:
    """Whether ``speaker`` is the one :func:`memlane.query.sayer.sayer` names: the assistant,
    the user (any speaker but the assistant) or a person by (first) name."""
    if who == "assistant":
        return is_assistant(speaker)
    if who == "user":
        return bool(speaker) and not is_assistant(speaker)
    low = speaker.casefold()
    return low == who.casefold() or low.split()[:1] == [who.casefold()]


def question_share(text: str) -> float:
    """The share of the text's sentences that are questions (0 for no sentence)."""
    ends = _SENTENCE_END.findall(text.strip() + (" " if text.strip()[-1:].isalnum() else ""))
    if not ends:
        return 0.0
    return sum(1 for e in ends if "?" in e) / len(ends)


def asks_now(query: QueryAnalysis) -> bool:
    """The question asks for the present value: a "now" word, no past cue and no time window."""
    return query.now is not None and not query.past and query.interval is None


def _neighbour(fields: Mapping[str, Any], step: int) -> str:
    """The id of the turn ``step`` places from the memory's first source turn in its session
    ("D3:4" -> "D3:3" for -1), "" when its turn id has no "<session>:<n>" form."""
    turns = fields.get("source_turns") or ()
    if not turns:
        return ""
    session, sep, n = str(turns[0]).rpartition(":")
    return f"{session}:{int(n) + step}" if sep and n.isdigit() else ""


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
    ``p``, ``topic``, ``gate``; absent: no classifier for the bank's embedder)."""
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
    wh = {name: 1.0 if pattern.search(q.text) else 0.0 for name, pattern in _WH.items()}
    signals = slots or {}
    who = sayer(q.text)
    said_q = 1.0 if asks_said(q.text) else 0.0
    by_turn: dict[str, str] = {}
    for c in ids:
        for t in state.fields[c].get("source_turns") or ():
            by_turn.setdefault(str(t), c)

    def newest_first(test) -> dict[str, float]:
        """The candidates a person said that pass ``test`` (on their signals), by time: 0 the
        newest, 1 the oldest."""
        said = [
            c
            for c in ids
            if c in signals and test(signals[c]) and not is_assistant(speaker_of(state.fields[c]))
        ]
        said.sort(key=lambda c: -(when[c] if not math.isnan(when[c]) else -1e18))
        return {c: r / max(1, len(said) - 1) for r, c in enumerate(said)}

    slot_rank = newest_first(lambda s: s.p >= SLOT_STATEMENT)
    topic_rank = newest_first(lambda s: s.topic >= SLOT_STATEMENT and s.gate >= SLOT_STATEMENT)
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
        if q.content:
            row[INDEX["content_overlap"]] = len(q.content & content_stems(said)) / len(q.content)
        row[INDEX["capitals"]] = math.log1p(len(_INNER_CAPITAL.findall(said)))
        row[INDEX["number"]] = 1.0 if _NUMBER.search(said) else 0.0
        if occ is not None and not math.isnan(mentioned):
            row[INDEX["dated"]] = 1.0 if abs(occ[0] - mentioned) > DAY_S else 0.0
        for side, step in (("prev", -1), ("next", 1)):
            other = by_turn.get(_neighbour(f, step))
            if other is not None:
                o_sem = channel.get("semantic", {}).get(other)
                row[INDEX[f"{side}_semantic"]] = o_sem[1] if o_sem is not None else 0.0
                row[INDEX[f"{side}_question"]] = question_share(said_text(state.fields[other]))
                if side == "prev":
                    o_lex = channel.get("lexical", {}).get(other)
                    row[INDEX["prev_lexical"]] = (
                        o_lex[1] / lex_top if o_lex is not None and lex_top > 0 else 0.0
                    )
                    row[INDEX["prev_assistant"]] = (
                        1.0 if is_assistant(speaker_of(state.fields[other])) else 0.0
                    )
        sig = signals.get(c)
        if sig is not None:
            row[INDEX["gate"]] = sig.gate
            if not math.isnan(sig.p):
                row[INDEX["slot_p"]] = sig.p
                row[INDEX["slot_topic"]] = sig.topic
                row[INDEX["slot_statements"]] = math.log1p(len(slot_rank))
                row[INDEX["slot_newest"]] = slot_rank.get(c, NAN)
                row[INDEX["topic_newest"]] = topic_rank.get(c, NAN)
        for name, v in wh.items():
            row[INDEX[name]] = v
        speaker = speaker_of(f)
        row[INDEX["assistant"]] = 1.0 if is_assistant(speaker) else 0.0
        if who is not None:
            row[INDEX["sayer_match"]] = 1.0 if said_by(speaker, who) else 0.0
        row[INDEX["q_asks_said"]] = said_q
        row[INDEX["offers"]] = 1.0 if offers(said) else 0.0
        row[INDEX["question"]] = question_share(said)
        row[INDEX["words"]] = math.log1p(len(said.split()))
        cues = turn_cues(said)
        for j, name in enumerate(CUES):
            row[INDEX[f"cue_{name}"]] = cues[j]
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
