"""``memlane reembed``: re-embed banks with another embedder, in parallel on Ray Data
(pipelines/reembed.py), switching each bank's embedder record when its vectors are all the
target's.

Registered in the CLI with ``app.command()(reembed)``. Which banks: ``--bank B`` (repeatable)
or ``--all``; the target: ``--embedder NAME`` (default: ``MEMLANE_MODELS__EMBEDDER``). Where
(``--runner``, default ``auto``): at most ``MEMLANE_JOBS__REEMBED_IN_PROCESS_MAX_UNITS`` memory
units to re-embed run bank after bank in this process (on the service's Milvus Lite server when
``memlane serve`` runs: its API has no re-embed); more (or ``--runner ray``, or ``--address``)
on Ray Data: the store reached as ``memlane consolidate`` does (the service's Milvus Lite server,
or one started here), the banks checked, then a local Ray on 127.0.0.1; it stops what it
started. Exit 0 when every bank is on the target, 1 when one failed (run it again to
finish it), 2 for bad input (an unknown bank or embedder name).
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, get_args

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

LOG_FILE = "reembed.log"


def embedder_names() -> tuple[str, ...]:
    """The embedders ``models.embedder`` takes (memlane/settings/areas.py)."""
    from memlane.settings.areas import ModelSettings

    return get_args(ModelSettings.model_fields["embedder"].annotation)


def format_summary(s: dict[str, Any]) -> str:
    """The terminal lines of a re-embed summary (``ReembedSummary.as_dict()``)."""
    lines = [
        f"reembed to {s['target']}: {counted(s['banks'], 'bank')}, {s['done']} re-embedded, "
        f"{s['unchanged']} already on {s['target']} (nothing to do), {s['failed_banks']} failed",
        f"  {counted(s['units'], 'memory unit')} and {counted(s['tree_nodes'], 'tree node')} re-embedded "
        f"in {s['wall_s']:.1f}s ({s['rows_per_s']:.1f} rows/s, "
        f"{'in one process' if s['workers'] == 1 else counted(s['workers'], 'worker')})",
    ]
    for f in s["failures"][:5]:
        lines.append(f"  failed {f['bank_id']}: {f['error']} (run memlane reembed again to finish it)")
    return "\n".join(lines)


def reembed(
    bank: list[str] = typer.Option([], "--bank", help="A bank to re-embed (repeatable)."),
    all_banks: bool = typer.Option(False, "--all", help="Re-embed every bank."),
    embedder: str | None = typer.Option(
        None, "--embedder", help="The target: minilm | bge-small (default: MEMLANE_MODELS__EMBEDDER)."
    ),
    runner: str = Runner,
    address: str | None = RayAddress,
    data_dir: Path | None = DataDir,
    milvus_uri: str | None = MilvusUri,
    workers: int | None = typer.Option(
        None, "--workers", help="Re-embed actors (default: one per CPU, or per GPU)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Show Ray's logs and Ray Data's progress instead of DATA_DIR/reembed.log.",
    ),
) -> None:
    """Re-embed banks' vectors (units, tree nodes) with another embedder: a few banks in this
    process, many on Ray; resumable."""
    from pydantic import ValidationError

    from memlane.errors import MemlaneError
    from memlane.settings import Settings
    from pipelines.consolidate import UnknownBanks

    t0 = time.perf_counter()
    try:
        if bool(bank) == all_banks:
            raise ValueError("name the banks to re-embed with --bank B (repeatable), or --all")
        names = embedder_names()
        if embedder is not None and embedder not in names:
            raise ValueError(f"unknown embedder {embedder!r}: --embedder takes {' or '.join(names)}")
        if workers is not None and workers < 1:
            raise ValueError(f"--workers must be >= 1, got {workers}")
        check_runner(runner, address)
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
    except (MemlaneError, ValueError, ValidationError, *FILE_ERRORS) as exc:
        fail(problem(exc))

    from pipelines.job import worker_settings
    from pipelines.reembed import ReembedConfig

    cfg = ReembedConfig(
        milvus_uri=uri or "",
        data_dir=Path(settings.data_dir).resolve(),
        embedder=embedder or settings.models.embedder,
        workers=workers,
        progress=verbose,
        settings=worker_settings(settings),
    )
    wanted = list(bank) if bank else None
    limit = settings.jobs.reembed_in_process_max_units
    try:
        summary, planned = None, None
        if not address and runner != "ray":
            summary, planned = _small(cfg, wanted, uri, runner, limit, data_dir)
        if summary is None:
            summary = _on_ray(cfg, settings, wanted, planned, uri, address, verbose)
    except (UnknownBanks, MemlaneError, ValueError, ValidationError, *FILE_ERRORS) as exc:
        fail(problem(exc))
    except KeyboardInterrupt:
        typer.echo(
            "reembed interrupted: the banks not finished stay marked (recall and retain refuse "
            "them); run it again to finish them",
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


def _todo_units(planned, target: str) -> int:
    return sum(p.units for p in planned if p.pending or p.source != target)


def _small(cfg, wanted, uri, runner: str, limit: int, data_dir):
    """The job in this process when it is small (``in_process``), on an engine whose embedder
    is the target (the running service's Milvus Lite server when it runs: its API has no
    re-embed). ``(summary, planned)``: the summary None when Ray should run it."""
    from cluster import route
    from memlane.engine import Memory
    from memlane.settings import Settings
    from pipelines.job import worker_settings
    from pipelines.reembed import plan_banks, run_reembed

    base = (
        Settings(data_dir=cfg.data_dir, store={"milvus_uri": uri})
        if uri
        else route.store_settings(data_dir, create=False)
    )
    if base is None:  # nothing stored yet: no bank to re-embed, and no store created
        from pipelines.consolidate import plan_banks as check_named

        check_named([], lambda b: 0, wanted)  # a named bank is unknown
        from pipelines.reembed import ReembedSummary

        return ReembedSummary(target=cfg.embedder), []
    local = worker_settings(cfg.settings, base.store.milvus_uri, base.data_dir)
    local["models"] = {**local.get("models", {}), "embedder": cfg.embedder}
    with Memory(Settings(**local)) as memory:
        planned = plan_banks(memory.store, wanted)
        if not in_process(runner, _todo_units(planned, cfg.embedder), limit):
            return None, planned
        return run_reembed(cfg, planned, memory=memory), planned


def _on_ray(cfg, settings, wanted, planned, uri, address, verbose: bool):
    """The job on Ray Data over a Milvus server every worker reaches (as consolidate's)."""
    from cluster.consolidate_cmd import ray_session, store_uri
    from pipelines.reembed import resolve_banks, run_reembed

    with store_uri(settings, uri) as store:
        cfg.milvus_uri = store
        # Check the banks before Ray starts: an unknown bank fails in seconds.
        if planned is None:
            planned = resolve_banks(cfg, wanted)
        busy = any(p.pending or p.source != cfg.embedder for p in planned)
        with _logged(settings.data_dir, verbose or not busy), ray_session(address) if busy else nullcontext():
            return run_reembed(cfg, planned)


def _logged(data_dir: Path, verbose: bool):
    """Unless ``verbose``: Ray's output to ``DATA_DIR/reembed.log`` (path printed first)."""
    if verbose:
        return nullcontext()
    from cluster.console import output_to_log

    log_path = Path(data_dir).resolve() / LOG_FILE
    typer.echo(f"logs: {log_path}", err=True)
    return output_to_log(log_path, "memlane reembed")
