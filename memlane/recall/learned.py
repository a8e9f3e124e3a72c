"""The learned ranker: a LightGBM ranking model over the candidates' features
(memlane/recall/features.py), trained on the calibration halves of the three dev sets
(``python -m training.train_ranker``; the figures are in docs/results.md). It replaces the
hand-set join of the fused order, the boosts and the cross-encoder where a model for the
request's budget ships (``memlane/recall/models/ranker-<budget>.txt``) and
``recall.ranker`` is "learned"; otherwise the fused order (and the cross-encoder's join)
ranks, as before.

The model's raw score orders the candidates; the score a memory carries (``Scores.final``)
is that score through a logistic, in (0, 1), so it falls down the list as the order does.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memlane.facts.classifier import FAMILIES, SlotClassifier
from memlane.facts.families import family_of
from memlane.facts.query import fills_asked_slot
from memlane.facts.slot_weights import SlotWeights
from memlane.recall.candidates import Boosts, Candidate
from memlane.recall.features import INDEX, boosts_into, candidate_features
from memlane.recall.ranking import monotone, ordered
from memlane.recall.state import RecallState, Scores
from memlane.recall.trees import Forest
from memlane.settings import Settings

log = logging.getLogger(__name__)

MODELS = Path(__file__).resolve().parent / "models"
# Below 3 candidates the fused order ranks: in a bank of two memories the mid model put the one
# every channel ranked second first ("Where did we go last week?", the June trip matched by the
# temporal channel below the January one). From 3 the model ranks, though it was trained on 8
# and more: on banks of 4-7 turns of the answer sets (a new user's first turns:
# evals/small_banks.py, mid, each source ranked by a model trained without it, 704 questions)
# P@1 0.584 -> 0.728 on the calibration half and 0.578 -> 0.676 on the held half against the
# fused order (held: assistant 0.600 -> 0.829, friends 0.371 -> 0.486, team 0.600 -> 0.680),
# the assistant's question first 31 -> 5 times.
MIN_CANDIDATES = 3


def candidate_ids(state: RecallState) -> list[str]:
    """The candidates the ranker orders: the fetched ones in fused order, then the
    cross-encoder's pool members fusion ranked below them."""
    return [c for c in dict.fromkeys([*state.candidates, *state.pool]) if c in state.fields]


def rows_of(state: RecallState) -> tuple[list[str], np.ndarray, dict[str, dict[str, Any]]]:
    """The candidates, their feature rows and their fields (after the rerank stage)."""
    assert state.query is not None
    ids = candidate_ids(state)
    parts = None
    lexical_parts = getattr(state.search, "lexical_parts", None)
    if lexical_parts is not None and ids:
        parts = lexical_parts(state.bank_id, state.query.lexical, ids)
    at = state.reference.timestamp() if state.reference is not None else None
    fills = {c: fills_asked_slot(state.fields[c], state.query, at) for c in ids}
    X = candidate_features(state, ids, lexical_parts=parts, fills_slot=fills, slots=slot_signals(state, ids))
    boosts_into(X, ids, {x.id: x.boosts for x in state.fused_order})
    return ids, X, state.fields


@dataclass(frozen=True, slots=True)
class SlotSignals:
    """The slot classifier's reading of one candidate (memlane/facts/classifier.py): the
    probability that it states a slot family the question asks about (``p``), that it is about
    one (``topic``, whoever it is about; both NaN when the question asks none) and that it
    states its speaker's own current situation (``gate``, whatever the question)."""

    p: float
    topic: float
    gate: float


def slot_signals(state: RecallState, ids: list[str]) -> dict[str, SlotSignals] | None:
    """Each candidate's :class:`SlotSignals` from the bank embedder's weights over the vectors
    the bank index holds; None when no weights ship for the embedder or the backend keeps no
    vectors (a cold bank answered by the store)."""
    assert state.query is not None
    vectors_of = getattr(state.search, "vectors", None)
    weights = SlotWeights.for_embedder(getattr(state.embedder, "name", ""))
    if vectors_of is None or weights is None or not ids:
        return None
    found = vectors_of(state.bank_id, ids)
    have = [c for c in ids if c in found]
    if not have:
        return None
    texts = [str(state.fields[c].get("text") or "") for c in have]
    vectors = np.stack([found[c] for c in have])
    asked = {family_of(a) for a in state.query.asked_slots}
    cols = [FAMILIES.index(f) for f in sorted(f for f in asked if f is not None)]
    # What depends on the memory alone was stored when it was written (memlane/writes.py); a
    # memory written before that is scored here, and the process's one classifier of the
    # embedder keeps its value-pattern scores (a classifier built per call kept them for that
    # call only: 102 ms of a 247 ms recall p50 on the sample bank, cProfile). Scoring the
    # candidates first seen was 52 of the 62 ms of the LoCoMo recalls at p95 (mid, in
    # process, loaded 2-core machine, Dec 2026).
    classifier = SlotClassifier.for_embedder(weights.embedder) or SlotClassifier(weights)
    stored_of = getattr(state.search, "unit_slots", None)
    stored = stored_of(state.bank_id, have) if stored_of is not None else {}
    mine = [stored.get(c) for c in have]
    if cols:
        gate, probabilities, topics = classifier.signals(texts, vectors, mine)
        p = probabilities[:, cols].max(axis=1)
        topic = topics[:, cols].max(axis=1)
    else:
        gate = classifier.gates(texts, vectors, mine)
        p = topic = np.full(len(have), np.nan)
    return {c: SlotSignals(float(p[i]), float(topic[i]), float(gate[i])) for i, c in enumerate(have)}


class RankerModel:
    """One LightGBM model file, loaded once and scored with numpy (memlane/recall/trees.py:
    importing lightgbm imports scikit-learn and SciPy, about 1 s of a CLI call)."""

    _lock = threading.Lock()
    _loaded: dict[Path, RankerModel | None] = {}

    def __init__(self, path: Path) -> None:
        self.path = path
        self.forest = Forest.load(path)
        # A model reads its own features by name, so features added to
        # memlane/recall/features.py leave a model trained before them valid.
        unknown = [n for n in self.forest.feature_names if n not in INDEX]
        if unknown:
            raise ValueError(
                f"{path.name} was trained on other features than memlane/recall/features.py's: {unknown[:3]}"
            )
        self.columns = np.array([INDEX[n] for n in self.forest.feature_names], dtype=np.intp)

    @classmethod
    def for_budget(cls, budget: str, directory: Path | None = None) -> RankerModel | None:
        """The model of ``budget`` in ``directory`` (default: the shipped ones; None when none
        ships, or the file was trained on other features or holds trees trees.py cannot score)."""
        path = (directory or MODELS) / f"ranker-{budget}.txt"
        with cls._lock:
            if path not in cls._loaded:
                try:
                    cls._loaded[path] = cls(path) if path.exists() else None
                except ValueError as exc:  # a model of other features: the fused order ranks
                    log.warning("learned ranker not used: %s", exc)
                    cls._loaded[path] = None
            return cls._loaded[path]

    def scores(self, X: np.ndarray) -> np.ndarray:
        """The model's raw scores (higher: ranked first)."""
        return self.forest.scores(X[:, self.columns])


def logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, x))))


def ranked(ids: Sequence[str], raw: np.ndarray) -> list[tuple[str, float]]:
    """``(id, final score)`` best first: by raw score, ties in candidate order."""
    order = sorted(range(len(ids)), key=lambda i: (-raw[i], i))
    return [(ids[i], logistic(float(raw[i]))) for i in order]


class LearnStage:
    """The learned ranker over the candidates, where a model for the request's budget ships and
    ``recall.ranker`` is "learned": its order replaces the rerank stage's, then Engram's
    ordering rules (a superseded fact after its successor: memlane/recall/ranking.py
    ``ordered``) apply, and :func:`~memlane.recall.ranking.monotone` keeps the list's one
    score falling as the list does."""

    name = "learn"
    reads = (
        "bank_id",
        "req",
        "search",
        "query",
        "reference",
        "history",
        "interval",
        "hits",
        "fused",
        "fields",
        "candidates",
        "pool",
        "fused_order",
        "ranking",
        "scores",
        "cross",
    )
    writes = ("ranking", "scores", "learned", "moved")
    timing = "rerank"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run(self, state: RecallState) -> None:
        if self.settings.recall.ranker != "learned":
            return
        model = RankerModel.for_budget(state.req.budget, self.settings.recall.ranker_models)
        if model is None:
            return
        if len(candidate_ids(state)) < MIN_CANDIDATES:
            return
        ids, X, _ = rows_of(state)
        raw = model.scores(X)
        state.learned = {c: float(r) for c, r in zip(ids, raw)}
        boosts = {x.id: x.boosts for x in state.fused_order}
        neutral = Boosts(1.0, 1.0, 1.0, 1.0)
        scored = [
            Candidate(c, i, float(raw[i]), boosts.get(c, neutral), logistic(float(raw[i])))
            for i, c in enumerate(ids)
        ]
        scored.sort(key=lambda x: (-x.score, x.rank))
        # The asked slot's latest value first is not applied over the model: it reads the
        # same signals (fills_asked_slot, slot_newest) and a newer value the rules missed
        # ("Keys to the Matosinhos place came") lost to an older one they caught. On the answer
        # set's calibration half, with a model trained without it: P@1 0.646 with the rule,
        # 0.696 without ("now" questions 0.543 -> 0.686). A superseded fact still follows
        # its successor.
        state.ranking, state.moved = monotone(ordered(self.settings, None, scored, state, slot_first=False))
        old = state.scores
        state.scores = {
            x.id: Scores(
                fused=old[x.id].fused if x.id in old else 0.0,
                cross=state.cross.get(x.id),
                final=x.score,
            )
            for x in state.ranking
        }
