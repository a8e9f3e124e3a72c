"""What the CLI's command modules share: the one-line failure (exit code 2), the mapping of
input errors to it, and the engine over a data directory. Its own module so that ``cli`` and
the command modules it registers (``eval_cmd``, ``llm_cmd``, ...) import it, not each other."""

from __future__ import annotations

import shlex
import sys
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

RUNNERS = ("auto", "process", "ray")
Runner = typer.Option(
    "auto",
    "--runner",
    help="auto: this process (or the running service) up to MEMLANE_JOBS__*_IN_PROCESS_MAX_UNITS "
    "memory units, Ray Data above; process; ray.",
)


def check_runner(runner: str, address: str | None) -> None:
    """ValueError for a ``--runner`` that is not one, or one that contradicts ``--address``."""
    if runner not in RUNNERS:
        raise ValueError(f"--runner must be one of {', '.join(RUNNERS)}, not {runner!r}")
    if runner == "process" and address:
        raise ValueError("--runner process and --address exclude each other: --address is a Ray cluster")


def in_process(runner: str, units: int, limit: int) -> bool:
    """Whether a job of ``units`` memory units runs here: asked, or small enough (``limit``)."""
    return runner == "process" or (runner == "auto" and units <= limit)


_SKIP_TEARDOWN: list[bool] = []


def skip_teardown() -> None:
    """Say that this command closed everything it opened and has nothing left to write, so
    the ``memlane`` entry point may end the process without the interpreter's teardown."""
    _SKIP_TEARDOWN.append(True)


def teardown_skippable() -> bool:
    return bool(_SKIP_TEARDOWN)


def counted(n: int, one: str, many: str | None = None) -> str:
    """``1 memory``, ``2 memories``, ``0 banks``: a count with its noun in the right number
    (``many`` for an irregular plural; else ``one`` + s). Every count the CLI prints."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def command_line() -> str:
    """The command line that reproduces this run (written into eval and bench reports)."""
    return "memlane " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` (whitespace collapsed to one line) and exit with code 2."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code=2)


@contextmanager
def errors() -> Iterator[None]:
    """Turn the engine's input errors, a bad setting and a bad path into exit code 2 with one
    line (:func:`problem`)."""
    from pydantic import ValidationError

    from memlane.errors import MemlaneError

    try:
        yield
    except (MemlaneError, ValueError, ValidationError, *FILE_ERRORS) as exc:
        fail(problem(exc))


# What a path given on the command line can be wrong with: expected, so one line, no traceback.
FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError)


def problem(exc: BaseException) -> str:
    """An expected error's one line: each bad field of a setting or a request and why, a path
    and what is wrong with it, or the message."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        from memlane.errors import InvalidInput

        return str(InvalidInput.from_validation(exc))
    if isinstance(exc, OSError):
        return file_error(exc)
    return " ".join(str(exc).split()) or type(exc).__name__


def file_error(exc: OSError) -> str:
    """``PATH: what is wrong`` for an OSError naming a file, else its message."""
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return " ".join(str(exc).split()) or type(exc).__name__


def open_memory(data_dir: Path | None, *, bank: str | None = None, update: dict | None = None):
    """The engine over ``data_dir``'s store (default: the settings' data directory), reached as
    :func:`cluster.datadir.store_access` decides (the service's Milvus Lite server when
    ``memlane serve`` runs there, said in one line); a context manager. Exit code 2 when
    another process holds the directory; ``bank``: a bank the command needs (nothing stored yet:
    an unknown bank, exit code 2, no store created); ``update``: settings this command changes."""
    from cluster.route import open_memory as route_open

    return route_open(data_dir, bank=bank, update=update)
