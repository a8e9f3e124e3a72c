"""The Serve application: ``build_app`` is the import path the config file names
(``serve.app:build_app``); ``serve deploy serve/config.yaml`` and ``memlane serve`` both use it."""

from __future__ import annotations

from typing import Any

from serve.deployments import (
    EmbedderDeployment,
    MemoryDeployment,
    RecallDeployment,
    ReflectDeployment,
    RerankDeployment,
)
from serve.ingress import Ingress


def build_app(args: dict[str, Any] | None = None):
    """The Memlane application graph: Ingress -> Memory / Recall / Reflect / Rerank, which
    share one Embedder deployment. Autoscaling and resources come from the config file."""
    embedder = EmbedderDeployment.bind()
    reranker = RerankDeployment.bind()
    memory = MemoryDeployment.bind(embedder)
    recall = RecallDeployment.bind(embedder, reranker)
    reflect = ReflectDeployment.bind(embedder, reranker)
    return Ingress.bind(memory, recall, reflect, reranker)
