"""The learned slot model's weights and its turn-level parts: per turn, a *topic* (which family
the turn is about: one logistic regression per family over the embedder's vector of
``"Speaker: text"``, as retain embeds a unit) and a family-independent *gate* (the turn states
the speaker's own current situation, not a friend's job, a plan, a question, a hypothetical, a
negation or the past: a logistic regression over the vector and the turn's cue features,
memlane/facts/cues.py). An embedding alone does not tell "my brother got a job at X" from "I
got a job at X"; the cues do. The same file holds each family's candidate scorer
(memlane/facts/learned.py) and the per-family calibration of topic x gate.

Trained by ``training/train_slots.py`` on evals/statements/train/ only; the weights ship per
embedder as ``memlane/facts/weights/slots-<embedder>.npz`` and are read here with numpy (no
scikit-learn at run time). The public interface is memlane/facts/classifier.py.
"""

from __future__ import annotations

import hashlib
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
class SlotWeights:
    """One embedder's trained arrays, with the turn-level topic, gate and their calibration."""

    embedder: str
    topic_w: np.ndarray  # (F, D)
    topic_b: np.ndarray  # (F,)
    gate_w: np.ndarray  # (D + 2 * len(CUES),)
    gate_b: float
    arrays: dict[str, np.ndarray]  # everything the file holds (the candidate scorer's too)
    # "<embedder>:<digest of the file>": what a memory's stored signals name (memlane.records
    # UnitSlots), so that signals from other weights are never read as these ones'
    version: str = ""

    @classmethod
    def load(cls, path: Path) -> SlotWeights:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        if int(arrays["format"]) != FORMAT:
            raise WeightsError(f"{path}: weights format {int(arrays['format'])}, this code reads {FORMAT}")
        if tuple(arrays["families"].tolist()) != FAMILIES:
            raise WeightsError(
                f"{path}: trained for families {arrays['families'].tolist()}, not {list(FAMILIES)}"
            )
        if tuple(arrays["cues"].tolist()) != CUES:
            raise WeightsError(f"{path}: trained on cues {arrays['cues'].tolist()}, not {list(CUES)}")
        return cls(
            embedder=str(arrays["embedder"]),
            topic_w=arrays["topic_w"].astype(np.float32),
            topic_b=arrays["topic_b"].astype(np.float32),
            gate_w=arrays["gate_w"].astype(np.float32),
            gate_b=float(arrays["gate_b"]),
            arrays=arrays,
            version=f"{arrays['embedder']}:{digest}",
        )

    @classmethod
    def for_embedder(cls, name: str) -> SlotWeights | None:
        """The shipped weights of the embedder ``name``, or None; loaded once per process."""
        return _load_cached(name)

    @property
    def dim(self) -> int:
        return int(self.topic_w.shape[1])

    def _check(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        v = unit_rows(vectors)
        if v.shape[1] != self.dim:
            raise ValueError(
                f"vectors of dimension {v.shape[1]}; the {self.embedder} classifier reads {self.dim}"
            )
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
        cues = (
            np.stack([turn_cues(strip_speaker(t)) for t in texts])
            if len(texts)
            else np.zeros((0, 2 * len(CUES)))
        )
        return sigmoid(np.concatenate([v, cues], axis=1) @ self.gate_w + self.gate_b)

    def turn_probabilities(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """(n, len(FAMILIES)): topic and gate combined per family by a logistic regression
        fitted on cross-fitted training predictions (a calibrated probability that the turn
        states the speaker's own value of the family, whatever the value)."""
        v = self._check(texts, vectors)
        return self.calibrated(self.topic(v), self.gate(texts, v))

    def calibrated(self, topic: np.ndarray, gate: np.ndarray) -> np.ndarray:
        """:meth:`turn_probabilities` from the turns' topic (n, F) and gate (n,)."""
        w, b = self.arrays["turn_w"], self.arrays["turn_b"]
        out = np.empty_like(topic)
        for j in range(topic.shape[1]):
            out[:, j] = sigmoid(turn_inputs(topic[:, j], gate) @ w[j] + b[j])
        return out


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def turn_inputs(topic: np.ndarray, gate: np.ndarray) -> np.ndarray:
    """The per-family calibration's inputs for one family: the logits of the topic, the gate
    and their product, (n, 3)."""
    return np.stack([_logit(topic), _logit(gate), _logit(topic * gate)], axis=1).astype(np.float32)


@lru_cache(maxsize=8)
def _load_cached(name: str) -> SlotWeights | None:
    path = weights_path(name)
    return SlotWeights.load(path) if path.is_file() else None
