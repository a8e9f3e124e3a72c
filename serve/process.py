"""The one-process runtime of the service (``memlane serve --runtime process``, the default on
one machine): the FastAPI app of serve/ingress.py served by uvicorn on 127.0.0.1 in this
process, over ONE engine that answers recall and reflect and runs the writes, its background
work (the tree, the fact pass) on the engine's own scheduler (memlane/background.py). No Ray
is imported: no GCS, raylet, agents, dashboard, Serve controller or proxy, and no hop between
processes for a request (each a serialisation and an RPC under Ray Serve).

The Ray runtime (serve/app.py) remains the path for many machines: replicas scaled apart,
bank-affine routing, Ray's metrics. This one has no metrics exporter (serve/metrics.py).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from serve.engine_host import MemoryWrites
    from serve.host import ServiceHost

log = logging.getLogger("memlane.serve")


class ProcessService:
    """The engine, its writes and the app's host in this process; :meth:`run` serves HTTP
    until SIGTERM or SIGINT, :meth:`close` lets running work finish."""

    def __init__(self, store_ready: Callable[[], object] = lambda: None) -> None:
        """``store_ready``: returns once the store answers (the Milvus Lite server started
        beside this): the app's imports and the embedding model's load go first, meanwhile."""
        import serve.ingress  # noqa: F401 - the app's modules, imported while the store starts
        from serve.backend import LocalWrites
        from serve.engine_host import MemoryWrites, keep_torch_out, service_memory
        from serve.host import ServiceHost
        from serve.metrics import NoMetrics

        engine = service_memory()  # the embedding model loads here; the store opens at first use
        store_ready()
        keep_torch_out(engine)  # this process's entry point, before spaCy loads: see keep_torch_out
        # MemoryWrites builds what retain uses (spaCy, the embedder's first pass) now, so the
        # first request does not wait for it; recall shares the engine, so its models too.
        self.writes: MemoryWrites = MemoryWrites(engine)
        self.host: ServiceHost = ServiceHost(
            engine,
            LocalWrites(self.writes),
            replica=f"process-{os.getpid()}",
            endpoint_metrics=NoMetrics(),
            recall_metrics=NoMetrics,
        )

    def run(self, port: int) -> None:
        """Serve the app on 127.0.0.1:``port`` until SIGTERM or SIGINT (uvicorn's handlers:
        running requests finish, then the app's lifespan ends)."""
        import uvicorn

        from serve.ingress import api

        config = uvicorn.Config(
            api,
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
        try:
            self.writes.close()
        finally:
            self.host.engine.close()
