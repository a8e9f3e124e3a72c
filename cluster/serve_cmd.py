"""``memlane serve``: start the online service on 127.0.0.1 in the background (returns once it
is healthy), or stop it with ``--stop``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code=code)


def serve_command(
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="HTTP port on 127.0.0.1."),
    stop: bool = typer.Option(False, "--stop", help="Stop the running service."),
    runtime: str | None = typer.Option(
        None,
        "--runtime",
        help="process: one process on this machine (the default); ray: Ray Serve (the default "
        "with --config, --address or --ray-dashboard).",
    ),
    address: str | None = typer.Option(
        None, "--address", help="Deploy on the Ray cluster at this address (the Ray runtime)."
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Ray Serve config (the Ray runtime; default serve/config.yaml)."
    ),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="Data directory (default: MEMLANE_DATA_DIR or ./.memlane)."
    ),
    timeout: float = typer.Option(600.0, "--timeout", min=1.0, help="Seconds to wait for health."),
    ray_dashboard: bool = typer.Option(
        False, "--ray-dashboard", help="Also start the Ray dashboard (MEMLANE_SERVE__RAY_DASHBOARD)."
    ),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Start Memlane on 127.0.0.1: one process over the data directory's Milvus Lite server
    (the default), or Ray Serve (--runtime ray: local Ray, Milvus Lite server, all on
    loopback); with MEMLANE_STORE__MILVUS_URI, on that Milvus server instead of Lite."""
    from rich.console import Console

    from cluster.common import errors
    from cluster.service import RUNTIMES, ServiceError, runtime_of, start_background
    from cluster.service import stop as stop_service
    from memlane.settings import Settings

    with errors():  # a bad setting: one line, before anything starts
        root = data_dir or Settings().data_dir
        settings = Settings()
    if stop:
        stopped = stop_service(root)
        typer.echo("stopped" if stopped else f"no service running for {root}")
        return
    if runtime is not None and runtime not in RUNTIMES:
        _fail(f"--runtime: {runtime!r} is not one of {', '.join(RUNTIMES)}")
    runtime = runtime_of(runtime or ("ray" if ray_dashboard else None), config=config, address=address)
    if runtime == "process" and (config is not None or address or ray_dashboard):
        _fail("--config, --address and --ray-dashboard are Ray Serve's: use them with --runtime ray")
    if ray_dashboard:  # the supervisor reads its settings from the environment it inherits
        os.environ["MEMLANE_SERVE__RAY_DASHBOARD"] = "true"
    if settings.store.milvus_uri:  # a server the operator runs: it must answer before Ray starts
        from memlane.errors import StoreUnavailable
        from memlane.stores.milvus.connection import open_client

        try:
            client, _, _ = open_client(settings)
            client.close()
        except StoreUnavailable as exc:
            _fail(str(exc), code=2)
    if settings.serve.auth == "on" and not settings.serve.api_keys:
        typer.echo(
            "warning: MEMLANE_SERVE__API_KEYS is empty, so every request except /v1/health "
            "gets 401; set keys, or MEMLANE_SERVE__AUTH=off for local development",
            err=True,
        )
    console = Console(stderr=True)
    try:
        what = (
            "the store and the service"
            if runtime == "process"
            else "Ray, the store and the Serve application"
        )
        with console.status(f"starting {what}..."):
            state = start_background(root, port, config, timeout_s=timeout, runtime=runtime, address=address)
    except ServiceError as exc:
        _fail(str(exc), code=1 if "exited" in str(exc) or "healthy" in str(exc) else 2)
    if json_out:
        typer.echo(json.dumps(state))
    else:
        typer.echo(f"memlane is serving on {state['url']} (API docs: {state['url']}/docs)")
        if state.get("dashboard_url"):
            typer.echo(f"Ray dashboard: {state['dashboard_url']} (token in ~/.ray/auth_token)")
        if state.get("metrics_export_port"):
            # what infra/prometheus/ scrapes (docs/operations.md): the service's own /metrics on
            # the one-process runtime, Ray's metrics agent under --runtime ray
            typer.echo(f"metrics (Prometheus): http://127.0.0.1:{state['metrics_export_port']}/metrics")
        typer.echo("stop it with: memlane serve --stop" + (f" --data-dir {root}" if data_dir else ""))
