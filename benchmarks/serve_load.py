"""Load benchmark of the service: recall on a bank of 10k memories at concurrency 1, 8 and 32
beside a trivial Serve endpoint in the same run and through the same proxy, plus the Ingress (recall)
autoscaler's replica count over time (up under load, down after).

Bounded and loopback only: the service starts on 127.0.0.1 over a scratch data directory,
each level runs for a fixed time, and everything is stopped at the end. Run it with
``python benchmarks/serve_bench.py`` (or ``memlane bench suite``, which calls
:func:`run_serve_bench`).

The service's lifecycle (start, stop, joining its Ray cluster) belongs to the ``cluster``
package, which sits above this one; the caller hands it in as a :class:`ServiceControl`
(``cluster.bench_cmd.serve_bench_runner`` builds it), so the load generator imports no
``cluster`` module.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

BENCH_KEY = "bench-key"


@dataclass(frozen=True)
class ServiceControl:
    """How to run the service under test: its Serve config, ``start(data_dir, port, config,
    timeout_s=...)`` returning the state (``url``, ``ray_address``), ``stop(data_dir)``,
    ``connect(ray_address, **ray_init_kwargs)`` as a second driver, and ``free_port()``."""

    default_config: Path
    start: Callable[..., dict[str, Any]]
    stop: Callable[[Path], Any]
    connect: Callable[..., Any]
    free_port: Callable[[], int]


def _pct(xs: Sequence[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def _say(message: str) -> None:
    print(f"serve bench: {message}", flush=True, file=__import__("sys").stderr)


def _write_bank(data_dir: Path, bank: str, size: int) -> None:
    from benchmarks.engine import synthetic_batches
    from memlane.engine import Memory
    from memlane.settings import Settings

    settings = Settings(data_dir=data_dir)
    with Memory(settings) as memory:
        memory.create_bank(bank)
        for units in synthetic_batches(bank, size, settings.models.embedding_dim):
            memory.store.upsert_units(bank, units)
        memory.store.bump_revision(bank)


# The baseline beside the service in the same run, through the same proxy: serve/trivial.py.
TRIVIAL_APP = {
    "name": "trivial",
    "route_prefix": "/trivial",
    "import_path": "serve.trivial:app",
    "deployments": [
        {
            "name": "Trivial",
            "num_replicas": 1,
            "max_ongoing_requests": 64,
            "ray_actor_options": {"num_cpus": 0.1},
        }
    ],
}


def _bench_config(default_config: Path, path: Path, *, upscale_s: float, downscale_s: float) -> Path:
    config = yaml.safe_load(default_config.read_text())
    for dep in config["applications"][0]["deployments"]:
        if dep["name"] == "Ingress":
            dep["autoscaling_config"].update(
                min_replicas=1, max_replicas=2, upscale_delay_s=upscale_s, downscale_delay_s=downscale_s
            )
    config["applications"].append(TRIVIAL_APP)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


async def _load(
    url: str, bodies: list[dict], concurrency: int, seconds: float, headers: dict[str, str]
) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits, headers=headers) as http:

        async def worker(offset: int) -> None:
            nonlocal errors
            i = offset
            while time.perf_counter() < deadline:
                t = time.perf_counter()
                try:
                    r = await http.post(url, json=bodies[i % len(bodies)])
                    ok = r.status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies.append((time.perf_counter() - t) * 1000)
                else:
                    errors += 1
                i += concurrency

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        wall = time.perf_counter() - t0
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": round(len(latencies) / wall, 1),
        "p50_ms": round(_pct(latencies, 0.50), 1),
        "p95_ms": round(_pct(latencies, 0.95), 1),
        "p99_ms": round(_pct(latencies, 0.99), 1),
    }


class _ReplicaWatch:
    """Samples the running replica count of the Ingress deployment (where recall runs) once a second."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> _ReplicaWatch:
        self._thread.start()
        return self

    def count(self) -> int:
        from ray import serve

        dep = serve.status().applications["memlane"].deployments["Ingress"]
        return int(dep.replica_states.get("RUNNING", 0))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((round(time.monotonic() - self._t0, 1), self.count()))
            except Exception:  # noqa: BLE001 - a missed sample is fine
                pass
            self._stop.wait(1.0)

    def mark(self) -> float:
        return round(time.monotonic() - self._t0, 1)

    def stop(self) -> list[tuple[float, int]]:
        self._stop.set()
        self._thread.join()
        changes = []
        for t, n in self.samples:
            if not changes or changes[-1][1] != n:
                changes.append((t, n))
        return changes


def run_serve_bench(
    data_dir: Path,
    queries: int | None = None,
    *,
    bank_size: int = 10_000,
    concurrencies: Sequence[int] = (1, 8, 32),
    seconds: float = 20.0,
    port: int | None = None,
    downscale_s: float = 20.0,
    service: ServiceControl,
) -> dict[str, Any]:
    """Run the benchmark in a fresh ``data_dir`` against the service ``service`` runs;
    returns the report (see module docstring). ``queries`` caps the distinct query texts
    (default 200)."""
    import ray

    from benchmarks.engine import bench_queries

    data_dir = Path(data_dir).resolve()
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    bank = "bench"
    _say(f"writing a bank of {bank_size:,} synthetic memories")
    _write_bank(data_dir, bank, bank_size)
    config = _bench_config(
        service.default_config, data_dir / "bench-config.yaml", upscale_s=2.0, downscale_s=downscale_s
    )
    port = port or service.free_port()
    saved = {k: os.environ.get(k) for k in ("MEMLANE_SERVE__API_KEYS", "MEMLANE_SERVE__AUTH")}
    os.environ.update(MEMLANE_SERVE__API_KEYS=json.dumps({BENCH_KEY: [bank]}), MEMLANE_SERVE__AUTH="on")
    report: dict[str, Any] = {"bank_size": bank_size, "seconds_per_level": seconds, "levels": []}
    _say("starting the service")
    t = time.perf_counter()
    state = service.start(data_dir, port, config, timeout_s=600)
    report["start_s"] = round(time.perf_counter() - t, 1)
    try:
        url = state["url"]
        texts = bench_queries(queries or 200)
        recall_bodies = [{"query": q, "max_tokens": 1024} for q in texts]
        auth = {"Authorization": f"Bearer {BENCH_KEY}"}
        recall_url, trivial_url = f"{url}/v1/banks/{bank}/recall", f"{url}/trivial/"
        asyncio.run(_load(recall_url, recall_bodies[:20], 2, 5.0, auth))  # warm: index built
        asyncio.run(_load(trivial_url, recall_bodies[:20], 2, 2.0, {}))
        service.connect(state["ray_address"], logging_level="ERROR")
        watch = _ReplicaWatch().start()
        try:
            for c in concurrencies:
                _say(f"concurrency {c}: trivial endpoint, then recall, {seconds:.0f} s each")
                trivial = asyncio.run(_load(trivial_url, recall_bodies, c, seconds, {}))
                began = watch.mark()
                recall = asyncio.run(_load(recall_url, recall_bodies, c, seconds, auth))
                report["levels"].append(
                    {
                        "concurrency": c,
                        "trivial": trivial,
                        "recall": recall,
                        "recall_vs_trivial_rps": round(recall["rps"] / trivial["rps"], 3)
                        if trivial["rps"]
                        else None,
                        "recall_started_s": began,
                    }
                )
            load_end = watch.mark()
            _say(f"load over; watching the Ingress replicas scale down (up to {downscale_s + 60:.0f} s)")
            deadline = time.monotonic() + downscale_s + 60
            while time.monotonic() < deadline and watch.count() > 1:
                time.sleep(1)
            time.sleep(1.5)
        finally:
            changes = watch.stop()
            ray.shutdown()
        report["autoscaling"] = {
            "deployment": "Ingress",
            "min_replicas": 1,
            "max_replicas": 2,
            "replicas_over_time": [{"t_s": t_, "running": n} for t_, n in changes],
            "load_ended_s": load_end,
            "max_running": max((n for _, n in changes), default=0),
            "back_to_min": bool(changes) and changes[-1][1] == 1,
        }
    finally:
        service.stop(data_dir)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    at8 = next((lv for lv in report["levels"] if lv["concurrency"] == 8), None)
    ratios = [lv["recall_vs_trivial_rps"] for lv in report["levels"] if lv["recall_vs_trivial_rps"]]
    report["targets"] = {
        "recall_rps_at_least_half_of_trivial": {
            "min_ratio": min(ratios) if ratios else None,
            "met": bool(ratios) and min(ratios) >= 0.5,
        },
        "p95_at_concurrency_8_ms": {
            "value": at8["recall"]["p95_ms"] if at8 else None,
            "met": bool(at8) and at8["recall"]["p95_ms"] <= 500,
        },
    }
    return report


def format_serve_bench(report: dict[str, Any]) -> str:
    lines = [
        f"Serve load benchmark: recall on a bank of {report['bank_size']:,} memories vs a "
        f"trivial endpoint, {report['seconds_per_level']:.0f} s per level "
        f"(service started in {report['start_s']} s)",
        "| concurrency | endpoint | req/s | p50 ms | p95 ms | p99 ms | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for lv in report["levels"]:
        for name in ("trivial", "recall"):
            r = lv[name]
            lines.append(
                f"| {lv['concurrency']} | {name} | {r['rps']} | {r['p50_ms']} | "
                f"{r['p95_ms']} | {r['p99_ms']} | {r['errors']} |"
            )
        lines.append(f"| {lv['concurrency']} | recall / trivial | {lv['recall_vs_trivial_rps']} | | | | |")
    auto = report.get("autoscaling", {})
    timeline = ", ".join(f"{p['t_s']}s: {p['running']}" for p in auto.get("replicas_over_time", []))
    lines.append(
        f"Ingress (recall) replicas running over time: {timeline} (load ended at {auto.get('load_ended_s')} s)"
    )
    for name, target in report["targets"].items():
        lines.append(f"target {name}: {target}")
    return "\n".join(lines)
