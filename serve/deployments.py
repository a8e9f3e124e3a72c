"""The deployments behind the Ingress: Memory (writes, listing, deletion, operations), and,
when configured, Embedder (``MEMLANE_SERVE__EMBEDDER=remote``: one batching model replica,
e.g. on a GPU) and Rerank (a cross-encoder). Recall and reflect run in the Ingress replica
itself (serve/bank_host.py). Each replica builds its engine parts from ``Settings()``
(environment variables set through the application's runtime_env) and talks to the store of
record directly, so any replica sees what any other wrote as soon as the write returned:
every Milvus collection is created with consistency level Strong (memlane/stores/milvus), and
each recall checks the bank's revision token before using its in-process index
(memlane/derived.py).
"""

from __future__ import annotations

import asyncio

import numpy as np
from ray import serve

# The engine and the writes are Ray-free (the one-process runtime runs them too); imported here
# for the deployments below and for the callers that name them from this module.
from serve.engine_host import MemoryWrites, keep_torch_out, service_memory

__all__ = ["EmbedderDeployment", "MemoryDeployment", "MemoryWrites", "RerankDeployment", "keep_torch_out"]


@serve.deployment(
    name="Embedder",
    max_ongoing_requests=64,
    ray_actor_options={"num_cpus": 0.5},
    autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 16},
)
class EmbedderDeployment:
    """MiniLM (or the configured model). Concurrent single queries are batched."""

    def __init__(self) -> None:
        from memlane.models.embedder import build_embedder
        from memlane.settings import Settings

        self.embedder = build_embedder(Settings())

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002)
    async def embed_query(self, texts: list[str]) -> list[np.ndarray]:
        vectors = await asyncio.to_thread(self.embedder.embed_queries, texts)
        return list(vectors)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed_queries(texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed(texts)


@serve.deployment(
    name="Rerank",
    max_ongoing_requests=16,
    ray_actor_options={"num_cpus": 0.1},
    autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 8},
)
class RerankDeployment:
    """The cross-encoder from MEMLANE_MODELS__RERANKER_MODEL, or the RRF-rank fallback."""

    def __init__(self) -> None:
        from memlane.models.reranker import build_reranker
        from memlane.settings import Settings

        self.reranker = build_reranker(Settings())

    def rerank(self, query: str, passages: list[str], prior_ranks: list[int] | None = None) -> list[float]:
        ranks = prior_ranks if prior_ranks is not None else list(range(len(passages)))
        return [float(x) for x in self.reranker.rerank(query, passages, ranks)]

    def info(self) -> dict[str, str]:
        return {"model": self.reranker.name}


@serve.deployment(name="Memory")
class MemoryDeployment(MemoryWrites):
    """The writes as a deployment of their own (scaled apart from recall): the replica's
    engine, built here, under :class:`MemoryWrites`."""

    def __init__(self, embedder=None) -> None:
        memory = service_memory(embedder, ray_metrics=True)
        keep_torch_out(memory)  # this replica process's entry point: see keep_torch_out
        super().__init__(memory, warm_embedder=embedder is None)  # a remote Embedder warms itself
        from ray.serve.metrics import Gauge

        from actors.gauges import export_held_state

        # What this write replica holds under the engine's budget, as the Ingress's warm banks
        export_held_state(self.memory.derived, Gauge)

    def __del__(self) -> None:
        # Serve calls this on a graceful shutdown (scale-down included).
        self.close()
