"""``memlane config show``: the effective settings, nested by area, as the library and the CLI's
commands take them or as an entry point runs with them (``--for serve|backfill|engine``), with
secrets masked, where each value came from (default, file, env, or the entry point), and the
entry point's changes marked; ``--markdown`` prints the table of every entry point's changes to
the defaults (docs/configuration.md), generated from ``ENTRY_POINT_DEFAULTS``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from cluster.common import DataDir, errors, fail

MASK = "***"


def _leaves(data: dict[str, Any], model: Any, prefix: str = "") -> Iterator[str]:
    """The dotted paths of the settings a source's ``data`` gives (areas and LLM roles nested)."""
    from pydantic import BaseModel

    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            continue
        ann = field.annotation
        if isinstance(value, dict) and isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _leaves(value, ann, f"{prefix}{key}.")
        else:
            yield prefix + key


def origins() -> dict[str, str]:
    """Dotted path -> "file" (MEMLANE_SECRETS_FILE) or "env" for the settings given there (the
    environment wins, as in Settings); every other setting holds its default."""
    from pydantic_settings import EnvSettingsSource

    from memlane.settings import Settings
    from memlane.settings.sources import _secrets_file_source

    out: dict[str, str] = {}
    from_file = _secrets_file_source(Settings)
    if from_file is not None:
        out.update(dict.fromkeys(_leaves(from_file(), Settings), "file"))
    out.update(dict.fromkeys(_leaves(EnvSettingsSource(Settings)(), Settings), "env"))
    return out


def _rows(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every setting of ``obj``, areas and LLM roles walked into."""
    from pydantic import BaseModel

    for name in type(obj).model_fields:
        value = getattr(obj, name)
        if isinstance(value, BaseModel):
            yield from _rows(value, f"{prefix}{name}.")
        else:
            yield prefix + name, value


def _shown(path: str, value: Any) -> Any:
    """The value as JSON shows it; a secret (an API key, the keys' table, the Milvus token) set
    is masked."""
    from pydantic_core import to_jsonable_python

    from memlane.settings import is_secret

    if is_secret(path.rsplit(".", 1)[-1]) and value:
        return MASK
    return to_jsonable_python(value)


def describe(entry: str | None, data_dir: Path | None = None) -> dict[str, Any]:
    """What ``config show --for entry`` prints: the settings nested by area, each path's origin,
    and the entry point's changes (applied or kept from the user, with why). ``data_dir``: the
    ``--data-dir`` given, which wins over MEMLANE_DATA_DIR as in every other command."""
    from memlane.settings import Settings
    from memlane.settings.entry_points import (
        ENTRY_POINT_DEFAULTS,
        STARTS_FROM,
        Context,
        Derived,
        default_of,
        entry_point_changes,
        nest,
    )

    settings = Settings(data_dir=data_dir) if data_dir is not None else Settings()
    where = origins()
    if data_dir is not None:
        where["data_dir"] = "--data-dir"
    chain = [e for e in (STARTS_FROM.get(entry or ""), entry) if e]
    applied: dict[str, str] = {}
    for name in chain:
        changes = entry_point_changes(name, settings, Context())
        if changes:
            settings = settings.model_copy(update=nest(changes))
        applied.update(dict.fromkeys(changes, name))
    nested: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for path, value in _rows(settings):
        *areas, field = path.split(".")
        node = nested
        for area in areas:
            node = node.setdefault(area, {})
        node[field] = _shown(path, value)
        origin[path] = f"entry point ({applied[path]})" if path in applied else where.get(path, "default")
    declared = []
    for name in chain:
        for path, change in ENTRY_POINT_DEFAULTS[name].items():
            value = change.value
            declared.append(
                {
                    "entry_point": name,
                    "setting": path,
                    "value": value.label if isinstance(value, Derived) else _shown(path, value),
                    "default": _shown(path, default_of(path)),
                    "applied": applied.get(path) == name,
                    "skipped": None
                    if applied.get(path) == name
                    else "not for this context (no GPU)"
                    if isinstance(value, Derived) and value.of(Context()) is None
                    else "the user's value is kept",
                    "keep_user": change.keep_user,
                    "why": change.why,
                }
            )
    return {"for": entry, "settings": nested, "origins": origin, "changes": declared}


def _text(report: dict[str, Any]) -> Iterator[str]:
    from memlane.settings.entry_points import ENTRY_POINTS

    entry = report["for"]
    yield (
        f"settings for {entry}: {ENTRY_POINTS[entry]}"
        if entry
        else "settings of the library and the CLI's commands (no entry point's changes)"
    )
    origin = report["origins"]

    def lines(node: dict[str, Any], prefix: str, indent: str) -> Iterator[str]:
        for key, value in node.items():
            path = prefix + key
            if isinstance(value, dict) and any(k.startswith(f"{path}.") for k in origin):
                yield f"{indent}[{path}]"
                yield from lines(value, f"{path}.", indent + "  ")
                continue
            mark = origin.get(path, "default")
            star = "* " if mark.startswith("entry point") else ""
            note = "" if mark == "default" else f"  <- {star}{mark}"
            yield f"{indent}{key} = {json.dumps(value)}{note}"

    yield from lines(report["settings"], "", "")
    if report["changes"]:
        yield ""
        yield "changes to the defaults (* above):"
    for c in report["changes"]:
        state = "applied" if c["applied"] else f"not applied: {c['skipped']}"
        yield (
            f"  {c['entry_point']}: {c['setting']} = {_cell(c['value'])} (default {_cell(c['default'])}; "
            f"{_when(c['keep_user'])}; {state})"
        )
        yield f"      why: {c['why']}"


def _cell(value: Any) -> str:
    return value if isinstance(value, str) and " " in value else json.dumps(value)


def _when(keep_user: str) -> str:
    return {"set": "unless the user set it", "default": "where left at the default", "never": "always"}[
        keep_user
    ]


def markdown_table() -> str:
    """The entry points' changes as one markdown table: setting, default, one column per entry
    point, why (generated from ``ENTRY_POINT_DEFAULTS``)."""
    from memlane.settings.entry_points import ENTRY_POINT_DEFAULTS, Derived, default_of

    entries = list(ENTRY_POINT_DEFAULTS)
    paths = list(dict.fromkeys(p for changes in ENTRY_POINT_DEFAULTS.values() for p in changes))
    out = [
        "| setting | default | " + " | ".join(entries) + " | why |",
        "| --- | --- | " + " | ".join("---" for _ in entries) + " | --- |",
    ]
    for path in paths:
        cells, whys = [], []
        for entry in entries:
            change = ENTRY_POINT_DEFAULTS[entry].get(path)
            if change is None:
                cells.append("")
                continue
            value = change.value
            shown = value.label if isinstance(value, Derived) else f"`{json.dumps(value)}`"
            cells.append(f"{shown} ({_when(change.keep_user)})")
            whys.append(f"{entry}: {change.why}" if len(entries) > 1 else change.why)
        default = f"`{json.dumps(_shown(path, default_of(path)))}`"
        row = [f"`{path}`", default, *cells, "; ".join(whys)]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(out)


def show(
    for_: str | None = typer.Option(
        None, "--for", help="serve | backfill | engine: the settings that entry point runs with."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the settings, origins and changes as JSON."),
    markdown: bool = typer.Option(
        False, "--markdown", help="Print every entry point's changes to the defaults as a markdown table."
    ),
    data_dir: Path | None = DataDir,
) -> None:
    """Print the effective settings (secrets masked), where each came from, and the entry
    point's changes to the defaults."""
    from memlane.settings.entry_points import ENTRY_POINTS

    if for_ is not None and for_ not in ENTRY_POINTS:
        fail(f"--for must be one of {', '.join(ENTRY_POINTS)}, not {for_!r}")
    if markdown:
        typer.echo(markdown_table())
        return
    with errors():
        report = describe(for_, data_dir)
    if json_out:
        typer.echo(json.dumps(report))
        return
    for line in _text(report):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add ``memlane config show`` to the ``memlane`` app."""
    config_app = typer.Typer(no_args_is_help=True, help="The settings: what each entry point runs with.")
    config_app.command("show", help=show.__doc__)(show)
    app.add_typer(config_app, name="config")
