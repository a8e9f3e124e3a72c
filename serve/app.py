"""The Serve application: ``build_app`` is the import path the config file names
(``serve.app:build_app``); ``serve deploy serve/config.yaml`` and ``memlane serve`` both use it."""

from __future__ import annotations

from typing import Any

from serve.deployments import EmbedderDeployment, MemoryDeployment, RerankDeployment
from serve.ingress import Ingress


def build_app(args: dict[str, Any] | None = None):
    """The Memlane application graph: Ingress (recall and reflect in its replicas) -> Memory
    (writes). An Embedder deployment joins with ``MEMLANE_SERVE__EMBEDDER=remote`` and a Rerank
    deployment with ``MEMLANE_SERVE__RERANKER=remote`` (and a cross-encoder configured);
    without them each Ingress replica embeds and reranks for itself. Read in the process that builds the app, from the same environment the
    replicas get. Autoscaling and resources come from the config file."""
    from memlane.settings import Settings

    settings = Settings()
    embedder = EmbedderDeployment.bind() if settings.serve.embedder == "remote" else None
    remote = settings.models.reranker_model and settings.serve.reranker == "remote"
    reranker = RerankDeployment.bind() if remote else None
    memory = MemoryDeployment.bind(embedder)
    return Ingress.bind(memory, embedder, reranker)
