"""``memlane mcp``: the MCP server over stdio, for desktop agents (Claude Desktop, any stdio MCP
client). Against the embedded engine on the data directory, or with ``--url`` against a
running service. stdout carries the protocol and nothing else: logs go to stderr (or
``--log-file``), and while serving the SDK points fd 1 at stderr, so a stray print from a
library or a child process (Milvus Lite) cannot corrupt the stream."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import typer

from cluster.common import DataDir, fail


def _log_to(log_file: Path | None, level: str) -> None:
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]  # before the SDK's basicConfig, which then adds nothing
    root.setLevel(level)


def mcp_command(
    bank: str | None = typer.Option(
        None, "--bank", help="Default bank for tools called without one (e.g. the user's bank)."
    ),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Use this service (http://127.0.0.1:8000); default: the one `memlane serve` runs on the "
        "data directory, else the engine on the directory.",
    ),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="MEMLANE_API_KEY",
        help="Service API key with --url (default MEMLANE_API_KEY).",
    ),
    log_file: Path | None = typer.Option(None, "--log-file", help="Write logs here instead of stderr."),
    log_level: str = typer.Option("WARNING", "--log-level", help="DEBUG | INFO | WARNING | ERROR"),
    data_dir: Path | None = DataDir,
) -> None:
    """Serve Memlane's tools (retain, recall, reflect, list_banks, create_bank, delete_document)
    to an MCP client over stdin/stdout."""
    from memlane.records import check_bank_id

    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        fail(f"--log-level must be DEBUG, INFO, WARNING or ERROR, not {log_level!r}")
    if bank is not None:
        try:
            check_bank_id(bank)
        except ValueError as exc:
            fail(f"--bank: {exc}")
    if url and data_dir:
        fail("--url and --data-dir exclude each other: the service owns its data directory")
    _log_to(log_file, log_level.upper())

    from cluster import route
    from serve.mcp_backends import client_lifespan, engine_lifespan
    from serve.mcp_server import build_mcp_server

    # The service running on the data directory answers as --url would (said on stderr).
    target = (url, api_key) if url else route.service_target(data_dir, bank=bank, api_key=api_key)
    if target is not None:
        lifespan = client_lifespan(*target)
    else:
        from cluster.common import open_memory

        lifespan = engine_lifespan(lambda: open_memory(data_dir))
    server = build_mcp_server(lifespan, default_bank=bank)
    try:
        server.run("stdio")
    except Exception as exc:  # noqa: BLE001 - e.g. the data directory held by another process
        logging.getLogger("memlane.mcp").exception("the MCP server stopped")
        leaf = _first_leaf(exc)
        fail(f"the MCP server stopped: {type(leaf).__name__}: {leaf}")


def _first_leaf(exc: BaseException) -> BaseException:
    # anyio reports a failure in a task group as an exception group
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
