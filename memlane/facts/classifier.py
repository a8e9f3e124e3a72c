"""The learned slot classifier: per turn, the probability that it states the speaker's own
current value of each slot family, from the turn's vector and its text.

Factored in two: a *topic* model (which family the turn is about: one logistic regression per
family over the embedder's vector of ``"Speaker: text"``, as retain embeds a unit) times a
family-independent *gate* (the turn states the speaker's own current situation, not a friend's
job, a plan, a question, a hypothetical, a negation or the past: a logistic regression over the
vector and the turn's cue features, memlane/facts/cues.py). An embedding alone does not tell
"my brother got a job at X" from "I got a job at X"; the cues do.

Trained by ``benchmarks/train_slots.py`` on evals/statements/train/ only; the weights ship per
embedder as ``memlane/facts/weights/slots-<embedder>.npz`` and are read here with numpy (no
scikit-learn at run time). The same file holds the candidate scorer of the learned extractor
(memlane/facts/learned.py).

Recall's use (ranking "now" questions)::

    clf = SlotClassifier.for_embedder(bank.embedder)   # None: no weights for that embedder
    p = clf.probabilities(texts, vectors)              # (n, len(FAMILIES)), probabilities
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from memlane.facts.cues import CUES, turn_cues
from memlane.facts.families import FAMILIES

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
FORMAT = 1  # bumped when the file's arrays change meaning


class WeightsError(ValueError):
    """A weights file that does not fit this code (another family list, cue list or format)."""


def weights_path(embedder: str) -> Path:
    return WEIGHTS_DIR / f"slots-{embedder}.npz"


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30.0, 30.0)))


_SPEAKER = re.compile(r"^[A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,3}: ")


def strip_speaker(text: str) -> str:
    """A unit's text without its ``"Speaker: "`` prefix (memlane/retain/chunking.py format_turn)."""
    return _SPEAKER.sub("", text, count=1)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (the embedders' output already is; a stored vector may not be)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


@dataclass(frozen=True)
class SlotClassifier:
    """Topic x gate over a turn's vector and text (see the module docstring)."""

    embedder: str
    topic_w: np.ndarray  # (F, D)
    topic_b: np.ndarray  # (F,)
    gate_w: np.ndarray  # (D + 2 * len(CUES),)
    gate_b: float
    arrays: dict[str, np.ndarray]  # everything the file holds (the candidate scorer's too)

    @classmethod
    def load(cls, path: Path) -> SlotClassifier:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        if int(arrays["format"]) != FORMAT:
            raise WeightsError(f"{path}: weights format {int(arrays['format'])}, this code reads {FORMAT}")
        if tuple(arrays["families"].tolist()) != FAMILIES:
            raise WeightsError(f"{path}: trained for families {arrays['families'].tolist()}, not {list(FAMILIES)}")
        if tuple(arrays["cues"].tolist()) != CUES:
            raise WeightsError(f"{path}: trained on cues {arrays['cues'].tolist()}, not {list(CUES)}")
        return cls(
            embedder=str(arrays["embedder"]),
            topic_w=arrays["topic_w"].astype(np.float32),
            topic_b=arrays["topic_b"].astype(np.float32),
            gate_w=arrays["gate_w"].astype(np.float32),
            gate_b=float(arrays["gate_b"]),
            arrays=arrays,
        )

    @classmethod
    def for_embedder(cls, name: str) -> SlotClassifier | None:
        """The shipped classifier for the embedder ``name`` ("bge-small", "minilm"), or None
        when no weights were trained for it. Loaded once per process."""
        return _load_cached(name)

    @property
    def dim(self) -> int:
        return int(self.topic_w.shape[1])

    def _check(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        v = unit_rows(vectors)
        if v.shape[1] != self.dim:
            raise ValueError(f"vectors of dimension {v.shape[1]}; the {self.embedder} classifier reads {self.dim}")
        if len(texts) != v.shape[0]:
            raise ValueError(f"{len(texts)} texts for {v.shape[0]} vectors")
        return v

    def topic(self, vectors: np.ndarray) -> np.ndarray:
        """(n, F): the probability that each turn is about each family (whoever it is about)."""
        v = unit_rows(vectors)
        return sigmoid(v @ self.topic_w.T + self.topic_b)

    def gate(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """(n,): the probability that each turn states the speaker's own current situation."""
        v = self._check(texts, vectors)
        cues = np.stack([turn_cues(strip_speaker(t)) for t in texts]) if len(texts) else np.zeros((0, 2 * len(CUES)))
        return sigmoid(np.concatenate([v, cues], axis=1) @ self.gate_w + self.gate_b)

    def probabilities(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """(n, len(FAMILIES)): per turn (``texts[i]`` as said, with or without its ``"Speaker: "``
        prefix; ``vectors[i]`` its unit vector as embedded at retain), the probability that it
        states the speaker's own current value of each family, in :data:`FAMILIES` order."""
        v = self._check(texts, vectors)
        return self.topic(v) * self.gate(texts, v)[:, None]


@lru_cache(maxsize=8)
def _load_cached(name: str) -> SlotClassifier | None:
    path = weights_path(name)
    return SlotClassifier.load(path) if path.is_file() else None
