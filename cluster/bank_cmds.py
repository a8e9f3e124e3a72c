"""``memlane banks``, ``delete``, ``export`` and ``import``: a data directory's banks.

``banks`` and ``delete`` go through the service when ``memlane serve`` runs on the data
directory (its API: ``GET /v1/banks`` with each bank's stats, ``DELETE``), as
:mod:`cluster.route` decides; ``export`` and ``import`` run the engine here, on the service's
Milvus Lite server when it runs (an import has no size limit there; the API's body has one).
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import typer

from cluster.common import DataDir, counted, errors, open_memory


def banks(json_out: bool = typer.Option(False, "--json"), data_dir: Path | None = DataDir) -> None:
    """List banks with their memory counts."""
    from cluster import route

    svc = route.service(data_dir)
    if svc is not None:
        with svc:
            rows = [
                {
                    "bank_id": b["bank_id"],
                    "name": b["name"],
                    "memories": svc.call(svc.client.stats, b["bank_id"])["units"],
                }
                for b in svc.call(svc.client.list_banks)
            ]
    else:
        settings = route.store_settings(data_dir, create=False)
        rows = []
        if settings is not None:  # else nothing was stored yet: no banks, and no store created
            from memlane.engine import Memory

            with errors(), Memory(settings) as memory:
                rows = [
                    {"bank_id": b.bank_id, "name": b.name, "memories": memory.store.count_units(b.bank_id)}
                    for b in memory.banks.list_all()
                ]
    if json_out:
        typer.echo(json.dumps(rows))
        return
    for r in rows:
        typer.echo(f"{r['bank_id']}\t{counted(r['memories'], 'memory', 'memories')}\t{r['name']}")
    if not rows:
        typer.echo("no banks", err=True)


def delete(
    bank: str = typer.Option(..., "--bank"),
    document: str | None = typer.Option(None, "--document", help="Delete one document only."),
    data_dir: Path | None = DataDir,
) -> None:
    """Delete a bank (or one document of it) with everything derived from it."""
    from cluster import route

    with errors():
        from memlane.records import check_bank_id

        check_bank_id(bank)
        if document is not None and not document.strip():
            raise ValueError("--document must not be empty")
    svc = route.service(data_dir, bank=bank)
    if svc is not None:
        with svc:
            if document:
                counts = svc.call(svc.client.delete_document, bank, document)
            else:
                svc.call(svc.client.delete_bank, bank)
    else:
        with errors(), open_memory(data_dir, bank=bank) as memory:
            if document:
                counts = memory.forget.delete_document(bank, document)
            else:
                memory.banks.delete(bank)
    if document:
        typer.echo(f"deleted document {document} of bank {bank}: {_counts(counts)}")
    else:
        typer.echo(f"deleted bank {bank}")


def _counts(counts: dict) -> str:
    nouns = {"units": ("memory", "memories"), "entities": ("entity", "entities")}
    return ", ".join(counted(int(n), *nouns.get(k, (k.rstrip("s"),))) for k, n in counts.items())


def export_cmd(
    bank: str = typer.Option(..., "--bank"),
    vectors: bool = typer.Option(False, "--vectors", help="Include unit embeddings (else import re-embeds)."),
    out: Path | None = typer.Option(None, "--out", help="Write to FILE instead of stdout."),
    data_dir: Path | None = DataDir,
) -> None:
    """Export a bank as JSON Lines: a header, then its chunks, entities and units."""
    start = time.perf_counter()
    with errors():
        from memlane.records import check_bank_id

        check_bank_id(bank)
        from memlane.transfer import export_lines

        with open_memory(data_dir, bank=bank) as memory:
            lines = export_lines(memory, bank, vectors=vectors)
            first = next(lines)  # unknown bank: fail before creating --out
            with out.open("w", encoding="utf-8") if out else nullcontext(sys.stdout) as f:
                f.write(first)
                n = 1
                for line in lines:
                    f.write(line)
                    n += 1
    typer.echo(
        f"exported bank {bank}: {counted(n, 'record')} in {time.perf_counter() - start:.1f}s", err=True
    )


def import_cmd(
    file: str = typer.Argument(..., help="A file written by `memlane export`, or - for stdin."),
    bank: str | None = typer.Option(None, "--bank", help="Import as this bank (default: the file's)."),
    json_out: bool = typer.Option(False, "--json"),
    data_dir: Path | None = DataDir,
) -> None:
    """Import a bank exported by `memlane export` (idempotent; validated whole before writing)."""
    import shutil
    import tempfile

    with errors(), tempfile.TemporaryDirectory() as tmp:
        if bank is not None:
            from memlane.records import check_bank_id

            check_bank_id(bank)
        path = Path(file)
        if file == "-":  # read twice: spool stdin to a file
            path = Path(tmp) / "stdin.jsonl"
            with path.open("wb") as f:
                shutil.copyfileobj(sys.stdin.buffer, f)
        elif not path.is_file():
            raise FileNotFoundError(f"no such file: {file}")
        from memlane.transfer import import_bank

        with open_memory(data_dir) as memory:
            report = import_bank(memory, path, bank_id=bank)
    if json_out:
        typer.echo(json.dumps(report))
        return
    note = f" (re-embedded: {report['reembed_reason']})" if report["reembed_reason"] else ""
    typer.echo(
        f"bank {report['bank_id']}: imported {counted(report['units'], 'memory', 'memories')}, "
        f"{counted(report['chunks'], 'chunk')}, {counted(report['entities'], 'entity', 'entities')} "
        f"in {report['seconds']:.1f}s{note}"
    )


def register(app: typer.Typer) -> None:
    """Add the bank commands to the ``memlane`` app."""
    app.command()(banks)
    app.command()(delete)
    app.command("export")(export_cmd)
    app.command("import")(import_cmd)
