"""``memlane doctor``: check every invariant of one bank, several, or all (memlane/doctor.py).

Exit codes: 0 when every bank checked is free of errors (warnings allowed), 1 when any
invariant is violated, 2 for bad input (no bank named, an unknown bank, a store that another
process holds). Not in the service's API: reaches the store through the service's Milvus Lite
server when ``memlane serve`` runs (said in one line), else by opening the data directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from cluster.common import DataDir, counted, errors, fail


def _line(report) -> str:
    c = report.counts
    head = f"bank {report.bank_id}: " + ("ok" if report.ok else f"{len(report.errors)} violated")
    head += (
        f" ({counted(c['units'], 'memory', 'memories')}, {counted(c['chunks'], 'chunk')}, "
        f"{counted(c['entities'], 'entity', 'entities')}"
    )
    if c.get("tree_nodes"):
        head += f", {counted(c['tree_nodes'], 'tree node')}"
    if "index_units" in c or "graph_units" in c:
        head += "; index and graph checked"
    lines = [head + ")"]
    for f in report.findings:
        more = f", ... {f.count - len(f.ids)} more" if f.count > len(f.ids) else ""
        ids = f" (ids: {', '.join(f.ids)}{more})" if f.ids else ""  # a tree level's count names no id
        lines.append(f"  {f.severity} {f.check}: {f.message}{ids}")
    return "\n".join(lines)


def doctor(
    bank: list[str] = typer.Option([], "--bank", help="A bank to check (repeatable)."),
    all_banks: bool = typer.Option(False, "--all", help="Check every bank."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    data_dir: Path | None = DataDir,
) -> None:
    """Check a bank's invariants (chunks, documents, links, entities, sources, supersession,
    derived index and graph, the temporal tree); exit 1 on a violation."""
    from rich.progress import Progress

    from cluster import route
    from memlane.engine import Memory

    if bool(bank) == all_banks:
        fail("name the banks to check with --bank B (repeatable), or --all")
    settings = route.store_settings(data_dir, create=False)  # not in the API: the service's store
    if settings is None:
        if all_banks:
            typer.echo(json.dumps({"ok": True, "banks": []}) if json_out else "no banks", err=not json_out)
            return
        fail(f"no store in {route.data_dir_of(data_dir)} yet")
    reports = []
    with errors(), Memory(settings) as memory:
        ids = [b.bank_id for b in memory.banks.list_all()] if all_banks else bank
        for bank_id in ids:
            memory.banks.get(bank_id)  # an unknown bank is exit 2 before anything is checked
        with Progress(transient=True, disable=json_out or not sys.stderr.isatty()) as bar:
            task = bar.add_task("doctor", total=len(ids))
            for bank_id in ids:
                reports.append(memory.banks.doctor(bank_id))
                memory.derived.evict(bank_id)  # --all over many banks holds one at a time
                bar.advance(task)
    ok = all(r.ok for r in reports)
    if json_out:
        typer.echo(json.dumps({"ok": ok, "banks": [r.as_dict() for r in reports]}))
    else:
        for r in reports:
            typer.echo(_line(r))
        if not reports:
            typer.echo("no banks", err=True)
    if not ok:
        raise typer.Exit(code=1)
