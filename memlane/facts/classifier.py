"""The learned slot classifier, as recall reads it: per turn, the probability that it states the
speaker's own current value of each slot family.

    clf = SlotClassifier.for_embedder(bank_embedder)   # None: no weights for that embedder
    p = clf.probabilities(texts, vectors)              # (n, len(FAMILIES)), probabilities

``texts[i]`` is a unit's text (``"Speaker: text"`` as retain writes it, memlane/retain/chunking.py
format_turn; the prefix may be absent) and ``vectors[i]`` its vector as embedded at retain. A
family's probability is the best score of the family's candidate values in the turn (the
learned extractor's scorer, memlane/facts/learned.py, over the candidates its regular
expressions find: no spaCy here); a family with no candidate value in the turn gets the
turn-level probability (topic x gate, calibrated) halved: it may speak of the slot but names no
value one could rank as current.

Measured on the statement set's calibration half at 0.5, bge-small (``python -m
training.train_slots`` prints both): topic x gate alone, precision 0.766 / recall 0.617; the
best candidate score, as here, 0.936 / 0.662 (minilm: 0.744 / 0.565 and 0.902 / 0.656).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Sequence

import numpy as np

from memlane.facts.families import FAMILIES
from memlane.facts.learned import LearnedExtractor
from memlane.facts.slot_weights import SlotWeights, WeightsError, strip_speaker, unit_rows, weights_path

__all__ = ["FAMILIES", "SlotClassifier", "WeightsError", "weights_path"]

# A turn without a candidate value: its turn-level probability, halved. Not measured beyond
# keeping such a turn under a 0.5 cut, so that the figures above hold at 0.5.
NO_VALUE_FACTOR = 0.5
# Texts whose candidate scores are kept (about 0.1 KB each).
BEST_KEPT = 100_000


class SlotClassifier:
    """Per-turn slot-family probabilities from one embedder's shipped weights."""

    def __init__(self, weights: SlotWeights) -> None:
        self.weights = weights
        self._scorer = LearnedExtractor(weights)  # regular-expression candidates only
        # Each text's best candidate score per family (-1: none), kept: recall asks for the
        # same candidate turns query after query, and scoring them took ~210 ms a recall that
        # asks a slot on a LoCoMo bank (cProfile, 40 questions, loaded 2-core machine, Nov
        # 2026). A text's vector is its embedding, the same for every bank of one embedder.
        self._best: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path) -> SlotClassifier:
        """From a weights file; WeightsError when it was trained for other families or cues."""
        return cls(SlotWeights.load(path))

    @classmethod
    def for_embedder(cls, name: str) -> SlotClassifier | None:
        """The classifier of the embedder ``name`` ("bge-small", the default, or "minilm"), or
        None when no weights were trained for it. Built once per process."""
        return _cached(name)

    @property
    def embedder(self) -> str:
        return self.weights.embedder

    @property
    def dim(self) -> int:
        return self.weights.dim

    def probabilities(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """(n, len(FAMILIES)) probabilities, FAMILIES order (see the module docstring).
        ValueError for vectors of another dimension or a count that differs from the texts'."""
        bare = [strip_speaker(t) for t in texts]
        v = unit_rows(vectors)
        out = self.weights.turn_probabilities(bare, v) * NO_VALUE_FACTOR
        with self._lock:
            known = {t: self._best[t] for t in bare if t in self._best}
        todo = [i for i, t in enumerate(bare) if t not in known]
        if todo:
            scored_rows = self._scorer.score([bare[i] for i in todo], [""] * len(todo), v[todo])
            for i, scored in zip(todo, scored_rows):
                row = np.full(len(FAMILIES), -1.0)
                for s in scored:
                    j = FAMILIES.index(s.candidate.family)
                    row[j] = max(row[j], s.score)
                known[bare[i]] = row
            with self._lock:
                for i in todo:
                    self._best[bare[i]] = known[bare[i]]
                while len(self._best) > BEST_KEPT:
                    self._best.popitem(last=False)
        best = np.stack([known[t] for t in bare]) if bare else np.full(out.shape, -1.0)
        return np.where(best >= 0, best, out).astype(np.float32)


@lru_cache(maxsize=8)
def _cached(name: str) -> SlotClassifier | None:
    weights = SlotWeights.for_embedder(name)
    return SlotClassifier(weights) if weights is not None else None
