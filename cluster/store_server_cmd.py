"""``memlane store server start|stop|status``: the local Milvus server (cluster/milvus_server.py),
Milvus 2.3.5 of the ``milvus`` package on 127.0.0.1 only. ``start`` prints the setting that
points every command, the service and the Ray jobs at it. Bad input exits 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cluster.common import DataDir, fail

server_app = typer.Typer(no_args_is_help=True, help="The local Milvus server (Milvus 2.3.5, loopback only).")


def _root(data_dir: Path | None) -> Path:
    from memlane.settings import Settings

    return Path(data_dir or Settings().data_dir)


def start(
    port: int = typer.Option(19530, "--port", help="Port on 127.0.0.1."),
    data_dir: Path | None = DataDir,
) -> None:
    """Start the server detached (data and logs under the data directory) and print its URI."""
    from cluster import milvus_server

    if port <= 0 or port > 65535:
        fail(f"--port must be 1-65535, not {port}")
    root = _root(data_dir)
    told: list[bool] = []

    def waiting() -> None:  # called once the checks passed and the server is starting
        if not told:
            told.append(True)
            typer.echo(f"starting the Milvus server for {root} (about 10 s)", err=True)

    try:
        server = milvus_server.start(root, port=port, progress=waiting)
    except milvus_server.MilvusServerError as exc:
        fail(str(exc))
    typer.echo(f"Milvus server at {server.uri} (pid {server.pid}, log {server.log})", err=True)
    for key, value in server.env().items():
        typer.echo(f"export {key}={value}")
    where = f" --data-dir {root}" if data_dir else ""
    typer.echo(f"stop it with: memlane store server stop{where}", err=True)


def stop(data_dir: Path | None = DataDir) -> None:
    """Stop the server of the data directory (Milvus flushes and exits, at most 60 s)."""
    from cluster import milvus_server

    root = _root(data_dir)
    typer.echo("stopped" if milvus_server.stop(root) else f"no Milvus server runs for {root}")


def status(data_dir: Path | None = DataDir) -> None:
    """Print the server of the data directory as JSON (exit 1 when none runs)."""
    from cluster import milvus_server

    root = _root(data_dir)
    state = milvus_server.status(root)
    if state is None:
        typer.echo(f"no Milvus server runs for {root}")
        raise typer.Exit(code=1)
    typer.echo(json.dumps(state))


def register(store_app: typer.Typer) -> None:
    """Add ``memlane store server`` to the ``memlane store`` group."""
    server_app.command(help=start.__doc__)(start)
    server_app.command(help=stop.__doc__)(stop)
    server_app.command(help=status.__doc__)(status)
    store_app.add_typer(server_app, name="server")
