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
from typing import Callable, Sequence

import numpy as np

from memlane.errors import BankNotFound
from memlane.facts.families import FAMILIES
from memlane.facts.learned import LearnedExtractor, Scored
from memlane.facts.slot_weights import SlotWeights, WeightsError, strip_speaker, unit_rows, weights_path
from memlane.records import MemoryUnit, UnitSlots

__all__ = ["FAMILIES", "SlotClassifier", "WeightsError", "weights_path", "with_slots", "write_slots"]

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

    @property
    def version(self) -> str:
        """The weights' version, as a memory's stored signals name it."""
        return self.weights.version

    def unit_slots(self, texts: Sequence[str], vectors: np.ndarray) -> list[UnitSlots]:
        """What :meth:`signals` reads of each text alone, to store with the memory when it is
        written (memlane/writes.py): its best candidate score per family and its gate."""
        # One text at a time, and not from the kept scores: BLAS sums a batch's rows in another
        # order than a single row's, and a memory's signals must not depend on what it was
        # written (or earlier recalled) with: a bank is the same whichever path wrote it.
        out = []
        for text, vector in zip(texts, np.asarray(vectors, dtype=np.float32)):
            gate = self.weights.gate([text], vector[None, :])
            scored = self._scorer.score([strip_speaker(text)], [""], unit_rows(vector))[0]
            out.append(UnitSlots(weights=self.version, best=_best_row(scored).tolist(), gate=float(gate[0])))
        return out

    def signals(
        self, texts: Sequence[str], vectors: np.ndarray, stored: Sequence[UnitSlots | None] = ()
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each text's gate (n,), family probabilities (n, F: :meth:`probabilities`, but
        calibrated with the gate of the text as given: that one strips a speaker prefix twice)
        and topic (n, F), reading ``stored[i]`` (the memory's signals as written) where it names
        these weights instead of scoring the text again."""
        v = unit_rows(vectors)
        mine = self._mine(stored, len(texts))
        gate = self.gates(texts, vectors, mine)
        todo = [i for i, s in enumerate(mine) if s is None]
        best = np.empty((len(texts), len(FAMILIES)))
        if todo:
            best[todo] = self._best_rows([strip_speaker(texts[i]) for i in todo], v[todo])
        for i, s in enumerate(mine):
            if s is not None:
                best[i] = s.best
        topic = self.weights.topic(vectors)
        out = self.weights.calibrated(topic, gate) * NO_VALUE_FACTOR
        return gate, np.where(best >= 0, best, out).astype(np.float32), topic

    def gates(
        self, texts: Sequence[str], vectors: np.ndarray, stored: Sequence[UnitSlots | None] = ()
    ) -> np.ndarray:
        """Each text's gate (n,): as :meth:`signals` gives it, without the rest."""
        mine = self._mine(stored, len(texts))
        todo = [i for i, s in enumerate(mine) if s is None]
        gate = np.empty(len(texts), dtype=np.float32)
        if todo:
            gate[todo] = self.weights.gate([texts[i] for i in todo], np.asarray(vectors)[todo])
        for i, s in enumerate(mine):
            if s is not None:
                gate[i] = s.gate
        return gate

    def _mine(self, stored: Sequence[UnitSlots | None], n: int) -> list[UnitSlots | None]:
        """``stored`` padded to ``n``, without the signals that other weights wrote."""
        mine = [s if s is not None and s.weights == self.version else None for s in stored]
        return mine + [None] * (n - len(mine))

    def probabilities(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """(n, len(FAMILIES)) probabilities, FAMILIES order (see the module docstring).
        ValueError for vectors of another dimension or a count that differs from the texts'."""
        bare = [strip_speaker(t) for t in texts]
        v = unit_rows(vectors)
        out = self.weights.turn_probabilities(bare, v) * NO_VALUE_FACTOR
        best = self._best_rows(bare, v) if bare else np.full(out.shape, -1.0)
        return np.where(best >= 0, best, out).astype(np.float32)

    def _best_rows(self, bare: Sequence[str], v: np.ndarray) -> np.ndarray:
        """(n, F): each text's best candidate score per family, -1 where it has none."""
        with self._lock:
            known = {t: self._best[t] for t in bare if t in self._best}
        todo = [i for i, t in enumerate(bare) if t not in known]
        if todo:
            scored_rows = self._scorer.score([bare[i] for i in todo], [""] * len(todo), v[todo])
            for i, scored in zip(todo, scored_rows):
                known[bare[i]] = _best_row(scored)
            with self._lock:
                for i in todo:
                    self._best[bare[i]] = known[bare[i]]
                while len(self._best) > BEST_KEPT:
                    self._best.popitem(last=False)
        return np.stack([known[t] for t in bare]) if bare else np.zeros((0, len(FAMILIES)))


def _best_row(scored: Sequence[Scored]) -> np.ndarray:
    """(F,): a text's best candidate score per family, -1 where it has none."""
    row = np.full(len(FAMILIES), -1.0)
    for s in scored:
        j = FAMILIES.index(s.candidate.family)
        row[j] = max(row[j], s.score)
    return row


# Texts up to this long get their signals when written; a longer one is read at recall, as
# before, kept per text in the process. Scoring grows faster than the text: 4-5 ms at 200
# characters, 10-23 ms at 1,000, 26-87 ms at 2,000, 0.5-1.2 s at 20,000 (words / random
# characters, one memory, this 2-core machine; with no bound the API's fuzz tests, which
# retain long junk, took 23 s more). Every LoCoMo turn is shorter (462 characters at most).
STORED_TEXT_CHARS = 1_000


def with_slots(classifier: SlotClassifier | None, units: Sequence[MemoryUnit]) -> list[MemoryUnit]:
    """``units``, those with a vector of the classifier's dimension and a text of at most
    :data:`STORED_TEXT_CHARS` given the signals it reads of them
    (:meth:`SlotClassifier.unit_slots`) where theirs are missing or name other weights; the
    rest as they are. The write path calls it (memlane/writes.py), so recall reads what a
    memory alone gives instead of scoring it again."""
    out = list(units)
    if classifier is None:
        return out
    todo = [
        i
        for i, u in enumerate(out)
        if u.embedding is not None
        and len(u.embedding) == classifier.dim
        and len(u.text) <= STORED_TEXT_CHARS
        and (u.slots is None or u.slots.weights != classifier.version)
    ]
    if todo:
        vectors = np.asarray([out[i].embedding for i in todo], dtype=np.float32)
        slots = classifier.unit_slots([out[i].text for i in todo], vectors)
        for i, s in zip(todo, slots):
            out[i] = out[i].model_copy(update={"slots": s})
    return out


def write_slots(
    embedder_of: Callable[[str, str], str], bank_id: str, revision: str, units: Sequence[MemoryUnit]
) -> list[MemoryUnit]:
    """The write path's signals (memlane.writes.UnitSignals): :func:`with_slots` with the
    classifier of the embedder whose vectors a write to the bank carries (``embedder_of(bank,
    revision)``: memlane.banks.BankEmbedders.writing); a bank without a record yet (the
    writes that create it), none."""
    try:
        name = embedder_of(bank_id, revision)
    except BankNotFound:
        return list(units)
    return with_slots(SlotClassifier.for_embedder(name), units)


@lru_cache(maxsize=8)
def _cached(name: str) -> SlotClassifier | None:
    weights = SlotWeights.for_embedder(name)
    return SlotClassifier(weights) if weights is not None else None
