"""The Hindsight peer's workload through ``memlane serve``, for figures beside the peer's own
(``../shared/peers/README.md``: its script runs Hindsight 1.1.0 on the same workload).

``python benchmarks/peer_bench.py [--locomo FILE] [--config serve/config.yaml]``
``python benchmarks/peer_bench.py --client hindsight [--peer-url http://127.0.0.1:8888]``
``python benchmarks/peer_bench.py --runtime both --conversations 1 --recalls 100``

The workload is the peer's: the first 2 LoCoMo conversations, one synchronous retain request
per session (its turns as items, the session's date as their time), then 200 recalls (the
conversations' questions round-robin, budget mid, max_tokens 4096) one at a time, then 8 at a
time, after 5 warm-up recalls. Beside it, in the same run and through the same proxy, a
trivial Serve endpoint at the same concurrency (the floor Serve itself sets; Ray runtime
only). The footprint is the PSS (proportional set size: shared pages divided among the
processes that map them) summed over every process of the service (the supervisor and its
descendants: Ray's, Serve's, the Milvus Lite server), sampled every 0.5 s; its peak and what
each process held then. Each phase also reports the service's CPU per request (or per turn
retained): the user and system time of that process tree over the phase, which the client's
and other load move far less than the rates. ``--runtime``: the service's runtime (``memlane serve --runtime``:
``ray``, the default here, or ``process``), or ``both``, one after the other on the same
workload, with a table of the two beside each other.

With ``--client hindsight`` the peer's own workload runs through hindsight-client
(benchmarks/peer_client.py: one item per session, as the peer's script sends them) against
the service's Hindsight-compatible surface (``/hindsight``), or, with ``--peer-url``, against
a Hindsight server already running there (no Memlane service is started): the same client
code on both servers.

Bounded and loopback only: a fresh scratch data directory, fixed request counts, per-request
timeouts; the service is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.footprint import Footprint  # noqa: E402
from benchmarks.serve_load import TRIVIAL_APP  # noqa: E402
from cluster.service import DEFAULT_CONFIG, start_background, stop  # noqa: E402

BANK = "peer-bench"


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def _say(message: str) -> None:
    print(f"peer bench: {message}", file=sys.stderr, flush=True)


def sessions(conversation: dict) -> list[dict[str, Any]]:
    """One retain body per session of a LoCoMo conversation: its turns as items, each at the
    session's date (a second apart, so their order is kept)."""
    conv = conversation["conversation"]
    sid = conversation["sample_id"]
    keys = sorted(
        (k for k in conv if k.startswith("session_") and isinstance(conv[k], list) and conv[k]),
        key=lambda k: int(k.split("_")[1]),
    )
    bodies = []
    for k in keys:
        at = datetime.strptime(conv[f"{k}_date_time"].strip(), "%I:%M %p on %d %B, %Y")
        items = [
            {
                "content": t["text"],
                "speaker": t["speaker"],
                "timestamp": (at + timedelta(seconds=i)).isoformat(),
                "session_id": f"{sid}_{k}",
            }
            for i, t in enumerate(conv[k])
            if t.get("text")
        ]
        bodies.append({"items": items, "document_id": f"{sid}_{k}"})
    return bodies


def questions(conversations: list[dict], n: int) -> list[str]:
    """``n`` questions, round-robin over the conversations (as the peer's script picks them)."""
    per = [[q["question"] for q in c["qa"] if q.get("question")] for c in conversations]
    out: list[str] = []
    i = 0
    while len(out) < n and i < max(len(x) for x in per):
        for qs in per:
            if i < len(qs) and len(out) < n:
                out.append(qs[i])
        i += 1
    return out


def _config(path: Path, base: Path) -> Path:
    """The service's config plus a trivial application beside it (same proxy)."""
    config = yaml.safe_load(base.read_text())
    config["applications"].append(TRIVIAL_APP)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _summary(latencies: list[float], errors: int, wall: float) -> dict[str, Any]:
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": round(len(latencies) / wall, 1),
        "p50_ms": round(_pct(latencies, 0.50) * 1000, 1),
        "p95_ms": round(_pct(latencies, 0.95) * 1000, 1),
        "mean_ms": round(statistics.mean(latencies) * 1000, 1) if latencies else 0.0,
    }


async def _workload(
    url: str,
    conversations: list[dict],
    recalls: int,
    concurrency: int,
    trivial_app: bool = True,
    cpu_s: Callable[[], dict[str, float]] = dict,
) -> dict[str, Any]:
    """The workload; ``cpu_s()``: the CPU seconds of each of the service's processes so far
    (each phase reports its CPU per request, in all and by process: the service's own cost,
    which this client's and other load moves little)."""

    def cpu_ms(before: dict[str, float], count: int) -> dict[str, Any]:
        now = cpu_s()
        by = {name: (now[name] - before.get(name, 0.0)) * 1000 / count for name in now}
        return {"all": round(sum(by.values()), 1), "by_process": {k: round(v, 1) for k, v in by.items()}}

    import httpx

    out: dict[str, Any] = {}
    limits = httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=concurrency + 2)
    async with httpx.AsyncClient(
        base_url=url, timeout=httpx.Timeout(600.0, connect=10.0), limits=limits
    ) as http:
        (await http.put(f"/v1/banks/{BANK}", json={})).raise_for_status()
        bodies = [b for c in conversations for b in sessions(c)]
        turns = sum(len(b["items"]) for b in bodies)
        errors, per = 0, []
        t0, c0 = time.perf_counter(), cpu_s()
        for body in bodies:
            s = time.perf_counter()
            r = await http.post(f"/v1/banks/{BANK}/memories", json=body)
            per.append(time.perf_counter() - s)
            errors += r.status_code != 200
        wall = time.perf_counter() - t0
        out["retain"] = {
            "sessions": len(bodies),
            "turns": turns,
            "wall_s": round(wall, 1),
            "turns_per_s": round(turns / wall, 1),
            "req_p50_s": round(_pct(per, 0.5), 3),
            "req_p95_s": round(_pct(per, 0.95), 3),
            "errors": errors,
            "cpu_ms_per_turn": cpu_ms(c0, turns),
        }
        _say(f"retain: {json.dumps(out['retain'])}")

        qs = questions(conversations, recalls)

        async def call(path: str, body: dict) -> tuple[float, bool, int, int]:
            s = time.perf_counter()
            try:
                r = await http.post(path, json=body)
                ok = r.status_code == 200
                answer = r.json() if ok and path.endswith("recall") else {}
                n, k = len(answer.get("memories", [])), len(answer.get("nodes") or [])
            except httpx.HTTPError:
                ok, n, k = False, 0, 0
            return time.perf_counter() - s, ok, n, k

        recall_path = f"/v1/banks/{BANK}/recall"

        def body(q: str) -> dict:
            return {"query": q, "budget": "mid", "max_tokens": 4096}

        for q in qs[:5]:
            await call(recall_path, body(q))
        lat, errs, found, nodes = [], 0, [], []
        t0, c0 = time.perf_counter(), cpu_s()
        for q in qs:
            dt, ok, n, k = await call(recall_path, body(q))
            lat.append(dt)
            errs += not ok
            found.append(n)
            nodes.append(k)
        out["recall_seq"] = _summary(lat, errs, time.perf_counter() - t0)
        out["recall_seq"]["cpu_ms_per_request"] = cpu_ms(c0, len(qs))
        out["recall_seq"]["mean_memories"] = round(statistics.mean(found), 1)
        # the temporal tree's nodes share the answer's token budget with the memories
        out["recall_seq"]["mean_tree_nodes"] = round(statistics.mean(nodes), 1)
        _say(f"recall one at a time: {json.dumps(out['recall_seq'])}")

        async def at_concurrency(path: str, bodies: list[dict]) -> dict[str, Any]:
            sem = asyncio.Semaphore(concurrency)

            async def guarded(b: dict) -> tuple[float, bool, int, int]:
                async with sem:
                    return await call(path, b)

            t0, c0 = time.perf_counter(), cpu_s()
            res = await asyncio.gather(*(guarded(b) for b in bodies))
            wall = time.perf_counter() - t0
            summary = _summary([r[0] for r in res if r[1]], sum(not r[1] for r in res), wall)
            summary["cpu_ms_per_request"] = cpu_ms(c0, len(bodies))
            return summary

        out[f"recall_c{concurrency}"] = await at_concurrency(recall_path, [body(q) for q in qs])
        _say(f"recall {concurrency} at a time: {json.dumps(out[f'recall_c{concurrency}'])}")
        if not trivial_app:
            return out
        trivial = [{"i": i} for i in range(len(qs))]
        await at_concurrency("/trivial/", trivial[:5])
        out[f"trivial_c{concurrency}"] = await at_concurrency("/trivial/", trivial)
        _say(f"trivial {concurrency} at a time: {json.dumps(out[f'trivial_c{concurrency}'])}")
    return out


def run(
    locomo: Path,
    data_dir: Path,
    config: Path,
    *,
    conversations: int = 2,
    recalls: int = 200,
    concurrency: int = 8,
    client: str = "memlane",
    runtime: str = "ray",
) -> dict[str, Any]:
    """Start the service over a fresh ``data_dir`` with ``config`` (plus the trivial app), run
    the workload (``client`` "hindsight": through hindsight-client at ``/hindsight``), stop the
    service; the report."""
    from cluster.local import free_port

    convs = json.loads(locomo.read_text())[:conversations]
    data_dir = data_dir.resolve()
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    port = free_port()
    os.environ.setdefault("MEMLANE_SERVE__AUTH", "off")
    _say(f"starting the service on 127.0.0.1:{port} over {data_dir}")
    t0 = time.perf_counter()
    if runtime == "ray":
        state = start_background(
            data_dir, port, _config(data_dir / "peer-config.yaml", config), timeout_s=600
        )
    else:
        state = start_background(data_dir, port, timeout_s=600, runtime=runtime)
    report: dict[str, Any] = {
        "runtime": runtime,
        "config": str(config) if runtime == "ray" else None,
        "start_s": round(time.perf_counter() - t0, 1),  # launch to /v1/health 200
    }
    try:
        with Footprint(int(state["pid"])) as footprint:
            if client == "hindsight":
                from benchmarks.peer_client import workload

                run_it = workload(state["url"] + "/hindsight", convs, questions(convs, recalls), concurrency)
            else:
                run_it = _workload(
                    state["url"], convs, recalls, concurrency, runtime == "ray", cpu_s=footprint.cpu_s
                )
            report.update(asyncio.run(run_it))
        fp = footprint.report()
        # The trivial app is the benchmark's, not the service's: its replica is left out.
        trivial = sum(p["pss_mb"] for p in fp["processes_at_peak"] if ":trivial:" in p["process"])
        fp["service_pss_mb"] = fp["peak_pss_mb"] - trivial
        report["footprint"] = fp
    finally:
        stop(data_dir)
    return report


def side_by_side(reports: dict[str, dict[str, Any]], concurrency: int) -> str:
    """The runtimes' figures in columns: start, footprint, retain, recall."""
    rows = [
        ("time to healthy (s)", lambda r: r["start_s"]),
        ("service PSS at peak (MB)", lambda r: r["footprint"]["service_pss_mb"]),
        ("processes at peak (>= 1 MB)", lambda r: len(r["footprint"]["processes_at_peak"])),
        ("retain turns/s", lambda r: r["retain"]["turns_per_s"]),
        ("retain request p50 (s)", lambda r: r["retain"]["req_p50_s"]),
        ("recall 1 at a time req/s", lambda r: r["recall_seq"]["rps"]),
        ("recall 1 at a time p50 (ms)", lambda r: r["recall_seq"]["p50_ms"]),
        (f"recall {concurrency} at a time req/s", lambda r: r[f"recall_c{concurrency}"]["rps"]),
        (f"recall {concurrency} at a time p50 (ms)", lambda r: r[f"recall_c{concurrency}"]["p50_ms"]),
    ]
    names = list(reports)
    lines = [f"{'':34}" + "".join(f"{n:>12}" for n in names)]
    for label, get in rows:
        lines.append(f"{label:34}" + "".join(f"{get(reports[n])!s:>12}" for n in names))
    for n in names:
        top = ", ".join(
            f"{p['process'][:40]} {p['pss_mb']}" for p in reports[n]["footprint"]["processes_at_peak"]
        )
        lines.append(f"{n} at peak (PSS MB): {top}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--locomo", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo10.json"
    )
    p.add_argument("--data-dir", type=Path, default=Path(".memlane-peer-bench"))
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    p.add_argument("--recalls", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--conversations", type=int, default=2)
    p.add_argument(
        "--client",
        choices=("memlane", "hindsight"),
        default="memlane",
        help="the workload's client: Memlane's /v1 over httpx, or hindsight-client at /hindsight",
    )
    p.add_argument("--peer-url", help="with --client hindsight: a running Hindsight server to drive instead")
    p.add_argument(
        "--runtime",
        choices=("ray", "process", "both", "process,ray", "ray,process"),
        default="ray",
        help="the service's runtime (memlane serve --runtime), or both one after the other "
        "(both: process first)",
    )
    p.add_argument("--out", type=Path, help="also write the report here (JSON)")
    a = p.parse_args()
    if not a.locomo.is_file():
        print(f"error: LoCoMo file not found: {a.locomo} (pass --locomo)", file=sys.stderr)
        raise SystemExit(2)
    if a.peer_url and a.client != "hindsight":
        print("error: --peer-url needs --client hindsight", file=sys.stderr)
        raise SystemExit(2)
    if a.peer_url:
        from benchmarks.peer_client import workload

        convs = json.loads(a.locomo.read_text())[: a.conversations]
        qs = questions(convs, a.recalls)
        report = asyncio.run(workload(a.peer_url, convs, qs, a.concurrency))
    else:
        runtimes = ("process", "ray") if a.runtime == "both" else tuple(a.runtime.split(","))
        reports = {
            rt: run(
                a.locomo,
                a.data_dir.with_name(f"{a.data_dir.name}-{rt}") if len(runtimes) > 1 else a.data_dir,
                a.config,
                conversations=a.conversations,
                recalls=a.recalls,
                concurrency=a.concurrency,
                client=a.client,
                runtime=rt,
            )
            for rt in runtimes
        }
        report = reports[runtimes[0]] if len(runtimes) == 1 else {"runtimes": reports}
        if len(runtimes) > 1:
            print(side_by_side(reports, a.concurrency), file=sys.stderr)
    if a.out:
        a.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
