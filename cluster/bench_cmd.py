"""``memlane bench suite``: the performance suite, each figure beside its baseline of the same
run; the service's load runner ``benchmarks/serve_bench.py`` reuses; and ``memlane bench NAME``
for every script in ``benchmarks.SCRIPTS`` (:func:`register`)."""

from __future__ import annotations

import functools
import json
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path

import typer

from cluster.common import command_line, errors

SERVE_MISSING = "skipped: benchmarks/serve_load.py not available"


def serve_bench_runner():
    """:func:`benchmarks.serve_load.run_serve_bench` bound to this package's service (start,
    stop, joining its Ray cluster), or None when the load generator is not importable."""
    try:
        from benchmarks.serve_load import ServiceControl, run_serve_bench
    except ImportError:
        return None
    from cluster.local import connect_local, free_port
    from cluster.service import DEFAULT_CONFIG, start_background, stop

    control = ServiceControl(
        default_config=DEFAULT_CONFIG,
        start=start_background,
        stop=stop,
        connect=connect_local,
        free_port=free_port,
    )
    return functools.partial(run_serve_bench, service=control)


def bench_suite(
    sizes: list[int] = typer.Option(
        [1000, 10000, 100000, 1000000], "--size", help="Bank sizes (repeatable)."
    ),
    queries: int = typer.Option(200, "--queries"),
    retain_turns: int = typer.Option(1500, "--retain-turns", help="0 skips retain."),
    serve: bool = typer.Option(True, "--serve/--no-serve", help="Run the Serve section."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Where bench.json, bench.md and the plot go (default: <data-dir>/runs/bench-<time>).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    markdown_out: bool = typer.Option(False, "--markdown", help="Print the Markdown summary."),
    plots: bool = typer.Option(True, "--plots/--no-plots"),
    data_dir: Path = typer.Option(
        Path(".memlane-bench"), "--data-dir", help="Scratch data directory (emptied first)."
    ),
) -> None:
    """The performance suite: recall latency and footprint vs bank size, retain vs raw
    embedding, Serve req/s vs a trivial endpoint; each beside its baseline from the same run."""
    from benchmarks.suite import run_suite, suite_markdown, write_suite

    with errors():
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError("--size must be >= 1")
        if queries < 1:
            raise ValueError("--queries must be >= 1")
        if retain_turns < 0:
            raise ValueError("--retain-turns must be >= 0")
        serve_fn = serve_bench_runner() if serve else None
        # Not under data_dir: the suite empties that first.
        run_dir = out or Path(f"{data_dir}-runs") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}"
        report = run_suite(
            data_dir,
            sizes=sorted(set(sizes)),
            queries=queries,
            retain_turns=retain_turns,
            serve_bench=serve_fn,
            serve_skipped=SERVE_MISSING if serve else "skipped: --no-serve",
            command=command_line(),
        )
        write_suite(report, run_dir, plots=plots)
    typer.echo(f"run directory: {run_dir}", err=True)
    if json_out:
        typer.echo(json.dumps(report))
    else:
        typer.echo(suite_markdown(report) if markdown_out else _short(report))


def _short(report: dict) -> str:
    from benchmarks.engine import format_bench

    lines = [format_bench(report)]
    for f in report.get("footprint", []):
        lines.append(
            f"footprint at {f['memories']:,}: {f['rss_bytes_per_memory']} B/memory in "
            f"process, {f['disk_bytes_per_memory']} B on disk (raw vector "
            f"{f['raw_vector_bytes_per_memory']} B, raw text {f['raw_text_bytes_per_memory']} B)"
        )
    lines.append(f"serve: {report.get('serve')}")
    return "\n".join(lines)


def register(bench_app: typer.Typer) -> None:
    """Add ``memlane bench suite`` and one command per benchmark script to ``bench_app``."""
    from benchmarks import SCRIPTS, command_name

    bench_app.command("suite")(bench_suite)
    for module, summary in SCRIPTS.items():
        bench_app.command(
            command_name(module),
            help=f"{summary} [benchmarks/{module}.py]",
            # Every argument, --help included, is the script's to parse.
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            add_help_option=False,
        )(_script(command_name(module), module))


def _script(name: str, module: str) -> Callable[[typer.Context], None]:
    def run(ctx: typer.Context) -> None:
        # As ``python -m benchmarks.MODULE ARGS`` (its usage line names this command), in the
        # CLI's process: its configure_process limits hold, as for every memlane command.
        argv = sys.argv
        sys.argv = [f"memlane bench {name}", *ctx.args]
        try:
            runpy.run_module(f"benchmarks.{module}", run_name="__main__")
        finally:
            sys.argv = argv

    return run
