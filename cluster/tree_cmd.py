"""``memlane tree``: print a bank's temporal tree (the nodes ``memlane consolidate`` wrote).

Through the service's API when ``memlane serve`` runs on the data directory (cluster/route.py),
else by opening the directory. Bad input (an unknown bank or
level, a date that does not parse, ``--to`` not after ``--from``) exits 2 with one line.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import typer

from cluster.common import DataDir, counted, errors, open_memory


def _when(value: str | None, option: str) -> datetime | None:
    """An ISO date or date-time (naive means UTC); ValueError naming the option otherwise."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{option}: not an ISO date or date-time: {value!r}") from None


def _stamp(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%d %H:%M")


def node_line(node) -> str:
    """One node on one line: level number and name, interval (UTC), window key, text."""
    text = " ".join(node.text.split())
    return (
        f"{int(node.level)} {node.level.name:<7}  {_stamp(node.start)} -> {_stamp(node.end)}  "
        f"[{node.key}]  {text}"
    )


def tree(
    bank: str = typer.Option(..., "--bank", help="The bank whose tree to print."),
    level: str | None = typer.Option(
        None, "--level", help="One level only: 2-5 or session | day | week | profile."
    ),
    since: str | None = typer.Option(
        None, "--from", help="Nodes overlapping from this ISO date or time on (naive: UTC)."
    ),
    until: str | None = typer.Option(None, "--to", help="... up to this ISO date or time (exclusive)."),
    json_out: bool = typer.Option(False, "--json", help="Print the nodes as one JSON array."),
    data_dir: Path | None = DataDir,
) -> None:
    """Print a bank's temporal tree: each node's level, interval and text."""
    from cluster import route
    from memlane.records import check_bank_id, utc

    with errors():
        check_bank_id(bank)
        lo, hi = _when(since, "--from"), _when(until, "--to")
        if lo and hi and utc(hi) <= utc(lo):
            raise ValueError("--to must be after --from")
    svc = route.service(data_dir, bank=bank)
    if svc is not None:
        from memlane.records import TreeNode

        with svc:
            raw = svc.call(svc.client.tree, bank, level=level, since=lo, until=hi)
        if json_out:
            typer.echo(json.dumps(raw))
            return
        nodes = [TreeNode.model_validate({k: v for k, v in n.items() if k != "level_name"}) for n in raw]
    else:
        # The tree is read, never written: no online consolidation from this process.
        with errors(), open_memory(data_dir, bank=bank, update={"background": {"tree": False}}) as memory:
            nodes = memory.tree.nodes(bank, level=level, since=lo, until=hi)
        if json_out:
            from memlane.views import node_view

            typer.echo(json.dumps([node_view(n) for n in nodes]))
            return
    if not nodes:
        typer.echo(f"bank {bank}: no tree nodes (run `memlane consolidate --bank {bank}`)", err=True)
        return
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.level.name] = counts.get(n.level.name, 0) + 1
    typer.echo(f"bank {bank}: " + ", ".join(counted(c, f"{name} node") for name, c in counts.items()))
    for n in nodes:
        typer.echo(node_line(n))
