"""Engine interfaces backed by other Serve deployments, so a recall or retain replica
composes the embedding and rerank deployments through DeploymentHandles.

They are called from the engine's synchronous code, which Serve runs on a thread pool
(RAY_SERVE_RUN_SYNC_IN_THREADPOOL, on by default in Ray 2.60), so blocking on ``.result()``
does not stall the replica's event loop.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

# Long enough for a retain batch of 128 turns on a busy 2-core machine (about 1 s alone).
EMBED_TIMEOUT_S = 120.0


class RemoteEmbedder:
    """An Embedder whose vectors come from the Embedder deployment; tokens are counted
    locally with the same tokenizer (memlane/models/tokens.py), which needs no torch."""

    def __init__(self, handle, counter, dim: int, name: str) -> None:
        self._handle = handle
        self._counter = counter
        self.dim = dim
        self.name = name  # the deployment's embedder (memlane.models.embedder.embedder_identity)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passages' vectors."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._handle.embed.remote(list(texts)).result(timeout_s=EMBED_TIMEOUT_S)
        return np.asarray(out, dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Queries' vectors (with the model's query instruction, where it has one)."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1:
            # One query: the deployment batches concurrent queries into one forward pass.
            row = self._handle.embed_query.remote(texts[0]).result(timeout_s=EMBED_TIMEOUT_S)
            return np.asarray(row, dtype=np.float32).reshape(1, -1)
        out = self._handle.embed_queries.remote(list(texts)).result(timeout_s=EMBED_TIMEOUT_S)
        return np.asarray(out, dtype=np.float32)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._counter.count_tokens(texts)


class RemoteReranker:
    """A Reranker served by the Rerank deployment (a cross-encoder there)."""

    def __init__(self, handle, name: str) -> None:
        self._handle = handle
        self.name = name

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        return list(
            self._handle.rerank.remote(query, list(passages), list(prior_ranks)).result(
                timeout_s=EMBED_TIMEOUT_S
            )
        )
