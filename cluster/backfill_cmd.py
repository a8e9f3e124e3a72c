"""``memlane backfill``: retain a large corpus in parallel on Ray Data.

Registered in the CLI with ``app.command()(backfill)``. The corpus is read and validated first
(every turn against the store's limits: a bad one is a reject, and past ``--max-reject-share``
nothing starts). Without ``--address`` it starts a local Ray and a Milvus Lite server over the
data directory (or uses the one ``memlane serve`` runs there), both on 127.0.0.1, and stops
what it started at the end (Ctrl-C included). With ``--address`` it joins that cluster and writes to ``--milvus-uri``
(or ``MEMLANE_STORE__MILVUS_URI``), which every node must reach.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from cluster.common import FILE_ERRORS, DataDir, MilvusUri, RayAddress, counted, fail, problem
from pipelines.job import worker_settings  # the one definition; this module's name for it

FORMAT_CHOICES = ("auto", "locomo", "longmemeval", "jsonl", "parquet")


def _peak_rss_mb() -> float | None:
    """Peak RSS of this (driver) process in MB (resource.getrusage; Ray workers not included)."""
    try:
        import resource

        self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return round(self_kb / 1024, 1)
    except Exception:  # noqa: BLE001
        return None


def _format(summary: dict) -> str:
    lines = [
        f"backfill: {counted(summary['banks'], 'bank')} ({summary['retained_banks']} retained, "
        f"{summary['skipped_banks']} unchanged since the last run, {summary['failed_banks']} failed)",
        f"  {counted(summary['turns'], 'turn')} -> {counted(summary['memories'], 'memory', 'memories')}, "
        f"{counted(summary['entities'], 'entity', 'entities')}, {counted(summary['links'], 'link')}",
        f"  {counted(summary['rejects'], 'rejected record')} ({summary['reject_share']:.2%})"
        + (f", reasons in {summary['rejects_path']}" if summary["rejects"] else ""),
        f"  {summary['wall_s']:.1f}s wall, {summary['turns_per_s']:.1f} turns/s "
        f"({counted(summary['workers'], 'worker')}; read {summary['read_s']:.1f}s; "
        f"{summary['total_s']:.1f}s with cluster start and stop)",
    ]
    if "consolidate" in summary:
        from cluster.consolidate_cmd import format_summary

        lines.append(format_summary(summary["consolidate"]))
    elif summary.get("stale_tree_sessions") or summary.get("stale_facts"):
        lines.append(
            f"  left for `memlane consolidate`: {summary['stale_tree_sessions']} tree sessions and "
            f"{summary['stale_facts']} facts of consolidated banks changed"
        )
    return "\n".join(lines)


def backfill(
    path: Path = typer.Argument(..., help="A corpus file or a directory of them."),
    format: str = typer.Option("auto", "--format", help="auto | locomo | longmemeval | jsonl | parquet"),
    address: str | None = RayAddress,
    data_dir: Path | None = DataDir,
    milvus_uri: str | None = MilvusUri,
    workers: int | None = typer.Option(
        None, "--workers", help="Retain actors (default: one per CPU, or per GPU)."
    ),
    group_turns: int = typer.Option(
        1024,
        "--group-turns",
        help="Turns per Ray Data row (whole banks are packed up to this; the ledger is written per row).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    max_reject_share: float = typer.Option(
        0.01, "--max-reject-share", help="Fail (exit 2) when more than this share of records is rejected."
    ),
    vllm_model: str | None = typer.Option(
        None,
        "--vllm-model",
        help="Extract facts with this model on the cluster's GPUs "
        "(ray.data.llm + vLLM, the gpu extra); chunks it "
        "cannot parse fall back to the rules.",
    ),
    vllm_replicas: int = typer.Option(1, "--vllm-replicas", min=1, help="vLLM engines (one per GPU)."),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Show Ray's logs and Ray Data's progress on the terminal instead of DATA_DIR/backfill.log.",
    ),
    consolidate: bool = typer.Option(
        False,
        "--consolidate",
        help="Then build the temporal tree of every bank written (memlane consolidate's job, same cluster).",
    ),
) -> None:
    """Backfill a corpus (LoCoMo, LongMemEval, JSONL/Parquet records) into memory banks on Ray."""
    from pydantic import ValidationError

    from memlane.errors import MemlaneError
    from memlane.settings import Settings

    try:
        if format not in FORMAT_CHOICES:
            raise ValueError(f"--format must be one of {', '.join(FORMAT_CHOICES)}, not {format!r}")
        if not 0.0 <= max_reject_share <= 1.0:
            raise ValueError(f"--max-reject-share must be in [0, 1], got {max_reject_share}")
        if workers is not None and workers < 1:
            raise ValueError(f"--workers must be >= 1, got {workers}")
        if group_turns < 1:
            raise ValueError(f"--group-turns must be >= 1, got {group_turns}")
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file or directory")
        settings = Settings(data_dir=data_dir) if data_dir else Settings()
        uri = milvus_uri or settings.store.milvus_uri
        if vllm_model is not None:
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                raise ValueError(
                    "--vllm-model needs vLLM: install the gpu extra "
                    "(pip install 'memlane[gpu]') on a machine with GPUs"
                )
        if address and not uri:
            raise ValueError(
                "--address needs --milvus-uri (or MEMLANE_STORE__MILVUS_URI): the workers "
                "of a cluster cannot share a local Milvus Lite directory"
            )
    except (MemlaneError, ValueError, ValidationError, *FILE_ERRORS) as exc:
        fail(problem(exc))

    from pipelines.backfill import BackfillConfig, RejectLimitExceeded, prepare_backfill

    overrides = worker_settings(settings)
    cfg = BackfillConfig(
        path=path,
        milvus_uri=uri or "",
        data_dir=settings.data_dir,
        fmt=format,
        workers=workers,
        group_turns=group_turns,
        max_reject_share=max_reject_share,
        progress=not json_out or sys.stderr.isatty(),
        settings=overrides,
    )
    if vllm_model is not None:
        from pipelines.llm_extract import VLLMExtractConfig

        cfg.vllm = VLLMExtractConfig(model_source=vllm_model, concurrency=vllm_replicas)
    summary = None
    t0 = time.perf_counter()
    if not verbose:
        cfg.progress = False  # Ray Data's bars would only reach the log: ours is drawn instead
    try:
        # Read and validate before starting anything: bad input fails in seconds.
        plan = prepare_backfill(cfg)
        with _quiet(settings.data_dir, verbose, json_out, plan) as on_result:
            summary = _run(cfg, plan, settings, address, uri, on_result, consolidate)
    except RejectLimitExceeded as exc:
        if json_out:
            typer.echo(json.dumps(_public(exc.summary.as_dict())))
        fail(str(exc))
    except (MemlaneError, ValueError, ValidationError, *FILE_ERRORS) as exc:
        fail(problem(exc))
    except KeyboardInterrupt:
        typer.echo(
            "backfill interrupted: finished banks are in the ledger; run the same command "
            "again to finish (banks already written are skipped)",
            err=True,
        )
        raise typer.Exit(code=130) from None

    out = summary.as_dict()
    out["total_s"] = round(time.perf_counter() - t0, 3)  # with cluster start and stop
    out["peak_rss_mb_driver"] = _peak_rss_mb()
    if json_out:
        typer.echo(json.dumps(_public(out)))
    else:
        typer.echo(_format(out))


LOG_FILE = "backfill.log"


def _run(cfg, plan, settings, address: str | None, uri: str | None, on_result, consolidate: bool = False):
    """Start or join Ray (and a local Milvus Lite server when no URI is set), run the backfill
    (then, with ``consolidate``, the tree of every bank it wrote), stop what was started."""
    from pipelines.backfill import run_backfill as _retain

    def run_backfill(cfg, plan, on_result=None):
        if not consolidate:
            return _retain(cfg, plan, on_result=on_result)
        return _retain_then_consolidate(cfg, plan, on_result, _retain)

    from cluster.consolidate_cmd import ray_session, store_uri

    # The Milvus server every worker reaches: the one given, the running service's Milvus Lite
    # server (said in one line), or one started here over the data directory; then Ray.
    with store_uri(settings, uri) as store:
        cfg.milvus_uri = store
        with ray_session(address):
            return run_backfill(cfg, plan, on_result=on_result)


def _retain_then_consolidate(cfg, plan, on_result, retain):
    """The backfill, then ``memlane consolidate``'s job over the banks it wrote (those it
    skipped as unchanged included: their trees are checked, and written only where missing or
    stale); the tree summary goes in the backfill's as ``consolidate``."""
    from cluster.consolidate_cmd import run_stage
    from pipelines.consolidate import ConsolidateConfig

    banks = [bank.bank_id for bank, _, _ in plan.banks]
    failed: set[str] = set()

    def seen(rec: dict) -> None:
        if rec["status"] != "ok":
            failed.add(rec["bank_id"])
        if on_result is not None:
            on_result(rec)

    summary = retain(cfg, plan, on_result=seen)
    ccfg = ConsolidateConfig(
        milvus_uri=cfg.milvus_uri,
        data_dir=Path(cfg.data_dir).resolve(),
        workers=cfg.workers,
        progress=cfg.progress,
        settings=cfg.settings,
        runtime_env=cfg.runtime_env,
    )
    bars = getattr(on_result, "tree", None)
    tree = run_stage(
        ccfg,
        [b for b in banks if b not in failed],
        on_result=bars.advance if bars else None,
        on_plan=bars.plan if bars else None,
    )
    summary.extra["consolidate"] = tree.as_dict()
    return summary


@contextmanager
def _quiet(data_dir: Path, verbose: bool, json_out: bool, plan) -> Iterator[Callable[[dict], None] | None]:
    """Unless ``verbose``: Ray's output to ``DATA_DIR/backfill.log`` (path printed first) and a
    progress bar of turns retained on the terminal; yields the per-bank result callback."""
    if verbose:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cluster.console import output_to_log
    from cluster.consolidate_cmd import UnitsBar

    log_path = Path(data_dir).resolve() / LOG_FILE
    typer.echo(f"logs: {log_path}", err=True)
    turns = {bank.bank_id: bank.n_turns for bank, _, _ in plan.banks}
    with output_to_log(log_path, "memlane backfill") as terminal:
        console = Console(file=terminal)
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("turns"),
            TimeElapsedColumn(),
            console=console,
            # Only on a terminal: in CI or a pipe the summary says it all.
            disable=json_out or not console.is_terminal,
        )
        task = bar.add_task("starting Ray + Milvus Lite", total=sum(turns.values()))

        def advance(rec: dict) -> None:
            bar.update(task, description="retain", advance=turns.get(rec["bank_id"], 0))

        class Tree(UnitsBar):
            def plan(self, banks: list[tuple[str, int]]) -> None:
                # Banks unchanged since the last run are skipped without a result: count them done.
                bar.update(task, description="retain", completed=sum(turns.values()))
                super().plan(banks)

        advance.tree = Tree(bar)  # type: ignore[attr-defined] - the --consolidate stage's bar

        with bar:
            yield advance
            bar.update(task, description="retain", completed=sum(turns.values()))


def _public(summary: dict) -> dict:
    """The summary with the headline keys first."""
    head = ("banks", "turns", "memories", "entities", "links", "rejects", "wall_s", "turns_per_s")
    return {**{k: summary[k] for k in head}, **{k: v for k, v in summary.items() if k not in head}}
