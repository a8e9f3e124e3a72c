"""``memlane eval locomo|longmemeval|dates`` and ``memlane bench suite``.

Registered on the CLI's ``eval`` and ``bench`` groups by :func:`register`. Every eval run writes
a run directory (``--out``, default ``<data-dir>/runs/<benchmark>-<time>``) holding
``questions.jsonl`` (one row per question, written as the run goes), ``report.json``,
``summary.md`` and PNG plots. Bad input exits with code 2 and one line.
"""

from __future__ import annotations

import functools
import json
import shlex
import sys
import time
from pathlib import Path
from typing import get_args

import typer

from cluster.common import errors, fail, open_memory
from memlane.records.requests import Budget

LLM_MISSING = (
    "--qa needs an LLM: set MEMLANE_LLM__BASE_URL (and MEMLANE_LLM__MODEL) to an OpenAI-compatible endpoint"
)
SERVE_MISSING = "skipped: benchmarks/serve_load.py not available"


def _command() -> str:
    """The command line that reproduces this run."""
    return "memlane " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _run_dir(out: Path | None, data_dir: Path, benchmark: str) -> Path:
    return out or data_dir / "runs" / f"{benchmark}-{time.strftime('%Y%m%d-%H%M%S')}"


def qa_llm(settings):
    """The answerer/judge for ``--qa`` from the LLM layer (role ``"qa"``); exits with code 2
    and one line when the layer is not installed or no LLM is configured."""
    try:
        from memlane.llm import build_llm  # the LLM layer is optional: imported only for --qa
    except ImportError:
        fail(LLM_MISSING)
    llm = build_llm(settings, "qa")
    if llm is None:
        fail(LLM_MISSING)
    return llm


SYSTEMS_HELP = (
    "Systems to compare, comma-separated or repeated: memlane (always run), the baselines bm25 "
    "and dense, or an ablation of recall's channels joined by '+' (semantic, lexical, graph, "
    "temporal), e.g. --systems memlane,bm25,lexical+semantic. Default: memlane,bm25,dense."
)


def _systems(specs: list[str] | None) -> list[str]:
    from evals.systems import parse_systems

    return parse_systems(specs or None)


BUDGET_HELP = (
    "Every recall's budget: low, mid or high (how deep channels search; where the cross-encoder reranks)."
)


def _check_budget(budget: str) -> None:
    if budget not in get_args(Budget):
        raise ValueError(f"--budget must be one of {', '.join(get_args(Budget))}, not {budget!r}")


def _check_ks(ks: list[int]) -> list[int]:
    if any(x < 1 for x in ks):
        raise ValueError("--k must be >= 1")
    return sorted(set(ks))


QA_WINDOW = typer.Option(
    None, "--qa-window", help="Tokens of the latest history the full-context baseline reads (default: all)."
)
QA_LIMIT = typer.Option(
    None, "--qa-limit", help="QA on N questions spread over the run (default: every question)."
)


def _check_qa_bounds(qa_window: int | None, qa_limit: int | None) -> None:
    if qa_window is not None and qa_window < 1:
        raise ValueError("--qa-window must be >= 1")
    if qa_limit is not None and qa_limit < 1:
        raise ValueError("--qa-limit must be >= 1")


def _finish(report: dict, run_dir: Path, json_out: bool, text: str, plots: bool) -> None:
    from evals.report import write_run

    write_run(run_dir, report, plots=plots)
    typer.echo(f"run directory: {run_dir}", err=True)
    typer.echo(json.dumps(report) if json_out else text)


def eval_locomo(
    path: Path | None = typer.Argument(None, help="locomo10.json (default: ../shared/data/locomo10.json)."),
    k: list[int] = typer.Option([5, 10], "--k", help="Cut-offs (repeatable)."),
    limit: int | None = typer.Option(None, "--limit", help="First N conversations only."),
    reuse_banks: bool = typer.Option(
        False, "--reuse-banks", help="Skip retain for banks already built (tuning recall)."
    ),
    qa: bool = typer.Option(False, "--qa", help="Also answer and grade with an LLM judge."),
    qa_tokens: int = typer.Option(4096, "--qa-tokens", help="Recalled tokens the answerer gets."),
    full_context: bool = typer.Option(
        True, "--full-context/--no-full-context", help="QA baseline: answer from the whole conversation."
    ),
    qa_window: int | None = QA_WINDOW,
    qa_limit: int | None = QA_LIMIT,
    out: Path | None = typer.Option(
        None, "--out", help="Run directory (default: <data-dir>/runs/locomo-<time>)."
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots"),
    json_out: bool = typer.Option(False, "--json"),
    data_dir: Path = typer.Option(Path(".memlane-eval"), "--data-dir", help="Where the eval's banks live."),
    systems: list[str] | None = typer.Option(None, "--systems", help=SYSTEMS_HELP),
    budget: str = typer.Option("mid", "--budget", help=BUDGET_HELP),
) -> None:
    """Evidence recall@k on LoCoMo (categories 1-4) for Memlane and BM25/dense baselines, with
    Memlane against the best baseline (difference, paired bootstrap 95 % interval)."""
    from evals.locomo import default_locomo_path, format_report, run_locomo
    from evals.report import QuestionLog
    from memlane.settings import Settings

    with errors():
        target = path or default_locomo_path()
        if not target.exists():
            raise FileNotFoundError(f"LoCoMo file not found: {target}")
        ks = _check_ks(k)
        _check_budget(budget)
        chosen = _systems(systems)
        if limit is not None and limit < 1:
            raise ValueError("--limit must be >= 1")
        if qa_tokens < 1:
            raise ValueError("--qa-tokens must be >= 1")
        _check_qa_bounds(qa_window, qa_limit)
        run_dir = _run_dir(out, data_dir, "locomo")
        llm = qa_llm(Settings(data_dir=data_dir)) if qa else None
        with open_memory(data_dir) as memory:
            with QuestionLog(run_dir / "questions.jsonl") as log:
                report = run_locomo(
                    memory,
                    target,
                    ks=ks,
                    limit=limit,
                    progress=not json_out,
                    reuse_banks=reuse_banks,
                    log=log,
                    qa_llm=llm,
                    qa_tokens=qa_tokens,
                    full_context=full_context,
                    qa_window=qa_window,
                    qa_limit=qa_limit,
                    systems=chosen,
                    command=_command(),
                    budget=budget,
                )
    _finish(report, run_dir, json_out, format_report(report), plots)


def eval_longmemeval(
    path: Path = typer.Argument(..., help="A LongMemEval JSON file (S, M or oracle)."),
    k: list[int] = typer.Option([1, 3, 5, 10, 30, 50], "--k", help="Cut-offs (repeatable)."),
    limit: int | None = typer.Option(None, "--limit", help="First N questions only."),
    sample: int | None = typer.Option(
        None, "--sample", help="N questions spread evenly over the file (after --limit)."
    ),
    reuse_banks: bool = typer.Option(False, "--reuse-banks", help="Skip retain for banks already built."),
    qa: bool = typer.Option(False, "--qa", help="Also answer and grade with the official judge prompts."),
    qa_tokens: int = typer.Option(4096, "--qa-tokens", help="Recalled tokens the answerer gets."),
    full_context: bool = typer.Option(
        True, "--full-context/--no-full-context", help="QA baseline: answer from the whole haystack."
    ),
    qa_window: int | None = QA_WINDOW,
    qa_limit: int | None = QA_LIMIT,
    out: Path | None = typer.Option(
        None, "--out", help="Run directory (default: <data-dir>/runs/longmemeval-<time>)."
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots"),
    json_out: bool = typer.Option(False, "--json"),
    data_dir: Path = typer.Option(Path(".memlane-eval"), "--data-dir", help="Where the eval's banks live."),
    systems: list[str] | None = typer.Option(None, "--systems", help=SYSTEMS_HELP),
    budget: str = typer.Option("mid", "--budget", help=BUDGET_HELP),
) -> None:
    """LongMemEval retrieval metrics (official recall_any/recall_all/ndcg_any at turn and
    session level, per question type) for Memlane and BM25/dense baselines, with Memlane against
    the best baseline (difference, paired bootstrap 95 % interval); one bank per question."""
    from evals.longmemeval import run_longmemeval
    from evals.report import QuestionLog, markdown
    from memlane.ingest.longmemeval import load_longmemeval
    from memlane.settings import Settings

    with errors():
        ks = _check_ks(k)
        _check_budget(budget)
        chosen = _systems(systems)
        if limit is not None and limit < 1:
            raise ValueError("--limit must be >= 1")
        if qa_tokens < 1:
            raise ValueError("--qa-tokens must be >= 1")
        _check_qa_bounds(qa_window, qa_limit)
        if sample is not None and sample < 1:
            raise ValueError("--sample must be >= 1")
        load_longmemeval(path, limit=limit)  # validate the whole slice before any bank is written
        run_dir = _run_dir(out, data_dir, "longmemeval")
        llm = qa_llm(Settings(data_dir=data_dir)) if qa else None
        with open_memory(data_dir) as memory:
            with QuestionLog(run_dir / "questions.jsonl") as log:
                report = run_longmemeval(
                    memory,
                    path,
                    ks=ks,
                    limit=limit,
                    progress=not json_out,
                    reuse_banks=reuse_banks,
                    log=log,
                    qa_llm=llm,
                    qa_tokens=qa_tokens,
                    full_context=full_context,
                    qa_window=qa_window,
                    qa_limit=qa_limit,
                    sample=sample,
                    systems=chosen,
                    command=_command(),
                    budget=budget,
                )
    _finish(report, run_dir, json_out, markdown(report), plots)


def eval_answers(
    paths: list[Path] = typer.Argument(
        None, help="Answer-set files (default: the repository's, per --split)."
    ),
    split: str = typer.Option(
        "calibration", "--split", help="calibration | held | all: the repository's files (without FILE)."
    ),
    reuse_banks: bool = typer.Option(False, "--reuse-banks", help="Skip retain for banks already built."),
    out: Path | None = typer.Option(
        None, "--out", help="Run directory (default: <data-dir>/runs/answers-<time>)."
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots"),
    json_out: bool = typer.Option(False, "--json"),
    data_dir: Path = typer.Option(Path(".memlane-eval"), "--data-dir", help="Where the eval's banks live."),
    systems: list[str] | None = typer.Option(None, "--systems", help=SYSTEMS_HELP),
    budget: str = typer.Option("mid", "--budget", help=BUDGET_HELP),
) -> None:
    """Answer precision on the answer set: whether the top memory states the answer
    (precision@1), hit@3 and mrr@10 per kind of question, for Memlane beside BM25 and dense."""
    from evals.answers import format_report, run_answers
    from evals.answers_data import default_answer_paths, load_answer_set
    from evals.report import QuestionLog

    with errors():
        _check_budget(budget)
        chosen = _systems(systems)
        files = list(paths) if paths else default_answer_paths(split)
        for f in files:
            if not f.exists():
                raise FileNotFoundError(f"answer-set file not found: {f}")
            load_answer_set(f)  # validate every file before any bank is written
        run_dir = _run_dir(out, data_dir, "answers")
        with open_memory(data_dir) as memory:
            with QuestionLog(run_dir / "questions.jsonl") as log:
                report = run_answers(
                    memory,
                    files,
                    systems=chosen,
                    budget=budget,
                    reuse_banks=reuse_banks,
                    progress=not json_out,
                    log=log,
                    command=_command(),
                )
    _finish(report, run_dir, json_out, format_report(report), plots)


def eval_statements(
    paths: list[Path] = typer.Argument(
        None, help="Statement files (default: the repository's, per --split)."
    ),
    split: str = typer.Option("calibration", "--split", help="calibration | held | all (without FILE)."),
    extractors: str = typer.Option(
        "rules,classifier", "--extractors", help="rules, classifier, llm (comma-separated)."
    ),
    embedder: str = typer.Option(
        "bge-small", "--embedder", help="The classifier's embedder: bge-small or minilm."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Directory for report.json and rows.jsonl (and llm.jsonl)."
    ),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Per slot family, precision, slot precision and recall of each slot extractor on the
    labelled statement set (evals/statements/README.md)."""
    from evals.slot_extractors import build_extractors
    from evals.statements import default_statement_paths, format_statements, load_statements, run_statements
    from memlane.settings import Settings

    with errors():
        files = list(paths) if paths else default_statement_paths(split)
        for f in files:
            if not f.exists():
                raise FileNotFoundError(f"statement file not found: {f}")
            load_statements(f)  # every file checked before any model is loaded
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        names = [n.strip() for n in extractors.split(",") if n.strip()]
        chosen = build_extractors(names, Settings(), embedder, llm_log=out / "llm.jsonl" if out else None)
        report, rows = run_statements(files, chosen)
    label = " ".join(str(f) for f in paths) if paths else f"the {split} split"
    if out is not None:
        (out / "report.json").write_text(json.dumps({"command": _command(), "report": report}, indent=1))
        (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    typer.echo(json.dumps(report) if json_out else format_statements(report, label) + f"\n\n{_command()}")


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
            command=_command(),
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


def eval_dates(
    files: list[Path] | None = typer.Argument(
        None, help="Labelled JSON Lines files (default: the set's --split files in evals/dates/)."
    ),
    split: str = typer.Option("calibration", "--split", help="calibration, held or all (without FILES)."),
    resolvers: list[str] | None = typer.Option(
        None, "--resolver", help="Only these rows (repeatable): rules, dateparser:future, ctparse, ..."
    ),
    misses: str | None = typer.Option(None, "--misses", help="Also list this resolver's misses."),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Dates said without a year and relative ones: the fraction each resolver (the engine's
    rules and each date library) resolves to exactly the labelled day or interval, per kind."""
    from evals.dates import format_report, load_cases, report, run, split_files
    from evals.dates import resolvers as pick

    with errors():
        paths = list(files) if files else split_files(split)
        for path in paths:
            if not path.is_file():
                raise FileNotFoundError(f"date set not found: {path}")
        chosen = pick(resolvers)
        if misses is not None and misses not in chosen:
            raise ValueError(f"--misses names {misses!r}, which is not among the resolvers run")
        rep = report(run(load_cases(paths), chosen), paths)
    typer.echo(json.dumps(rep) if json_out else format_report(rep, misses))


def register(eval_app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add the eval and bench-suite commands to the CLI's groups."""
    eval_app.command("locomo")(eval_locomo)
    eval_app.command("longmemeval")(eval_longmemeval)
    eval_app.command("answers")(eval_answers)
    eval_app.command("statements")(eval_statements)
    eval_app.command("dates")(eval_dates)
    bench_app.command("suite")(bench_suite)
