"""The supervisor of the one-process runtime (``memlane serve --runtime process``): this process
serves the app (serve/process.py) and owns the data directory's Milvus Lite server, which the
CLI reaches while the service runs (cluster/datadir.py's ``store_access`` reads its URI from
the state file), as under the Ray runtime (cluster/service.py).

It writes ``DATA_DIR/serve.json`` (``runtime`` "process", its pid, the HTTP URL, the metrics
port, which is the HTTP port, the Milvus URI) once the engine is built, serves until SIGTERM or
SIGINT (``memlane serve --stop``), then lets running work finish, stops the Milvus Lite server (a clean close on SIGINT) and removes
the state file. Its output, uvicorn's included, goes to ``DATA_DIR/serve.log``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path


def supervise_process(data_dir: Path, port: int) -> int:
    """Run the service in this process until SIGTERM or SIGINT; the exit code."""
    from cluster.local import MilvusLiteServer
    from cluster.processes import exit_on_sigterm
    from cluster.service import SECRETS_FILE, STATE_FILE, _gist
    from memlane.settings import Settings

    data_dir = data_dir.resolve()
    began = time.monotonic()

    def phase(what: str) -> None:
        # where a start's time goes, in the service's log (serve.log)
        print(f"memlane service (process): {what} at {time.monotonic() - began:.1f}s", flush=True)

    # Until uvicorn installs its own handlers, a stop ends the start through SystemExit, so the
    # finally below stops the Milvus Lite server and removes the state file.
    exit_on_sigterm()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings(data_dir=data_dir)
    uri = settings.store.milvus_uri
    server = None
    service = None
    try:
        if not uri:
            # launched now, waited for after the app's imports and the embedding model's load:
            # they overlap. Before, one after the other: the server answered after 2.8-5.3 s and
            # the app and engine were ready 4.3-9.4 s later (loaded 2-core machine, Dec 2026).
            server = MilvusLiteServer(data_dir).launch()
            uri = server.uri
        os.environ.update(MEMLANE_STORE__MILVUS_URI=uri, MEMLANE_DATA_DIR=str(data_dir))
        # One OpenMP/BLAS thread, as Ray gives each replica (OMP_NUM_THREADS=1), set before
        # NumPy loads and after the Milvus Lite server started (its searches keep their own).
        # Without it spaCy's matrix products ran on BLAS threads that fought the embedder's
        # for the 2 cores: 10 LoCoMo sessions retained in 18.5 s (embed 10.4 s), 9.6 s with
        # it (embed 5.6 s); the Ray runtime 8.4 s (loaded 2-core machine, Dec 2026).
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        from serve.process import ProcessService

        def store_ready() -> None:
            phase("app imported, embedding model loaded")
            if server is not None:
                server.wait_ready()
                phase("milvus lite up")

        try:
            service = ProcessService(store_ready)
        except Exception as exc:  # noqa: BLE001 - reported as the Ray runtime's failed deploy is
            logging.getLogger("memlane.serve").exception("the service could not start")
            # memlane serve reports this line (its marker is the Ray runtime's too) at once
            print(
                f"memlane service supervisor: deploy failed: {_gist(f'{type(exc).__name__}: {exc}')}",
                flush=True,
            )
            return 1
        phase("engine ready")
        state = {
            "pid": os.getpid(),
            "runtime": "process",
            "url": f"http://127.0.0.1:{port}",
            # The port whose /metrics Prometheus scrapes, as under Ray: here the service's own
            # (serve/process.py), with the ray_memlane_* metrics the dashboards query.
            "metrics_export_port": port,
            "milvus_uri": uri,
            "data_dir": str(data_dir),
            # the CLI's commands go through the API: with a key only when auth is on
            "auth": settings.serve.auth,
        }
        (data_dir / STATE_FILE).write_text(json.dumps(state, indent=1))
        print(f"memlane service (process): {json.dumps(state)}", flush=True)
        service.run(port)
        phase("stopping")
    finally:
        try:
            if service is not None:
                service.close()
        finally:
            if server is not None:
                server.stop()
            (data_dir / STATE_FILE).unlink(missing_ok=True)
            (data_dir / SECRETS_FILE).unlink(missing_ok=True)
    return 0
