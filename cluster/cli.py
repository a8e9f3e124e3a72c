"""The ``memlane`` command line. Bad input exits with code 2 and one line naming the problem."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable

import typer

from cluster.common import DataDir, counted, errors, open_memory

# The app with every command is ``app`` (module __getattr__ below); ``main`` registers only the
# command a command line names where it can.
_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Memlane: agent memory with retain, recall and reflect."
)
eval_app = typer.Typer(no_args_is_help=True, help="Measure recall quality on public benchmarks.")
bench_app = typer.Typer(no_args_is_help=True, help="Speed benchmarks (figures beside baselines).")
_app.add_typer(eval_app, name="eval")
_app.add_typer(bench_app, name="bench")


def _version(value: bool) -> None:
    if value:
        from cluster.status_cmd import version_line

        typer.echo(version_line())
        raise typer.Exit()


@_app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Memlane: agent memory with retain, recall and reflect."""


@_app.command()
def retain(
    file: Path = typer.Argument(..., help="LoCoMo JSON or JSONL of {speaker, text, timestamp, session_id}."),
    bank: str = typer.Option(..., "--bank", help="Bank id (created when missing)."),
    format: str = typer.Option("auto", "--format", help="auto | locomo | jsonl"),
    tag: list[str] = typer.Option([], "--tag", help="Tag every memory (repeatable)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    data_dir: Path | None = DataDir,
) -> None:
    """Retain a conversation file into a bank (validated whole before anything is written)."""
    import time

    with errors():
        # The whole input first (bank id, tags, every turn against the store's limits): bad
        # input fails before the store, a model or the bank is touched.
        from memlane.ingest import load_conversations
        from memlane.records import check_bank_id
        from memlane.retain.items import check_tags

        check_bank_id(bank)
        check_tags(tag)
        if format not in ("auto", "locomo", "jsonl"):
            raise ValueError(f"--format must be auto, locomo or jsonl, not {format!r}")
        conversations = load_conversations(file, format=format)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = sum(len(c.turns) for c in conversations)
    # One clock for the bar and the summary: both from here (the store's opening and the
    # models' loading included, which the engine's own report leaves out).
    t0 = time.perf_counter()
    with errors():
        with (
            Progress(
                TextColumn("retain"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=json_out,
                disable=not sys.stderr.isatty() and json_out,
            ) as bar,
            open_memory(data_dir) as memory,
        ):
            task = bar.add_task("turns", total=total)
            report = memory.retain(
                bank,
                [(c.document_id, c.turns) for c in conversations],
                tags=tag,
                progress=lambda n: bar.advance(task, n),
            )
    out = report.as_dict()
    out["total_s"] = round(time.perf_counter() - t0, 3)
    if json_out:
        typer.echo(json.dumps(out))
    else:
        typer.echo(
            f"bank {bank}: {counted(out['turns'], 'turn')} -> {counted(out['units'], 'memory', 'memories')} written "
            f"({out['unchanged']} unchanged, {out['removed']} removed), "
            f"{counted(out['chunks'], 'chunk')}, {counted(out['entities'], 'entity', 'entities')} touched, "
            f"{counted(out['links'], 'stored link')} in {out['total_s']:.1f}s "
            f"({out['seconds']:.1f}s writing, the rest opening the store and loading the models)"
        )
        stale = out["stale"]
        if stale["tree_sessions"] or stale["facts"]:
            typer.echo(
                f"left for `memlane consolidate --bank {bank}`: {stale['tree_sessions']} tree sessions "
                f"and {stale['facts']} facts changed"
            )


@bench_app.command("engine")
def bench_engine(
    sizes: list[int] = typer.Option(
        [1000, 10000, 100000], "--size", help="Bank sizes written through the store."
    ),
    index_sizes: list[int] = typer.Option(
        [],
        "--index-size",
        help="Bank sizes in index mode (straight into the in-process index, not the store): "
        "recall with exact dense search beside the HNSW graph, and the graph's recall@k.",
    ),
    queries: int = typer.Option(200, "--queries"),
    retain_turns: int = typer.Option(1500, "--retain-turns"),
    budgets: list[str] = typer.Option(
        ["mid"],
        "--budget",
        help="Recall budgets (repeatable: low, mid, high), each timed on the same banks; the "
        "first also times the tree.",
    ),
    json_out: bool = typer.Option(False, "--json"),
    data_dir: Path | None = typer.Option(Path(".memlane-bench"), "--data-dir"),
) -> None:
    """Recall latency by bank size, and retain throughput beside raw embedding throughput."""
    from benchmarks.engine import format_bench, run_engine_bench

    with errors():
        bad = [b for b in budgets if b not in ("low", "mid", "high")]
        if bad:
            raise ValueError(f"--budget must be one of low, mid, high, not {bad[0]!r}")
        report = run_engine_bench(
            data_dir,
            sizes=sizes,
            queries=queries,
            retain_turns=retain_turns,
            index_sizes=index_sizes,
            budgets=list(dict.fromkeys(budgets)),
        )
    typer.echo(json.dumps(report) if json_out else format_bench(report))


def _register_recall() -> None:
    from cluster.recall_cmd import recall

    _app.command(help="Recall memories for a query, packed to a token budget.")(recall)


def _register_banks() -> None:
    from cluster.bank_cmds import register

    register(_app)


def _register_backfill() -> None:
    from cluster.backfill_cmd import backfill

    _app.command(help="Retain a large corpus in parallel on Ray Data (local Ray by default).")(backfill)


def _register_tree() -> None:
    from cluster.consolidate_cmd import consolidate
    from cluster.tree_cmd import tree

    _app.command(help="Build banks' temporal trees: a few in this process, many on Ray Data.")(consolidate)
    _app.command(help="Print a bank's temporal tree: level, interval and text of each node.")(tree)


def _register_reembed() -> None:
    from cluster.reembed_cmd import reembed

    _app.command(help="Re-embed banks with another embedder: a few in this process, many on Ray Data.")(
        reembed
    )


def _register_serve() -> None:
    from cluster.serve_cmd import serve_command

    _app.command("serve", help="Start the online service on 127.0.0.1 (or --stop it).")(serve_command)


def _register_mcp() -> None:
    from cluster.mcp_cmd import mcp_command

    _app.command(
        "mcp", help="Serve the MCP tools over stdio (the running service, --url one, or the engine)."
    )(mcp_command)


def _register_llm() -> None:
    from cluster.llm_cmd import register

    register(_app)


def _register_status() -> None:
    from cluster.status_cmd import status

    _app.command(help="What is running for a data directory: service, Ray, Milvus Lite, banks.")(status)


def _register_doctor() -> None:
    from cluster.doctor_cmd import doctor

    _app.command(help="Check every invariant of banks; exit 1 on a violation.")(doctor)


def _register_curated() -> None:
    from cluster.curated_cmd import register

    register(_app)


def _register_eval() -> None:
    from cluster.eval_cmd import register

    register(eval_app, bench_app)


def _register_config() -> None:
    from cluster.config_cmd import register

    register(_app)


def _register_store() -> None:
    from cluster.migrate_cmd import register

    register(_app)


_REGISTRARS = (
    _register_recall,
    _register_banks,
    _register_store,
    _register_backfill,
    _register_tree,
    _register_reembed,
    _register_serve,
    _register_mcp,
    _register_llm,
    _register_eval,
    _register_status,
    _register_doctor,
    _register_curated,
    _register_config,
)
# A command line naming one of these registers that command alone: importing the other
# commands' modules and building their click commands took 27-42 ms of CPU against 3-5 ms for
# recall's alone (8 runs each, 2-core machine, Dec 2026), of an unknown bank's 0.6 s recall.
_ALONE = {"recall": _register_recall}
_registered: set[Callable[[], None]] = set()


def _register(*registrars: Callable[[], None]) -> typer.Typer:
    for registrar in registrars:
        if registrar not in _registered:
            registrar()
            _registered.add(registrar)
    return _app


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # every command, registered once on first use (tests, --help)
        return _register(*_REGISTRARS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    from cluster import common
    from cluster.console import quiet_model_loading

    quiet_model_loading()
    alone = _ALONE.get(sys.argv[1]) if len(sys.argv) > 1 else None
    if alone is not _register_recall:  # recall sets them once NumPy is loaded (recall_cmd.py)
        from memlane.runtime import configure_process

        configure_process()
    app = _register(alone) if alone else _register(*_REGISTRARS)
    try:
        app()
    except SystemExit as exc:
        if common.teardown_skippable():
            # The command closed everything it opened and wrote nothing (recall): the
            # interpreter's teardown (modules, gRPC's and ONNX Runtime's finalisers) only adds
            # wall time, 0.25-0.3 s of a 1.2-1.4 s recall here (py-spy: a fifth of its samples in
            # the main thread with no Python frame after the engine closed).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exc.code if isinstance(exc.code, int) else 1)
        raise


if __name__ == "__main__":
    main()
