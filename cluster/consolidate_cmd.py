"""``memlane consolidate``: build banks' temporal trees in parallel on Ray Data.

Registered in the CLI with ``app.command()(consolidate)``. Which banks: ``--bank B``
(repeatable), the banks a corpus file maps to (``PATH``, mapped as ``memlane backfill`` maps
it), or every bank of the data directory. Without ``--address`` it starts a Milvus Lite server
over the data directory (or uses the one ``memlane serve`` runs), checks the banks, then starts
a local Ray on 127.0.0.1; it stops what it started. ``memlane backfill --consolidate`` runs the
same job (:func:`run_stage`) after its retain stage.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import typer

from cluster.common import DataDir, MilvusUri, RayAddress, fail
from memlane.settings import is_secret

CONSOLIDATORS = ("auto", "rules", "llm")
LOG_FILE = "consolidate.log"


def format_summary(s: dict[str, Any]) -> str:
    """The terminal lines of a consolidation summary (``ConsolidateSummary.as_dict()``)."""
    lines = [
        f"consolidate: {s['banks']} banks ({s['failed_banks']} failed), {s['leaves']} memory units",
        f"  {'level':<8} {'nodes':>7} {'written':>8} {'unchanged':>10}",
    ]
    for lv in s["nodes"]:
        lines.append(f"  {lv:<8} {s['nodes'][lv]:>7} {s['written'][lv]:>8} {s['unchanged'][lv]:>10}")
    lines.append(
        f"  {s['total_written']} written, {s['removed']} removed"
        + (f", {s['fallbacks']} LLM replies fell back to the rules" if s["fallbacks"] else "")
    )
    lines.append(
        f"  facts: {s.get('facts_superseded', 0)} superseded by a newer value, {s.get('facts_written', 0)} written"
    )
    lines.append(
        f"  {s['wall_s']:.1f}s wall, {s['nodes_per_s']:.1f} nodes/s written, "
        f"{s['leaves_per_s']:.1f} memory units/s ({s['workers']} workers)"
    )
    for f in s["failures"][:5]:
        lines.append(f"  failed {f['bank_id']}: {f['error']}")
    return "\n".join(lines)


def run_stage(
    cfg,
    wanted: list[str] | None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    on_plan: Callable[[list[tuple[str, int]]], None] | None = None,
):
    """Resolve the banks (``wanted`` or all) and consolidate them on the connected Ray
    cluster; the :class:`pipelines.consolidate.ConsolidateSummary`. ``on_plan`` receives the
    ``(bank, units)`` list before the job starts (for a progress bar)."""
    from pipelines.consolidate import resolve_banks, run_consolidate

    banks = resolve_banks(cfg, wanted)
    if on_plan is not None:
        on_plan(banks)
    return run_consolidate(cfg, banks, on_result=on_result)


def consolidate(
    path: Path | None = typer.Argument(
        None, help="A corpus file or directory: consolidate the banks it maps to (as backfill maps them)."
    ),
    bank: list[str] = typer.Option([], "--bank", help="A bank to consolidate (repeatable)."),
    format: str = typer.Option(
        "auto", "--format", help="PATH's format: auto | locomo | longmemeval | jsonl | parquet"
    ),
    consolidator: str | None = typer.Option(
        None, "--consolidator", help="auto | rules | llm (default: MEMLANE_TREE__CONSOLIDATOR, auto)."
    ),
    address: str | None = RayAddress,
    data_dir: Path | None = DataDir,
    milvus_uri: str | None = MilvusUri,
    workers: int | None = typer.Option(
        None, "--workers", help="Consolidation actors (default: one per CPU)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Show Ray's logs and Ray Data's progress instead of DATA_DIR/consolidate.log.",
    ),
) -> None:
    """Consolidate banks' temporal trees (sessions, days, weeks, profile) on Ray; a re-run writes nothing."""
    from pydantic import ValidationError

    from memlane.errors import MemlaneError
    from memlane.settings import Settings
    from pipelines.consolidate import ConsolidateConfig, UnknownBanks, corpus_banks

    t0 = time.perf_counter()
    try:
        if path is not None and bank:
            raise ValueError("give --bank or PATH, not both")
        if consolidator is not None and consolidator not in CONSOLIDATORS:
            raise ValueError(
                f"--consolidator must be one of {', '.join(CONSOLIDATORS)}, not {consolidator!r}"
            )
        if workers is not None and workers < 1:
            raise ValueError(f"--workers must be >= 1, got {workers}")
        if path is not None and not path.exists():
            raise FileNotFoundError(f"{path}: no such file or directory")
        settings = Settings(data_dir=data_dir) if data_dir else Settings()
        uri = milvus_uri or settings.store.milvus_uri
        if address and not uri:
            raise ValueError(
                "--address needs --milvus-uri (or MEMLANE_STORE__MILVUS_URI): the workers "
                "of a cluster cannot share a local Milvus Lite directory"
            )
        wanted: list[str] | None = list(bank) if bank else None
        if path is not None:
            wanted = corpus_banks(path, format)
    except (MemlaneError, ValueError, ValidationError, FileNotFoundError) as exc:
        fail(str(exc) or type(exc).__name__)

    from pipelines.job import worker_settings

    cfg = ConsolidateConfig(
        milvus_uri=uri or "",
        data_dir=Path(settings.data_dir).resolve(),
        workers=workers,
        consolidator=consolidator,
        progress=verbose,
        settings=worker_settings(settings),
    )
    try:
        with _quiet(settings.data_dir, verbose, json_out) as bars:
            with store_uri(settings, uri) as store:
                cfg.milvus_uri = store
                # Check the banks before Ray starts: an unknown bank fails in seconds.
                from pipelines.consolidate import resolve_banks

                planned = resolve_banks(cfg, wanted)
                bars.plan(planned)
                # No bank to build (an empty store): no Ray to start.
                with ray_session(address) if planned else nullcontext():
                    from pipelines.consolidate import run_consolidate

                    summary = run_consolidate(cfg, planned, on_result=bars.advance)
    except (UnknownBanks, MemlaneError, ValueError, ValidationError, FileNotFoundError) as exc:
        fail(str(exc) or type(exc).__name__)
    except KeyboardInterrupt:
        typer.echo(
            "consolidate interrupted: the banks finished are written; run it again to finish",
            err=True,
        )
        raise typer.Exit(code=130) from None
    out = summary.as_dict()
    out["total_s"] = round(time.perf_counter() - t0, 3)
    if json_out:
        typer.echo(json.dumps(out))
    else:
        typer.echo(format_summary(out) + f"\n  ({out['total_s']:.1f}s with cluster start and stop)")
    if summary.failed_banks:
        raise typer.Exit(code=1)


@contextmanager
def store_uri(settings, uri: str | None) -> Iterator[str]:
    """The Milvus URI every worker can reach: ``uri`` when set, the service's Milvus Lite
    server when ``memlane serve`` runs, else a Milvus Lite server started here over the data
    directory (stopped at the end). ValueError when another process holds the directory or
    nothing was stored there yet."""
    if uri:
        yield uri
        return
    from cluster.datadir import store_access
    from cluster.local import MilvusLiteServer

    access = store_access(settings.data_dir)
    if access.mode == "server" and access.uri:
        yield access.uri
        return
    if access.mode != "file":
        raise ValueError(access.why_not())
    server = MilvusLiteServer(settings.data_dir)
    server.start()
    try:
        yield server.uri
    finally:
        server.stop()


@contextmanager
def ray_session(address: str | None) -> Iterator[None]:
    """Join ``address`` (MEMLANE_* variables but secrets sent to the workers) or start a local
    Ray on 127.0.0.1; shut it down at the end."""
    import ray

    if address:
        ray.init(
            address=address,
            logging_level="WARNING",
            runtime_env={
                "env_vars": {
                    k: v for k, v in os.environ.items() if k.startswith("MEMLANE_") and not is_secret(k)
                }
            },
        )
    else:
        from cluster.local import start_local_ray

        start_local_ray()
    try:
        yield
    finally:
        ray.shutdown()


class UnitsBar:
    """A progress bar of memory units consolidated (banks finished, weighted by their size)."""

    def __init__(self, bar=None) -> None:
        self.bar = bar
        self.task = None
        self.units: dict[str, int] = {}

    def plan(self, banks: list[tuple[str, int]]) -> None:
        self.units = dict(banks)
        if self.bar is not None:
            self.task = self.bar.add_task("consolidate", total=sum(self.units.values()) or 1)

    def advance(self, rec: dict[str, Any]) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, advance=self.units.get(str(rec["bank_id"]), 0))


@contextmanager
def _quiet(data_dir: Path, verbose: bool, json_out: bool) -> Iterator[UnitsBar]:
    """Unless ``verbose``: Ray's output to ``DATA_DIR/consolidate.log`` (path printed first)
    and a progress bar on the terminal (a terminal only)."""
    if verbose:
        yield UnitsBar()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cluster.console import output_to_log

    log_path = Path(data_dir).resolve() / LOG_FILE
    typer.echo(f"logs: {log_path}", err=True)
    with output_to_log(log_path, "memlane consolidate") as terminal:
        console = Console(file=terminal)
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("memory units"),
            TimeElapsedColumn(),
            console=console,
            disable=json_out or not console.is_terminal,
        )
        with bar:
            yield UnitsBar(bar)
