"""``memlane store migrate``: move a store's banks between the per-bank and the partition-key
layouts (memlane/stores/milvus/layout.py, docs/milvus-layout.md), verified bank by bank and
re-runnable after a crash (memlane/stores/milvus/migrate.py).

Reaches the store like ``memlane tree``: a Milvus server with ``--milvus-uri`` (or
MEMLANE_STORE__MILVUS_URI), else the data directory (through the service's Milvus Lite server
when ``memlane serve`` runs: stop it first, a migration wants no writers). Bad input exits 2
with one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from cluster.common import DataDir, counted, errors, fail

store_app = typer.Typer(
    no_args_is_help=True, help="The store: migrate between layouts, run a local Milvus server."
)


def migrate(
    to: str = typer.Option(..., "--to", help="The layout to move to: partition_key | per_bank."),
    bank: list[str] = typer.Option(
        [], "--bank", help="Copy only these banks (repeatable); the switch waits for every bank."
    ),
    drop_source: bool = typer.Option(
        False, "--drop-source", help="After the switch, remove the old layout's copy of the rows."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    data_dir: Path | None = DataDir,
    milvus_uri: str | None = typer.Option(
        None,
        "--milvus-uri",
        help="A Milvus server to migrate (default: MEMLANE_STORE__MILVUS_URI, else --data-dir).",
    ),
) -> None:
    """Copy every bank into the other layout, verify counts per bank, then switch the store."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cluster.datadir import store_access
    from memlane.settings import Settings
    from memlane.stores.milvus.layout import LAYOUTS
    from memlane.stores.milvus.migrate import migrate_layout

    with errors():
        if to not in LAYOUTS:
            raise ValueError(f"--to must be one of {', '.join(LAYOUTS)}, not {to!r}")
        base = Settings(data_dir=data_dir) if data_dir else Settings()
        uri = milvus_uri or base.store.milvus_uri
        if uri:
            settings = base.model_copy(update={"store": {"milvus_uri": uri}})
        else:
            access = store_access(base.data_dir)
            if access.mode == "server":
                fail(
                    f"memlane serve is running on {base.data_dir}: stop it (memlane serve --stop) "
                    "before migrating, a migration wants no writers"
                )
            opened = access.settings()
            if opened is None:
                fail(access.why_not())
            settings = base
        with Progress(
            TextColumn("migrate {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=json_out,
            disable=json_out and not sys.stderr.isatty(),
        ) as bar:
            task = bar.add_task(f"-> {to}", total=None)

            def on_bank(result, total: int) -> None:
                bar.update(task, total=total, advance=1, description=f"-> {to} ({result.bank_id})")

            report = migrate_layout(settings, to, banks=bank, drop_source=drop_source, on_bank=on_bank)
    copied = sum(1 for b in report.banks if b.status == "copied")
    skipped = len(report.banks) - copied
    if json_out:
        typer.echo(
            json.dumps(
                {
                    "source": report.source,
                    "target": report.target,
                    "switched": report.switched,
                    "left": report.left,
                    "dropped_source": report.dropped_source,
                    "banks": [{"bank_id": b.bank_id, "status": b.status, **b.counts} for b in report.banks],
                }
            )
        )
        return
    if report.source == report.target:
        typer.echo(f"the store is already in the {to} layout")
        return
    if report.source is None:
        typer.echo(f"the store holds no banks yet: it will use the {to} layout")
        return
    typer.echo(
        f"{counted(copied, 'bank')} copied and verified, {skipped} already verified ({report.source} -> {to})"
    )
    if report.switched:
        gone = (
            "; the old rows were removed"
            if report.dropped_source
            else (f"; the {report.source} copy is kept (rerun with --drop-source to remove it)")
        )
        typer.echo(f"switched: the store now uses the {to} layout{gone}")
    else:
        left = f"{counted(report.left, 'bank')} {'is' if report.left == 1 else 'are'}"
        typer.echo(f"not switched yet: {left} still to copy (run again without --bank)")


def register(app: typer.Typer) -> None:
    """Add ``memlane store migrate`` and ``memlane store server`` to the ``memlane`` app."""
    from cluster.store_server_cmd import register as register_server

    store_app.command("migrate")(migrate)
    register_server(store_app)
    app.add_typer(store_app, name="store")
