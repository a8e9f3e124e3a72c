"""``memlane status`` and ``memlane --version``: what is running for a data directory.

Everything here is read from the machine, without an API key and without loading a model:
the service supervisor's state file (``serve.json``, written by ``memlane serve`` under either
runtime: one process, or Ray Serve) and its health endpoint; the kernel's lock table (``/proc/locks``) for which process holds the Milvus
Lite directory; and the store itself for the banks, through the service's Milvus Lite server
when one runs, or by opening the directory when no process holds it.
"""

from __future__ import annotations

import json
import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import typer

from cluster.common import DataDir, counted

# Banks listed with their counts; a store with more is summarised (a count per bank is one
# query each, about 5 ms on Milvus Lite).
MAX_BANKS_SHOWN = 50


def _version_of(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def version_line() -> str:
    """``memlane X (ray Y, pymilvus Z, milvus-lite W, python V)``."""
    parts = ", ".join(f"{p} {_version_of(p)}" for p in ("ray", "pymilvus", "milvus-lite"))
    return f"memlane {_version_of('memlane')} ({parts}, python {platform.python_version()})"


def _size_mb(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:
                pass
    return round(total / 1e6, 1)


def _banks(settings) -> list[dict[str, Any]]:
    from memlane.stores.milvus import MilvusStore

    store = MilvusStore(settings, dim=settings.models.embedding_dim)
    try:
        banks = store.list_banks()
        rows: list[dict[str, Any]] = [{"bank_id": b.bank_id, "name": b.name} for b in banks]
        for row in rows[:MAX_BANKS_SHOWN]:
            row["memories"] = store.count_units(row["bank_id"])
        return rows
    finally:
        store.close()


def collect(data_dir: Path) -> dict[str, Any]:
    """The status of ``data_dir`` as a JSON-ready dict (what ``memlane status --json`` prints)."""
    from cluster.datadir import cmdline, store_access
    from cluster.service import LOG_FILE, _healthy, read_state

    data_dir = Path(data_dir).resolve()
    out: dict[str, Any] = {
        "version": _version_of("memlane"),
        "data_dir": {"path": str(data_dir), "exists": data_dir.is_dir()},
    }
    if data_dir.is_dir():
        out["data_dir"]["size_mb"] = _size_mb(data_dir)
    state = read_state(data_dir) if data_dir.is_dir() else None
    if state:
        runtime = state.get("runtime", "ray")  # a state file from before the process runtime
        out["service"] = {
            "running": True,
            "runtime": runtime,
            "pid": state["pid"],
            "url": state["url"],
            "healthy": _healthy(state["url"]),
            "log": str(data_dir / LOG_FILE),
        }
    else:
        out["service"] = {"running": False}
    if state and state.get("ray_address"):
        out["ray"] = {
            "running": True,
            "address": state.get("ray_address"),
            "dashboard": state.get("dashboard_url"),
        }
    elif state:
        out["ray"] = {"running": False, "note": "the service runs in one process, without Ray"}
    else:
        out["ray"] = {"running": False, "note": "memlane backfill starts its own Ray while it runs"}

    access = store_access(data_dir)
    milvus: dict[str, Any] = {"path": str(access.path), "exists": access.path.is_dir(), "mode": access.mode}
    if access.mode == "server":
        milvus["uri"] = access.uri
    elif access.mode == "held":
        milvus.update(pid=access.pid, command=cmdline(access.pid or 0))
    out["milvus"] = milvus

    banks: dict[str, Any] = {}
    settings = access.settings()
    if settings is None:
        banks["unavailable"] = access.why_not()
    if settings is not None:
        try:
            rows = _banks(settings)
            banks.update(count=len(rows), banks=rows[:MAX_BANKS_SHOWN])
        except Exception as exc:  # noqa: BLE001 - status reports, it does not fail
            banks["unavailable"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    out["banks"] = banks
    out["logs"] = sorted(str(p) for p in data_dir.glob("*.log")) if data_dir.is_dir() else []
    return out


def _render(s: dict[str, Any]) -> str:
    lines = [f"memlane {s['version']}"]
    d = s["data_dir"]
    lines.append(
        f"data dir  {d['path']}" + (f" ({d['size_mb']} MB)" if d.get("exists") else " (does not exist yet)")
    )
    svc = s["service"]
    if svc["running"]:
        health = "healthy" if svc["healthy"] else "NOT answering /v1/health"
        lines.append(
            f"service   {svc['url']} ({svc['runtime']} runtime, pid {svc['pid']}, {health}; log {svc['log']})"
        )
    else:
        lines.append("service   not running (start it with: memlane serve)")
    ray = s["ray"]
    if ray["running"]:
        lines.append(f"ray       {ray['address']} (dashboard {ray['dashboard'] or 'off'})")
    else:
        lines.append(f"ray       not running ({ray['note']})")
    m = s["milvus"]
    if m["mode"] == "server":
        lines.append(f"milvus    Milvus Lite server {m['uri']} over {m['path']}")
    elif m["mode"] == "held":
        lines.append(f"milvus    {m['path']} open in process {m['pid']} ({m['command'] or '?'})")
    else:
        lines.append(f"milvus    {m['path']}" + ("" if m["exists"] else " (not created yet)"))
    b = s["banks"]
    if "unavailable" in b:
        lines.append(f"banks     unavailable: {b['unavailable']}")
    else:
        lines.append(f"banks     {b['count']}")
        for row in b["banks"]:
            count = counted(row["memories"], "memory", "memories") if "memories" in row else ""
            lines.append(f"  {row['bank_id']:<24} {count}")
        if b["count"] > len(b["banks"]):
            lines.append(f"  ... and {b['count'] - len(b['banks'])} more (memlane banks lists them all)")
    if s["logs"]:
        lines.append("logs      " + ", ".join(s["logs"]))
    return "\n".join(lines)


def status(json_out: bool = typer.Option(False, "--json"), data_dir: Path | None = DataDir) -> None:
    """Print what is running for the data directory: the service, Ray, Milvus Lite, banks."""
    from cluster.common import errors
    from memlane.settings import Settings

    with errors():  # a bad setting: one line
        report = collect(data_dir or Settings().data_dir)
    typer.echo(json.dumps(report) if json_out else _render(report))
