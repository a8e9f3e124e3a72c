"""``memlane model ...`` and ``memlane directive ...``: a bank's mental models and directives
(memlane/curated/): through the service when ``memlane serve`` runs on the data directory
(cluster/route.py), else on the engine here. Bad input (an unknown bank, model or
directive, a bad id, an empty question) exits 2 with one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from cluster.common import DataDir, counted, errors, open_memory
from memlane.records.curated import Directive, MentalModel

T = TypeVar("T")

model_app = typer.Typer(no_args_is_help=True, help="Mental models: named questions with a sourced answer.")
directive_app = typer.Typer(no_args_is_help=True, help="Directives: the user's rules for reflect.")

Bank = typer.Option(..., "--bank", help="Bank id.")
Json = typer.Option(False, "--json", help="Print JSON.")


def _via(data_dir: Path | None, bank: str, local: Callable[[Any], T], remote: Callable[[Any], T]) -> T:
    """``remote(client)`` through the service running on the data directory (cluster/route.py),
    else ``local(memory)`` on the engine here; bad input is exit code 2 with one line."""
    from cluster import route
    from memlane.records import check_bank_id

    with errors():
        check_bank_id(bank)
    svc = route.service(data_dir, bank=bank)
    if svc is not None:
        with svc:
            return svc.call(remote, svc.client)
    with errors(), open_memory(data_dir, bank=bank) as memory:
        return local(memory)


def _put(existed: bool, answer: dict, model: Any) -> tuple[Any, bool]:
    """A put's answer over HTTP (the record; created or kept is its status code, which the SDK
    does not return) as the engine's ``(record, created)``, ``existed`` asked first."""
    return model.model_validate(answer), not existed


def _has_model(client: Any, bank: str, model_id: str) -> bool:
    from memlane_client import MemlaneAPIError

    try:
        client.get_mental_model(bank, model_id)
    except MemlaneAPIError as exc:
        if exc.status == 404 and exc.field != "bank_id":
            return False
        raise
    return True


def _show(model, json_out: bool) -> None:
    if json_out:
        typer.echo(model.model_dump_json())
        return
    typer.echo(f"{model.id}: {model.question}")
    typer.echo(model.answer)
    recalled = counted(model.recalled, "memory", "memories")
    typer.echo(f"sources ({len(model.sources)} of {recalled} recalled; {model.consolidator}):")
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
    model, created = _via(
        data_dir,
        bank,
        lambda m: m.curated.put_mental_model(bank, model_id, question),
        lambda c: _put(
            _has_model(c, bank, model_id), c.put_mental_model(bank, model_id, question), MentalModel
        ),
    )
    if not json_out:
        typer.echo(f"{'created' if created else 'kept'} model {model.id} in bank {bank}")
    _show(model, json_out)


@model_app.command("list")
def list_models(bank: str = Bank, json_out: bool = Json, data_dir: Path | None = DataDir) -> None:
    """The bank's mental models."""
    models = _via(
        data_dir,
        bank,
        lambda m: m.curated.list_mental_models(bank),
        lambda c: [MentalModel.model_validate(x) for x in c.list_mental_models(bank)],
    )
    if json_out:
        typer.echo(json.dumps([m.model_dump(mode="json") for m in models]))
        return
    for m in models:
        typer.echo(
            f"{m.id}: {m.question} ({counted(len(m.sources), 'source')}, refreshed {m.refreshed_at:%Y-%m-%d %H:%M} UTC)"
        )


@model_app.command("show")
def show_model(
    model_id: str = typer.Argument(...),
    bank: str = Bank,
    json_out: bool = Json,
    data_dir: Path | None = DataDir,
) -> None:
    """A model's answer with its sources (memory ids, texts and turns)."""
    model = _via(
        data_dir,
        bank,
        lambda m: m.curated.get_mental_model(bank, model_id),
        lambda c: MentalModel.model_validate(c.get_mental_model(bank, model_id)),
    )
    _show(model, json_out)


@model_app.command("refresh")
def refresh_model(
    model_id: str = typer.Argument(...),
    bank: str = Bank,
    json_out: bool = Json,
    data_dir: Path | None = DataDir,
) -> None:
    """Recall the model's question again and rewrite its answer."""
    model = _via(
        data_dir,
        bank,
        lambda m: m.curated.refresh_mental_model(bank, model_id),
        lambda c: MentalModel.model_validate(c.refresh_mental_model(bank, model_id)),
    )
    _show(model, json_out)


@model_app.command("delete")
def delete_model(
    model_id: str = typer.Argument(...), bank: str = Bank, data_dir: Path | None = DataDir
) -> None:
    """Delete a mental model."""
    _via(
        data_dir,
        bank,
        lambda m: m.curated.delete_mental_model(bank, model_id),
        lambda c: c.delete_mental_model(bank, model_id),
    )
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
    directive, created = _via(
        data_dir,
        bank,
        lambda m: m.curated.put_directive(bank, directive_id, text, tag),
        lambda c: _put(
            any(d["id"] == directive_id for d in c.list_directives(bank)),
            c.put_directive(bank, directive_id, text, tag),
            Directive,
        ),
    )
    if json_out:
        typer.echo(directive.model_dump_json())
    else:
        typer.echo(f"{'created' if created else 'kept'} directive {directive.id} in bank {bank}")


@directive_app.command("list")
def list_directives(bank: str = Bank, json_out: bool = Json, data_dir: Path | None = DataDir) -> None:
    """The bank's directives."""
    found = _via(
        data_dir,
        bank,
        lambda m: m.curated.list_directives(bank),
        lambda c: [Directive.model_validate(x) for x in c.list_directives(bank)],
    )
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
    _via(
        data_dir,
        bank,
        lambda m: m.curated.delete_directive(bank, directive_id),
        lambda c: c.delete_directive(bank, directive_id),
    )
    typer.echo(f"deleted directive {directive_id} from bank {bank}")


def register(app: typer.Typer) -> None:
    """Add ``memlane model`` and ``memlane directive`` to the CLI."""
    app.add_typer(model_app, name="model")
    app.add_typer(directive_app, name="directive")
