"""Many banks through the service: bank-affine routing on vs off in one run.

``python benchmarks/many_banks.py [--banks 10000] [--requests 3000] [--replicas 2]``

Writes ``--banks`` banks of 20-200 synthetic memories each (sizes uniform, seeded; vectors and
texts from benchmarks/engine.py, written straight into the store: embedding ~1M texts would
take hours on 2 cores, and routing does not depend on where vectors came from), then starts
``memlane serve`` with ``--replicas`` Ingress replicas twice over the same data directory,
once with ``MEMLANE_SERVE__BANK_AFFINITY=true`` and once ``false``, and each time sends
``--requests`` recalls at concurrency 8 to banks drawn from a Zipf distribution (s = 1.1 over
a seeded shuffle of the banks: a few hot banks, a long tail). Per run: latency p50/p95, the
warm-hit rate (the ``X-Memlane-Bank`` header: the answering replica held the bank), how many
replicas answered, and the peak PSS and RSS of every process of the service.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.footprint import Footprint  # noqa: E402
from cluster.service import DEFAULT_CONFIG, start_background, stop  # noqa: E402


def _say(message: str) -> None:
    print(f"many banks: {message}", file=sys.stderr, flush=True)


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def write_banks(data_dir: Path, n: int, seed: int = 7) -> list[str]:
    """``n`` banks of 20-200 synthetic memories; their ids."""
    from benchmarks.engine import synthetic_batches
    from memlane.engine import Memory
    from memlane.settings import Settings

    rng = random.Random(seed)
    settings = Settings(data_dir=data_dir)
    banks = [f"user-{i:06d}" for i in range(n)]
    t0 = time.perf_counter()
    with Memory(settings) as memory:
        for i, bank in enumerate(banks):
            memory.create_bank(bank)
            for units in synthetic_batches(bank, rng.randint(20, 200), settings.models.embedding_dim):
                memory.store.upsert_units(bank, units)
            memory.store.bump_revision(bank)
            if (i + 1) % max(1, n // 20) == 0:
                rate = (i + 1) / (time.perf_counter() - t0)
                _say(f"{i + 1:,} of {n:,} banks written ({rate:.1f} banks/s)")
    return banks


def zipf_choices(banks: list[str], k: int, s: float = 1.1, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    order = banks[:]
    rng.shuffle(order)
    weights = [1.0 / (r + 1) ** s for r in range(len(order))]
    return rng.choices(order, weights=weights, k=k)


def _config(path: Path, replicas: int) -> Path:
    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for dep in config["applications"][0]["deployments"]:
        if dep["name"] == "Ingress":
            dep.pop("autoscaling_config", None)
            dep["num_replicas"] = replicas
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


async def _recalls(url: str, targets: list[str], concurrency: int) -> dict[str, Any]:
    import httpx

    from benchmarks.engine import bench_queries

    queries = bench_queries(200)
    lat: list[float] = []
    warm = errors = 0
    replicas: set[str] = set()
    first_error: list[str] = []
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def one(i: int, bank: str) -> None:
            nonlocal warm, errors
            async with sem:
                t = time.perf_counter()
                try:
                    r = await http.post(f"/v1/banks/{bank}/recall", json={"query": queries[i % len(queries)]})
                except httpx.HTTPError as exc:
                    errors += 1
                    first_error[:] = first_error or [repr(exc)]
                    return
                if r.status_code != 200:
                    errors += 1
                    first_error[:] = first_error or [f"{r.status_code} {r.text[:200]}"]
                    return
                lat.append(time.perf_counter() - t)
                warm += r.headers.get("X-Memlane-Bank") == "warm"
                replicas.add(r.headers.get("X-Memlane-Replica", ""))

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i, b) for i, b in enumerate(targets)))
        wall = time.perf_counter() - t0
    return {
        "requests": len(lat),
        "errors": errors,
        "rps": round(len(lat) / wall, 1),
        "p50_ms": round(_pct(lat, 0.5) * 1000, 1),
        "p95_ms": round(_pct(lat, 0.95) * 1000, 1),
        "warm_hit_rate": round(warm / max(1, len(lat)), 3),
        "replicas_answering": len(replicas),
        **({"first_error": first_error[0]} if first_error else {}),
    }


def run(data_dir: Path, *, banks: int, requests: int, replicas: int, concurrency: int = 8) -> dict[str, Any]:
    from cluster.local import free_port

    data_dir = data_dir.resolve()
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    ids = write_banks(data_dir, banks)
    report: dict[str, Any] = {
        "banks": banks,
        "write_s": round(time.perf_counter() - t0, 1),
        "requests": requests,
        "replicas": replicas,
        "layout": os.environ.get("MEMLANE_STORE__LAYOUT", "default"),
    }
    targets = zipf_choices(ids, requests)
    report["distinct_banks_recalled"] = len(set(targets))
    os.environ.setdefault("MEMLANE_SERVE__AUTH", "off")
    for affinity in ("true", "false"):
        os.environ["MEMLANE_SERVE__BANK_AFFINITY"] = affinity
        port = free_port()
        _say(f"bank affinity {affinity}: starting the service with {replicas} Ingress replicas")
        state = start_background(
            data_dir, port, _config(data_dir / "many-config.yaml", replicas), timeout_s=900
        )
        try:
            with Footprint(int(state["pid"])) as footprint:
                result = asyncio.run(_recalls(state["url"], targets, concurrency))
            fp = footprint.report()
            result.update(peak_pss_mb=fp["peak_pss_mb"], peak_rss_mb=fp["peak_rss_mb"])
        finally:
            stop(data_dir)
        _say(f"bank affinity {affinity}: {json.dumps(result)}")
        report[f"affinity_{'on' if affinity == 'true' else 'off'}"] = result
    return report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, default=Path(".memlane-many-banks"))
    p.add_argument("--banks", type=int, default=10_000)
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    if a.banks < 1 or a.requests < 1 or a.replicas < 1:
        print("error: --banks, --requests and --replicas must be at least 1", file=sys.stderr)
        raise SystemExit(2)
    report = run(a.data_dir, banks=a.banks, requests=a.requests, replicas=a.replicas)
    if a.out:
        a.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
