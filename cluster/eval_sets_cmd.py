"""``memlane eval statements|dates``: the labelled sets that decide the slot extractors' trust
and the date rules (evals/statements/, evals/dates/). Bad input exits with code 2 and one line."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cluster.common import command_line, errors


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
        (out / "report.json").write_text(json.dumps({"command": command_line(), "report": report}, indent=1))
        (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    typer.echo(json.dumps(report) if json_out else format_statements(report, label) + f"\n\n{command_line()}")


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
