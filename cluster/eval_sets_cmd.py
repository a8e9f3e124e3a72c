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
    rules and each date library) resolves to exactly the labelled day or interval, per kind.
    Then, for the rules, the events set (evals/dates/EVENTS.md): per kind (multi, habit,
    deictic) the expressions read right (a habit: no date) and the turns whose memory gets the
    labelled event day."""
    from evals.date_events import format_events, is_event_set, load_event_cases, report_events, run_events
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
        event_paths = [p for p in paths if is_event_set(p)] if files else []
        year_paths = [p for p in paths if p not in event_paths]
        rep = report(run(load_cases(year_paths), chosen), year_paths) if year_paths else None
        events = None
        if "rules" in chosen and (event_paths or not files):
            cases = load_event_cases(event_paths, "all") if files else load_event_cases(split=split)
            label = " ".join(str(p) for p in event_paths) if files else f"events.jsonl, {split}"
            events = report_events(run_events(cases), label)
    if json_out:
        typer.echo(json.dumps({**(rep or {}), **({"events": events} if events else {})}))
        return
    parts = [format_report(rep, misses)] if rep else []
    if events:
        parts.append(format_events(events, misses == "rules"))
    typer.echo("\n\n".join(parts))
