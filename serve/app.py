"""The Serve application: ``build_app`` is the import path the config file names
(``serve.app:build_app``); ``serve deploy serve/config.yaml`` and ``memlane serve --runtime
ray`` both use it. The Ingress deployment is the app's host (serve/host.py) on Ray: its writes
are the Memory deployment's, banks are routed to the replica that holds them, metrics go
through Ray."""

from __future__ import annotations

from typing import Any

from ray import serve

from memlane.settings import Settings
from serve.backend import DeploymentWrites
from serve.bank_host import _Registered
from serve.deployments import EmbedderDeployment, MemoryDeployment, RerankDeployment
from serve.host import ServiceHost
from serve.ingress import api

# Read when the class is defined (Serve's decorator takes a constant): the environment comes
# from the application's runtime_env, set before the replica imports this module.
MAX_WARM_BANKS = Settings().recall.state_max_banks


def replica_id() -> str:
    try:
        return serve.get_replica_context().replica_id.unique_id
    except Exception:  # noqa: BLE001 - outside a replica (unit tests)
        return "local"


@serve.deployment(name="Ingress")
@serve.ingress(api)
class Ingress(ServiceHost):
    """Routes HTTP: recall and reflect run here, on this replica's warm banks
    (serve/bank_host.py); writes and listings go to the Memory deployment."""

    def __init__(self, memory, embedder=None, reranker=None) -> None:
        from serve.deployments import keep_torch_out, service_memory
        from serve.metrics import EndpointMetrics, RecallMetrics

        engine = service_memory(embedder, reranker, ray_metrics=True)
        keep_torch_out(engine)  # the Ingress replica's entry point: see keep_torch_out
        self.reranker = reranker
        super().__init__(
            engine,
            DeploymentWrites(memory),
            replica=replica_id(),
            endpoint_metrics=EndpointMetrics(),
            recall_metrics=RecallMetrics,
        )

    @serve.multiplexed(max_num_models_per_replica=MAX_WARM_BANKS)
    async def _bank(self, bank_id: str) -> _Registered:
        """Registers the bank with Serve's multiplexer, which then routes the bank's requests
        (tagged by the proxy, serve/routing.py) here. Loading happens in the recall itself."""
        return _Registered(self, bank_id)

    async def rerank_scores(self, query: str, documents: list[str]) -> list[float]:
        """The cross-encoder's scores (the Rerank deployment), or the engine's reranker's."""
        if self.reranker is not None:
            return await self.reranker.rerank.remote(query, documents)
        return await super().rerank_scores(query, documents)


def build_app(args: dict[str, Any] | None = None):
    """The Memlane application graph: Ingress (recall and reflect in its replicas) -> Memory
    (writes). An Embedder deployment joins with ``MEMLANE_SERVE__EMBEDDER=remote`` and a Rerank
    deployment with ``MEMLANE_SERVE__RERANKER=remote`` (and a cross-encoder configured);
    without them each Ingress replica embeds and reranks for itself. Read in the process that
    builds the app, from the same environment the replicas get. Autoscaling and resources come
    from the config file."""
    settings = Settings()
    embedder = EmbedderDeployment.bind() if settings.serve.embedder == "remote" else None
    remote = settings.models.reranker_model and settings.serve.reranker == "remote"
    reranker = RerankDeployment.bind() if remote else None
    memory = MemoryDeployment.bind(embedder)
    return Ingress.bind(memory, embedder, reranker)
