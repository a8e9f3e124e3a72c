"""The one-process runtime of the service (``memlane serve --runtime process``, the default on
one machine): the FastAPI app of serve/ingress.py served by uvicorn on 127.0.0.1 in this
process, over ONE engine that answers recall and reflect and runs the writes, its background
work (the tree, the fact pass) on the engine's own scheduler (memlane/background.py). No Ray
is imported: no GCS, raylet, agents, dashboard, Serve controller or proxy, and no hop between
processes for a request (each a serialisation and an RPC under Ray Serve).

The Ray runtime (serve/app.py) remains the path for many machines: replicas scaled apart,
bank-affine routing. This one records the same metrics as Ray's (serve/metrics.py, the store's
in actors/store_metrics.py) with prometheus_client and serves them at ``/metrics`` on its own
port, under the names infra/grafana/'s dashboards query (``ray_memlane_http_requests_total``,
...), each series labelled ``replica="process-<pid>"``.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from starlette.types import ASGIApp, Receive, Scope, Send

    from serve.engine_host import MemoryWrites
    from serve.host import ServiceHost

log = logging.getLogger("memlane.serve")


class ProcessService:
    """The engine, its writes and the app's host in this process; :meth:`run` serves HTTP
    until SIGTERM or SIGINT, :meth:`close` lets running work finish."""

    def __init__(self, store_ready: Callable[[], object] = lambda: None) -> None:
        """``store_ready``: returns once the store answers (the Milvus Lite server started
        beside this): the app's imports and the embedding model's load go first, meanwhile."""
        from functools import partial

        from prometheus_client import CollectorRegistry

        import serve.ingress  # noqa: F401 - the app's modules, imported while the store starts
        from actors.store_metrics import StoreMetrics
        from memlane.stores.milvus.observe import add_observer
        from serve.backend import LocalWrites
        from serve.engine_host import MemoryWrites, keep_torch_out, service_memory
        from serve.host import ServiceHost
        from serve.metrics import EndpointMetrics, PrometheusExport, RecallMetrics

        replica = f"process-{os.getpid()}"
        # This process's metrics, served at /metrics (see :meth:`run`); its own registry, not
        # prometheus_client's global one, so a second service in one process starts clean.
        self.registry = CollectorRegistry()
        export = PrometheusExport(self.registry, {"replica": replica})
        self.store_metrics = StoreMetrics(export)
        add_observer(self.store_metrics)  # this process's Milvus calls, as ray_memlane_store_*
        engine = service_memory()  # the embedding model loads here; the store opens at first use
        store_ready()
        keep_torch_out(engine)  # this process's entry point, before spaCy loads: see keep_torch_out
        # MemoryWrites builds what retain uses (spaCy, the embedder's first pass) now, so the
        # first request does not wait for it; recall shares the engine, so its models too.
        self.writes: MemoryWrites = MemoryWrites(engine)
        self.host: ServiceHost = ServiceHost(
            engine,
            LocalWrites(self.writes),
            replica=replica,
            endpoint_metrics=EndpointMetrics(export),
            recall_metrics=partial(RecallMetrics, export=export),
        )

    def run(self, port: int) -> None:
        """Serve the app on 127.0.0.1:``port`` until SIGTERM or SIGINT (uvicorn's handlers:
        running requests finish, then the app's lifespan ends), and the metrics at ``/metrics``."""
        import uvicorn

        from serve.ingress import api

        config = uvicorn.Config(
            with_metrics(api, self.registry),
            host="127.0.0.1",
            port=port,
            lifespan="on",
            # one line per request would be most of serve.log; errors are logged
            access_log=False,
            log_level="info",
            timeout_graceful_shutdown=60,
        )
        uvicorn.Server(config).run()

    def close(self) -> None:
        """Let a background retain finish, then run the engine's queued background jobs and
        close its clients and store."""
        from memlane.stores.milvus.observe import remove_observer

        try:
            self.writes.close()
        finally:
            try:
                self.host.engine.close()
            finally:
                remove_observer(self.store_metrics)


def with_metrics(app: ASGIApp, registry: CollectorRegistry) -> ASGIApp:
    """``app``, with ``registry`` in Prometheus's text format at ``GET /metrics``, answered
    before the app: no API key (Ray's metrics endpoint asks none either, and this service
    listens on loopback only), not counted as a request, not in the OpenAPI schema. The Ray
    runtime's metrics are on Ray's own endpoint; the app itself has no /metrics."""
    from prometheus_client import make_asgi_app

    metrics = make_asgi_app(registry)

    async def app_with_metrics(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/metrics":
            await metrics(scope, receive, send)
        else:
            await app(scope, receive, send)

    return app_with_metrics
