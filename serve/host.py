"""What the HTTP app's routes run on: the service host of this process. One class for both
runtimes: the Ray runtime's Ingress replica (serve/app.py: the writes on the Memory deployment,
bank-affine routing, Ray's metrics) and the one process of ``memlane serve --runtime process``
(serve/process.py: the writes on the same engine, no Ray). The routes find it with
:func:`current` and call its :class:`serve.backend.Writes` for everything but recall and
reflect, which run on the host's engine (serve/bank_host.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from serve.auth import Authenticator
from serve.bank_host import BankHost
from serve.ratelimit import RateLimiter

if TYPE_CHECKING:
    from starlette.requests import Request

    from memlane.engine import Memory
    from serve.backend import Writes

# The host of this process: a Serve replica hosts one Ingress, the one-process runtime one host.
_current: list[ServiceHost] = []


def install(host: ServiceHost) -> None:
    """Make ``host`` the one the routes of this process run on."""
    _current[:] = [host]


def current() -> ServiceHost:
    """The host of this process (set by its constructor). A Serve replica's Ingress travels by
    value, so this module's global is the one its constructor set (serve/mcp_http.py keeps its
    servers the same way); the replica context is the fallback."""
    if _current:
        return _current[0]
    from ray import serve

    host: ServiceHost = serve.get_replica_context().servable_object
    return host


class ServiceHost(BankHost):
    """Auth, rate limits and the body limit, the MCP servers, metrics, recall and reflect on
    ``engine``, the rest on ``writes``."""

    def __init__(
        self,
        engine: Memory,
        writes: Writes,
        *,
        replica: str,
        endpoint_metrics: Any,
        recall_metrics: Callable[..., Any],
    ) -> None:
        from serve.hindsight.mcp import build_replica_servers
        from serve.mcp_http import build_http_mcp, keep_running

        serve_settings = engine.settings.serve
        self.writes = writes
        self.auth = Authenticator(serve_settings.api_keys, enabled=serve_settings.auth == "on")
        self.limiter = RateLimiter(serve_settings.rate_limit_per_s, serve_settings.rate_limit_burst)
        self.max_body_bytes = serve_settings.max_body_bytes
        self.mcp = build_http_mcp(self, self.max_body_bytes)
        self.hindsight_mcp = build_replica_servers(self, self.max_body_bytes)
        for kind, server in self.hindsight_mcp.items():
            keep_running(f"hindsight-{kind}", server)
        self._metrics = endpoint_metrics
        self._log = logging.getLogger("memlane.serve")
        self.init_host(engine, recall_metrics, replica)
        install(self)

    async def rerank_scores(self, query: str, documents: list[str]) -> list[float]:
        """The engine's reranker's scores (the cross-encoder, or the RRF-rank fallback's)."""
        import asyncio

        ranks = list(range(len(documents)))
        scores = await asyncio.to_thread(self.engine.reranker.rerank, query, documents, ranks)
        return [float(x) for x in scores]

    def metrics_record(self, route: str, method: str, status: int, ms: float) -> None:
        self._metrics.record(route, method, status, ms)

    def log_exception(self, request: Request) -> None:
        self._log.exception("unhandled error on %s %s", request.method, request.url.path)
