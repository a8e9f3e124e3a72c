"""``memlane model ...`` and ``memlane directive ...``: a bank's mental models and directives
(memlane/curated/) over the local data directory. Bad input (an unknown bank, model or
directive, a bad id, an empty question) exits 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cluster.common import DataDir, errors, open_memory

model_app = typer.Typer(no_args_is_help=True, help="Mental models: named questions with a sourced answer.")
directive_app = typer.Typer(no_args_is_help=True, help="Directives: the user's rules for reflect.")

Bank = typer.Option(..., "--bank", help="Bank id.")
Json = typer.Option(False, "--json", help="Print JSON.")


def _show(model, json_out: bool) -> None:
    if json_out:
        typer.echo(model.model_dump_json())
        return
    typer.echo(f"{model.id}: {model.question}")
    typer.echo(model.answer)
    typer.echo(f"sources ({len(model.sources)} of {model.recalled} memories recalled; {model.consolidator}):")
    for s in model.sources:
        turns = f" [turns: {', '.join(s.turns)}]" if s.turns else ""
        typer.echo(f"  {s.memory_id}: {s.text}{turns}")


@model_app.command("put")
def put_model(
    model_id: str = typer.Argument(..., help="The model's id: 1-64 lowercase letters, digits, '_', '-'."),
    question: str = typer.Argument(..., help="The question it answers."),
    bank: str = Bank,
    json_out: bool = Json,
    data_dir: Path | None = DataDir,
) -> None:
    """Pin a question on a bank and answer it now (the same question again changes nothing)."""
    with errors(), open_memory(data_dir) as memory:
        model, created = memory.curated.put_mental_model(bank, model_id, question)
    if not json_out:
        typer.echo(f"{'created' if created else 'kept'} model {model.id} in bank {bank}")
    _show(model, json_out)


@model_app.command("list")
def list_models(bank: str = Bank, json_out: bool = Json, data_dir: Path | None = DataDir) -> None:
    """The bank's mental models."""
    with errors(), open_memory(data_dir) as memory:
        models = memory.curated.list_mental_models(bank)
    if json_out:
        typer.echo(json.dumps([m.model_dump(mode="json") for m in models]))
        return
    for m in models:
        typer.echo(
            f"{m.id}: {m.question} ({len(m.sources)} sources, refreshed {m.refreshed_at:%Y-%m-%d %H:%M} UTC)"
        )


@model_app.command("show")
def show_model(
    model_id: str = typer.Argument(...),
    bank: str = Bank,
    json_out: bool = Json,
    data_dir: Path | None = DataDir,
) -> None:
    """A model's answer with its sources (memory ids, texts and turns)."""
    with errors(), open_memory(data_dir) as memory:
        model = memory.curated.get_mental_model(bank, model_id)
    _show(model, json_out)


@model_app.command("refresh")
def refresh_model(
    model_id: str = typer.Argument(...),
    bank: str = Bank,
    json_out: bool = Json,
    data_dir: Path | None = DataDir,
) -> None:
    """Recall the model's question again and rewrite its answer."""
    with errors(), open_memory(data_dir) as memory:
        model = memory.curated.refresh_mental_model(bank, model_id)
    _show(model, json_out)


@model_app.command("delete")
def delete_model(
    model_id: str = typer.Argument(...), bank: str = Bank, data_dir: Path | None = DataDir
) -> None:
    """Delete a mental model."""
    with errors(), open_memory(data_dir) as memory:
        memory.curated.delete_mental_model(bank, model_id)
    typer.echo(f"deleted model {model_id} from bank {bank}")


@directive_app.command("put")
def put_directive(
    directive_id: str = typer.Argument(
        ..., help="The directive's id: 1-64 lowercase letters, digits, '_', '-'."
    ),
    text: str = typer.Argument(..., help="The rule, e.g. 'Never mention her ex.'"),
    bank: str = Bank,
    tag: list[str] = typer.Option(
        [], "--tag", help="Apply only to reflect requests with this tag (repeatable)."
    ),
    json_out: bool = Json,
    data_dir: Path | None = DataDir,
) -> None:
    """Create or replace a rule reflect always follows (or only for requests with a --tag)."""
    with errors(), open_memory(data_dir) as memory:
        directive, created = memory.curated.put_directive(bank, directive_id, text, tag)
    if json_out:
        typer.echo(directive.model_dump_json())
    else:
        typer.echo(f"{'created' if created else 'kept'} directive {directive.id} in bank {bank}")


@directive_app.command("list")
def list_directives(bank: str = Bank, json_out: bool = Json, data_dir: Path | None = DataDir) -> None:
    """The bank's directives."""
    with errors(), open_memory(data_dir) as memory:
        found = memory.curated.list_directives(bank)
    if json_out:
        typer.echo(json.dumps([d.model_dump(mode="json") for d in found]))
        return
    for d in found:
        scope = f" [tags: {', '.join(d.tags)}]" if d.tags else " [always]"
        typer.echo(f"{d.id}: {d.text}{scope}")


@directive_app.command("delete")
def delete_directive(
    directive_id: str = typer.Argument(...), bank: str = Bank, data_dir: Path | None = DataDir
) -> None:
    """Delete a directive."""
    with errors(), open_memory(data_dir) as memory:
        memory.curated.delete_directive(bank, directive_id)
    typer.echo(f"deleted directive {directive_id} from bank {bank}")


def register(app: typer.Typer) -> None:
    """Add ``memlane model`` and ``memlane directive`` to the CLI."""
    app.add_typer(model_app, name="model")
    app.add_typer(directive_app, name="directive")
