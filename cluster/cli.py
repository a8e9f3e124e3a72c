"""The ``memlane`` command line. Bad input exits with code 2 and one line naming the problem."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import typer

from cluster.common import DataDir, errors, fail, open_memory

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Memlane: agent memory with retain, recall and reflect."
)
eval_app = typer.Typer(no_args_is_help=True, help="Measure recall quality on public benchmarks.")
bench_app = typer.Typer(no_args_is_help=True, help="Speed benchmarks (figures beside baselines).")
app.add_typer(eval_app, name="eval")
app.add_typer(bench_app, name="bench")


def _version(value: bool) -> None:
    if value:
        from cluster.status_cmd import version_line

        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Memlane: agent memory with retain, recall and reflect."""


@app.command()
def retain(
    file: Path = typer.Argument(..., help="LoCoMo JSON or JSONL of {speaker, text, timestamp, session_id}."),
    bank: str = typer.Option(..., "--bank", help="Bank id (created when missing)."),
    format: str = typer.Option("auto", "--format", help="auto | locomo | jsonl"),
    tag: list[str] = typer.Option([], "--tag", help="Tag every memory (repeatable)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    data_dir: Path | None = DataDir,
) -> None:
    """Retain a conversation file into a bank (validated whole before anything is written)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with errors():
        from memlane.ingest import load_conversations
        from memlane.records import check_bank_id

        check_bank_id(bank)
        if format not in ("auto", "locomo", "jsonl"):
            raise ValueError(f"--format must be auto, locomo or jsonl, not {format!r}")
        conversations = load_conversations(file, format=format)
        total = sum(len(c.turns) for c in conversations)
        with (
            open_memory(data_dir) as memory,
            Progress(
                TextColumn("retain"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=json_out,
                disable=not sys.stderr.isatty() and json_out,
            ) as bar,
        ):
            task = bar.add_task("turns", total=total)
            report = memory.retain(
                bank,
                [(c.document_id, c.turns) for c in conversations],
                tags=tag,
                progress=lambda n: bar.advance(task, n),
            )
    out = report.as_dict()
    if json_out:
        typer.echo(json.dumps(out))
    else:
        typer.echo(
            f"bank {bank}: {out['turns']} turns -> {out['units']} memories written "
            f"({out['unchanged']} unchanged, {out['removed']} removed), "
            f"{out['chunks']} chunks, {out['entities']} entities touched, "
            f"{out['links']} stored links in {out['seconds']:.1f}s"
        )
        stale = out["stale"]
        if stale["tree_sessions"] or stale["facts"]:
            typer.echo(
                f"left for `memlane consolidate --bank {bank}`: {stale['tree_sessions']} tree sessions "
                f"and {stale['facts']} facts changed"
            )


@app.command()
def recall(
    query: str = typer.Argument(..., help="What to remember."),
    bank: str = typer.Option(..., "--bank"),
    max_tokens: int = typer.Option(1024, "--max-tokens"),
    budget: str = typer.Option("mid", "--budget", help="low | mid | high"),
    type: list[str] = typer.Option([], "--type", help="world | experience | opinion | observation"),
    tag: list[str] = typer.Option([], "--tag"),
    include_chunks: bool = typer.Option(False, "--chunks"),
    trace: bool = typer.Option(False, "--trace"),
    level: list[int] = typer.Option(
        [], "--level", help="Temporal tree levels to climb to (repeatable, 1-5; 1 alone: flat recall)."
    ),
    planner: str | None = typer.Option(None, "--planner", help="auto | rules | llm | off (flat recall)"),
    as_of: datetime | None = typer.Option(
        None, "--as-of", help="Answer from what was known and valid then (ISO date or datetime, UTC)."
    ),
    history: bool | None = typer.Option(
        None,
        "--history/--no-history",
        help="Include superseded facts (after their successors); default: when the query asks about the past.",
    ),
    json_out: bool = typer.Option(False, "--json"),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Ask a running service (http://127.0.0.1:8000) instead of the local data directory.",
    ),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="MEMLANE_API_KEY", help="Service API key (default MEMLANE_API_KEY)."
    ),
    data_dir: Path | None = DataDir,
) -> None:
    """Recall memories for a query, packed to a token budget."""
    options = dict(
        max_tokens=max_tokens,
        budget=budget,
        types=type or None,
        tags=tag or None,
        include_chunks=include_chunks,
        trace=trace,
        levels=level or None,
        planner=planner,
        as_of=as_of.isoformat() if as_of else None,
        include_history=history,
    )
    if url:
        _recall_remote(url, api_key, bank, query, options, json_out)
        return
    with errors():
        with open_memory(data_dir) as memory:
            result = memory.recall(bank, query, **options)
    if json_out:
        from memlane.views import recall_json

        typer.echo(recall_json(result))
        return
    _print_recall(result)


def _print_recall(result, via: str = "") -> None:
    for m in result.memories:
        u = m.unit
        when = (u.occurred_start or u.mentioned_at).date().isoformat()
        replaced = f"  (superseded {u.invalid_at:%Y-%m-%d})" if u.invalid_at else ""
        typer.echo(f"{m.score:.3f}  [{u.fact_type.value} {when}] {u.text}{replaced}")
        if m.trace:  # --trace: where the memory came from, each score on its own scale
            typer.echo(f"       {_trace_line(m.trace)}")
    for r in result.nodes:
        n = r.node
        typer.echo(f"{r.score:.3f}  [{n.level.name} {n.start:%Y-%m-%d} - {n.end:%Y-%m-%d}] {n.text}")
    for c in result.chunks:
        typer.echo(f"--- chunk {c.document_id}/{c.session_id}#{c.index}\n{c.text}")
    if result.plan and result.plan.get("plan"):
        plan = result.plan["plan"]
        typer.echo(
            f"(plan: {plan['complexity']} by {plan['planner']}, levels {result.plan['levels']})", err=True
        )
    typer.echo(
        f"({len(result.memories)} memories, {len(result.nodes)} tree nodes, {result.tokens} tokens, "
        f"{result.timings_ms.get('total', 0):.0f} ms{via})",
        err=True,
    )


def _trace_line(trace: dict) -> str:
    """One line of a memory's trace: its rank in each channel and in fusion, and its fused,
    cross-encoder and final scores."""
    channels = " ".join(f"{name} #{c['rank']}" for name, c in trace.get("channels", {}).items())
    scores = trace.get("scores") or {}
    cross = "-" if scores.get("cross") is None else f"{scores['cross']:.3f} (#{trace['rerank'].get('rank')})"
    return (
        f"channels: {channels or '-'}; fused #{trace['rrf']['rank']} {scores.get('fused', 0):.3f}; "
        f"cross-encoder {cross}; final {trace.get('final', 0):.3f}"
    )


def _recall_remote(
    url: str, api_key: str | None, bank: str, query: str, options: dict, json_out: bool
) -> None:
    """``recall --url``: the same query through the service's HTTP API."""
    import httpx

    from memlane.records import RecallResult
    from memlane_client import MemlaneAPIError, MemlaneClient

    try:
        with MemlaneClient(url, api_key) as client:
            raw = client.recall(bank, query, **{k: v for k, v in options.items() if v is not None})
    except MemlaneAPIError as exc:
        fail(f"{exc.message} (HTTP {exc.status})")
    except httpx.HTTPError as exc:
        fail(f"cannot reach {url}: {type(exc).__name__}: {exc}")
    if json_out:
        typer.echo(json.dumps(raw))
        return
    _print_recall(RecallResult.model_validate(raw), f", via {url}")


@app.command()
def banks(json_out: bool = typer.Option(False, "--json"), data_dir: Path | None = DataDir) -> None:
    """List banks with their memory counts."""
    with errors():
        with open_memory(data_dir) as memory:
            rows = [
                {"bank_id": b.bank_id, "name": b.name, "memories": memory.store.count_units(b.bank_id)}
                for b in memory.banks.list_all()
            ]
    if json_out:
        typer.echo(json.dumps(rows))
        return
    for r in rows:
        typer.echo(f"{r['bank_id']}\t{r['memories']} memories\t{r['name']}")
    if not rows:
        typer.echo("no banks", err=True)


@app.command()
def delete(
    bank: str = typer.Option(..., "--bank"),
    document: str | None = typer.Option(None, "--document", help="Delete one document only."),
    data_dir: Path | None = DataDir,
) -> None:
    """Delete a bank (or one document of it) with everything derived from it."""
    with errors():
        with open_memory(data_dir) as memory:
            if document:
                counts = memory.forget.delete_document(bank, document)
                typer.echo(f"deleted document {document} of bank {bank}: {counts}")
            else:
                memory.banks.delete(bank)
                typer.echo(f"deleted bank {bank}")


@app.command("export")
def export_cmd(
    bank: str = typer.Option(..., "--bank"),
    vectors: bool = typer.Option(False, "--vectors", help="Include unit embeddings (else import re-embeds)."),
    out: Path | None = typer.Option(None, "--out", help="Write to FILE instead of stdout."),
    data_dir: Path | None = DataDir,
) -> None:
    """Export a bank as JSON Lines: a header, then its chunks, entities and units."""
    import time

    from memlane.transfer import export_lines

    start = time.perf_counter()
    with errors():
        with open_memory(data_dir) as memory:
            lines = export_lines(memory, bank, vectors=vectors)
            first = next(lines)  # unknown bank: fail before creating --out
            with out.open("w", encoding="utf-8") if out else _stdout() as f:
                f.write(first)
                n = 1
                for line in lines:
                    f.write(line)
                    n += 1
    typer.echo(f"exported bank {bank}: {n} records in {time.perf_counter() - start:.1f}s", err=True)


def _stdout():
    from contextlib import nullcontext

    return nullcontext(sys.stdout)


@app.command("import")
def import_cmd(
    file: str = typer.Argument(..., help="A file written by `memlane export`, or - for stdin."),
    bank: str | None = typer.Option(None, "--bank", help="Import as this bank (default: the file's)."),
    json_out: bool = typer.Option(False, "--json"),
    data_dir: Path | None = DataDir,
) -> None:
    """Import a bank exported by `memlane export` (idempotent; validated whole before writing)."""
    import shutil
    import tempfile

    from memlane.transfer import import_bank

    with errors(), tempfile.TemporaryDirectory() as tmp:
        path = Path(file)
        if file == "-":  # read twice: spool stdin to a file
            path = Path(tmp) / "stdin.jsonl"
            with path.open("wb") as f:
                shutil.copyfileobj(sys.stdin.buffer, f)
        elif not path.is_file():
            raise FileNotFoundError(f"no such file: {file}")
        with open_memory(data_dir) as memory:
            report = import_bank(memory, path, bank_id=bank)
    if json_out:
        typer.echo(json.dumps(report))
        return
    note = f" (re-embedded: {report['reembed_reason']})" if report["reembed_reason"] else ""
    typer.echo(
        f"bank {report['bank_id']}: imported {report['units']} memories, {report['chunks']} chunks, "
        f"{report['entities']} entities in {report['seconds']:.1f}s{note}"
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


def _register_backfill() -> None:
    from cluster.backfill_cmd import backfill

    app.command(help="Retain a large corpus in parallel on Ray Data (local Ray by default).")(backfill)


def _register_tree() -> None:
    from cluster.consolidate_cmd import consolidate
    from cluster.tree_cmd import tree

    app.command(help="Build banks' temporal trees in parallel on Ray Data (local Ray by default).")(
        consolidate
    )
    app.command(help="Print a bank's temporal tree: level, interval and text of each node.")(tree)


def _register_reembed() -> None:
    from cluster.reembed_cmd import reembed

    app.command(help="Re-embed banks with another embedder on Ray Data (local Ray by default).")(reembed)


def _register_serve() -> None:
    from cluster.serve_cmd import serve_command

    app.command("serve", help="Start the online service on 127.0.0.1 (or --stop it).")(serve_command)


def _register_mcp() -> None:
    from cluster.mcp_cmd import mcp_command

    app.command("mcp", help="Serve the MCP tools over stdio (embedded engine, or --url a service).")(
        mcp_command
    )


def _register_llm() -> None:
    from cluster.llm_cmd import register

    register(app)


def _register_status() -> None:
    from cluster.status_cmd import status

    app.command(help="What is running for a data directory: service, Ray, Milvus Lite, banks.")(status)


def _register_doctor() -> None:
    from cluster.doctor_cmd import doctor

    app.command(help="Check every invariant of banks; exit 1 on a violation.")(doctor)


def _register_curated() -> None:
    from cluster.curated_cmd import register

    register(app)


def _register_eval() -> None:
    from cluster.eval_cmd import register

    register(eval_app, bench_app)


def _register_config() -> None:
    from cluster.config_cmd import register

    register(app)


def _register_store() -> None:
    from cluster.migrate_cmd import register

    register(app)


_register_store()
_register_backfill()
_register_tree()
_register_reembed()
_register_serve()
_register_mcp()
_register_llm()
_register_eval()
_register_status()
_register_doctor()
_register_curated()
_register_config()


def main() -> None:
    from cluster.console import quiet_model_loading
    from memlane.runtime import configure_process

    quiet_model_loading()
    configure_process()
    app()


if __name__ == "__main__":
    main()
