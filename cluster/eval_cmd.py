"""``memlane eval locomo|longmemeval|answers``, and the registration of every eval and bench
command (:func:`register`; statements and dates: ``eval_sets_cmd``, the suite: ``bench_cmd``). Every eval run writes
a run directory (``--out``, default ``<data-dir>/runs/<benchmark>-<time>``) holding
``questions.jsonl`` (one row per question, written as the run goes), ``report.json``,
``summary.md`` and PNG plots. Bad input exits with code 2 and one line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import get_args

import typer

from cluster.common import command_line, errors, fail, open_memory
from memlane.records.requests import Budget

LLM_MISSING = (
    "--qa needs an LLM: set MEMLANE_LLM__BASE_URL (and MEMLANE_LLM__MODEL) to an OpenAI-compatible endpoint"
)


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
                    command=command_line(),
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
                    command=command_line(),
                    budget=budget,
                )
    _finish(report, run_dir, json_out, markdown(report), plots)


def _check_ranker_models(directory: Path, budget: str) -> None:
    """A model directory must hold a model of ``budget`` on today's features: otherwise recall
    would fall back to the fused order and the run would report it as the learned ranker's."""
    from memlane.recall.learned import RankerModel

    path = directory / f"ranker-{budget}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"--ranker-models: no {path.name} in {directory}")
    try:
        model = RankerModel.for_budget(budget, directory)
    except Exception as exc:  # a file the model reader cannot parse, whatever its error type
        raise ValueError(f"--ranker-models: {path} does not load ({exc})") from None
    if model is None:
        raise ValueError(f"--ranker-models: {path} does not load (lightgbm missing or other features)")


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
    source: str | None = typer.Option(
        None,
        "--source",
        help="One source's files instead of --split: team (both halves and the training "
        "histories) or NAME (evals/answers/sources/NAME.json).",
    ),
    ranker_models: Path | None = typer.Option(
        None,
        "--ranker-models",
        help="The learned ranker's model directory (ranker-<budget>.txt), e.g. one trained "
        "without --source's rows (training/train_ranker.py loso); default: the shipped models.",
    ),
) -> None:
    """Answer precision on the answer set: whether the top memory states the answer
    (precision@1), hit@3 and mrr@10 per kind of question, for Memlane beside BM25 and dense."""
    from evals.answers import format_report, run_answers
    from evals.answers_data import default_answer_paths, load_answer_set, source_answer_paths
    from evals.report import QuestionLog

    with errors():
        _check_budget(budget)
        chosen = _systems(systems)
        if source is not None and paths:
            raise ValueError("give answer-set files or --source, not both")
        update = None
        if ranker_models is not None:
            _check_ranker_models(ranker_models, budget)
            update = {"recall": {"ranker_models": ranker_models, "ranker": "learned"}}
        files = (
            list(paths) if paths else source_answer_paths(source) if source else default_answer_paths(split)
        )
        for f in files:
            if not f.exists():
                raise FileNotFoundError(f"answer-set file not found: {f}")
            load_answer_set(f)  # validate every file before any bank is written
        run_dir = _run_dir(out, data_dir, "answers")
        with open_memory(data_dir, update=update) as memory:
            with QuestionLog(run_dir / "questions.jsonl") as log:
                report = run_answers(
                    memory,
                    files,
                    systems=chosen,
                    budget=budget,
                    reuse_banks=reuse_banks,
                    progress=not json_out,
                    log=log,
                    command=command_line(),
                )
    _finish(report, run_dir, json_out, format_report(report), plots)


def register(eval_app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add the eval and bench commands (the suite, the scripts) to the CLI's groups."""
    from cluster.bench_cmd import register as register_bench
    from cluster.eval_sets_cmd import eval_dates, eval_statements

    eval_app.command("locomo")(eval_locomo)
    eval_app.command("longmemeval")(eval_longmemeval)
    eval_app.command("answers")(eval_answers)
    eval_app.command("statements")(eval_statements)
    eval_app.command("dates")(eval_dates)
    register_bench(bench_app)
