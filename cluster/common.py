"""What the CLI's command modules share: the one-line failure (exit code 2), the mapping of
input errors to it, and the engine over a data directory. Its own module so that ``cli`` and
the command modules it registers (``eval_cmd``, ``llm_cmd``) import it, not each other."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NoReturn

import typer

DataDir = typer.Option(None, "--data-dir", help="Data directory (default: MEMLANE_DATA_DIR or ./.memlane).")
# The Ray jobs' options (backfill, consolidate)
RayAddress = typer.Option(
    None,
    "--address",
    help="Ray cluster to join (ray://host:10001 or auto); default: a local Ray on 127.0.0.1.",
)
MilvusUri = typer.Option(
    None,
    "--milvus-uri",
    help="Milvus server for the workers; default: a Milvus Lite server over the data directory.",
)


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` (whitespace collapsed to one line) and exit with code 2."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code=2)


@contextmanager
def errors() -> Iterator[None]:
    """Turn the engine's input errors into exit code 2 with one line."""
    from pydantic import ValidationError

    from memlane.errors import MemlaneError

    try:
        yield
    except (MemlaneError, ValueError, ValidationError, FileNotFoundError, IsADirectoryError) as exc:
        fail(" ".join(str(exc).split()) or type(exc).__name__)


def open_memory(data_dir: Path | None):
    """The engine over ``data_dir`` (default: the settings' data directory); a context manager."""
    from memlane.engine import Memory
    from memlane.settings import Settings

    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    return Memory(settings)
