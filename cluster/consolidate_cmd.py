"""``memlane consolidate``: build banks' temporal trees in parallel on Ray Data.

Registered in the CLI with ``app.command()(consolidate)``. Which banks: ``--bank B``
(repeatable), the banks a corpus file maps to (``PATH``, mapped as ``memlane backfill`` maps
it), or every bank of the data directory. Where (``--runner``, default ``auto``): a job of at
most ``MEMLANE_JOBS__CONSOLIDATE_IN_PROCESS_MAX_UNITS`` memory units runs bank after bank
through the service's API when ``memlane serve`` runs on the data directory, else on an engine
in this process (no Ray: a one-bank consolidate takes seconds); a larger one (or ``--runner
ray``, or ``--address``) on Ray Data: a Milvus Lite server over the data directory (or the
one ``memlane serve`` runs), the banks checked, then a local Ray on 127.0.0.1; it stops what
it started. ``memlane backfill --consolidate`` runs the
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

from cluster.common import (
    FILE_ERRORS,
    DataDir,
    MilvusUri,
    RayAddress,
    Runner,
    check_runner,
    counted,
    fail,
    in_process,
    problem,
)
from memlane.settings import is_secret

CONSOLIDATORS = ("auto", "rules", "llm")
LOG_FILE = "consolidate.log"


def format_summary(s: dict[str, Any]) -> str:
    """The terminal lines of a consolidation summary (``ConsolidateSummary.as_dict()``)."""
    lines = [
        f"consolidate: {counted(s['banks'], 'bank')} ({s['failed_banks']} failed), "
        f"{counted(s['leaves'], 'memory unit')}",
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
        f"{s['leaves_per_s']:.1f} memory units/s ({_where(s['workers'])})"
    )
    for f in s["failures"][:5]:
        lines.append(f"  failed {f['bank_id']}: {f['error']}")
    return "\n".join(lines)


def _where(workers: int) -> str:
    return "in one process" if workers == 1 else counted(workers, "worker")


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
    runner: str = Runner,
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
    """Consolidate banks' temporal trees (sessions, days, weeks, profile): a few banks in this
    process (or the running service), many on Ray; a re-run writes nothing."""
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
        check_runner(runner, address)
        if path is not None and not path.exists():
            raise FileNotFoundError(f"{path}: no such file or directory")
        for b in bank:
            from memlane.records import check_bank_id

            check_bank_id(b)
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
    except (MemlaneError, ValueError, ValidationError, *FILE_ERRORS) as exc:
        fail(problem(exc))

    from pipelines.job import worker_settings

    cfg = ConsolidateConfig(
        milvus_uri=uri or "",
        data_dir=Path(settings.data_dir).resolve(),
        workers=workers,
        consolidator=consolidator,
        progress=verbose,
        settings=worker_settings(settings),
    )
    limit = settings.jobs.consolidate_in_process_max_units
    try:
        summary = None
        planned = None
        if not address and runner != "ray":
            summary, planned = _small(cfg, wanted, uri, runner, limit, json_out, data_dir)
        if summary is None:
            summary = _on_ray(cfg, wanted, planned, uri, address, verbose, json_out)
    except (UnknownBanks, MemlaneError, ValueError, ValidationError, *FILE_ERRORS) as exc:
        fail(problem(exc))
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
        typer.echo(format_summary(out) + f"\n  ({out['total_s']:.1f}s in all)")
    if summary.failed_banks:
        raise typer.Exit(code=1)


def _small(cfg, wanted, uri, runner: str, limit: int, json_out: bool, data_dir):
    """The job without Ray when it is small (``in_process``): through the running service's
    API, or on an engine here. ``(summary, planned)``: the summary None when Ray should run
    it (``planned``: the banks, already checked)."""
    from cluster import route
    from pipelines.consolidate import plan_banks, run_in_process

    svc = None if uri else route.service(data_dir)
    if svc is not None:
        with svc:
            planned = plan_banks(_present(svc), lambda b: svc.call(svc.client.stats, b)["units"], wanted)
            if not in_process(runner, sum(u for _, u in planned), limit):
                return None, planned
            with _bars(None, False, json_out) as bars:
                bars.plan(planned)
                return _through(svc, planned, cfg.consolidator, bars.advance), planned
    from memlane.engine import Memory
    from memlane.settings import Settings
    from pipelines.job import worker_settings

    base = (
        Settings(data_dir=cfg.data_dir, store={"milvus_uri": uri})
        if uri
        else route.store_settings(data_dir, create=False)
    )
    if base is None:  # nothing stored yet: no bank to build, and no store created
        from pipelines.consolidate import ConsolidateSummary

        plan_banks([], lambda b: 0, wanted)  # a named bank is unknown
        return ConsolidateSummary(), []
    settings = Settings(**worker_settings(cfg.settings, base.store.milvus_uri, base.data_dir))
    with Memory(settings) as memory:
        planned = plan_banks(memory.store.list_banks(), memory.store.count_units, wanted)
        if not in_process(runner, sum(u for _, u in planned), limit):
            return None, planned
        with _bars(None, False, json_out) as bars:
            bars.plan(planned)
            return run_in_process(cfg, planned, memory, on_result=bars.advance), planned


def _present(svc) -> list[Any]:
    from types import SimpleNamespace

    return [SimpleNamespace(bank_id=b["bank_id"]) for b in svc.call(svc.client.list_banks)]


def _through(svc, planned: list[tuple[str, int]], consolidator: str | None, on_result):
    """Consolidate each bank through the service's API (``POST .../consolidate``); a bank the
    service fails on (a 5xx) is a failed row, as on Ray."""
    from actors.consolidate import report_row
    from pipelines.consolidate import summarise

    t0 = time.perf_counter()
    rows = []
    for bank_id, _ in planned:
        t = time.perf_counter()
        report, error = svc.call(_consolidate_one, svc.client, bank_id, consolidator)
        rec = report_row(bank_id, report, error, time.perf_counter() - t)
        rows.append(rec)
        on_result(rec)
    return summarise(rows, t0)


def _consolidate_one(client, bank_id: str, consolidator: str | None) -> tuple[dict | None, str]:
    """The bank's report, or None and why the service failed on it; a 4xx is raised."""
    from memlane_client import MemlaneAPIError

    try:
        return client.consolidate(bank_id, consolidator=consolidator), ""
    except MemlaneAPIError as exc:
        if exc.status < 500:
            raise
        return None, f"HTTP {exc.status}: {exc.message}"


def _on_ray(cfg, wanted, planned, uri, address, verbose: bool, json_out: bool):
    """The job on Ray Data: a local Ray (or ``address``) over a Milvus server every worker
    reaches (``uri``, the running service's, or one started here over the directory)."""
    from pipelines.consolidate import resolve_banks, run_consolidate

    with _bars(cfg.data_dir, verbose, json_out) as bars:
        with store_uri(_settings_of(cfg), uri) as store:
            cfg.milvus_uri = store
            # Check the banks before Ray starts: an unknown bank fails in seconds.
            if planned is None:
                planned = resolve_banks(cfg, wanted)
            bars.plan(planned)
            # No bank to build (an empty store): no Ray to start.
            with ray_session(address) if planned else nullcontext():
                return run_consolidate(cfg, planned, on_result=bars.advance)


def _settings_of(cfg):
    from memlane.settings import Settings

    return Settings(data_dir=cfg.data_dir)


@contextmanager
def store_uri(settings, uri: str | None) -> Iterator[str]:
    """The Milvus URI every worker can reach: ``uri`` when set, the service's Milvus Lite
    server when ``memlane serve`` runs, else a Milvus Lite server started here over the data
    directory (stopped at the end; it creates the store when nothing was stored there yet).
    ValueError when another process holds the directory."""
    if uri:
        yield uri
        return
    from cluster.datadir import store_access
    from cluster.local import MilvusLiteServer

    access = store_access(settings.data_dir)
    if access.mode == "server" and access.uri:
        if access.service is not None:
            from cluster.route import note

            note(f"through the Milvus Lite server of memlane serve on {access.path.parent} ({access.uri})")
        yield access.uri
        return
    if access.mode == "held":
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
def _bars(data_dir: Path | None, verbose: bool, json_out: bool) -> Iterator[UnitsBar]:
    """A progress bar on the terminal (a terminal only). With ``data_dir`` and not ``verbose``
    (a Ray job), Ray's output goes to ``DATA_DIR/consolidate.log`` (path printed first)."""
    if verbose:
        yield UnitsBar()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cluster.console import output_to_log

    def bar(console: Console) -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("memory units"),
            TimeElapsedColumn(),
            console=console,
            disable=json_out or not console.is_terminal,
        )

    if data_dir is None:
        with bar(Console(stderr=True)) as progress:
            yield UnitsBar(progress)
        return
    log_path = Path(data_dir).resolve() / LOG_FILE
    typer.echo(f"logs: {log_path}", err=True)
    with output_to_log(log_path, "memlane consolidate") as terminal:
        with bar(Console(file=terminal)) as progress:
            yield UnitsBar(progress)
