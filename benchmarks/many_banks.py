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
replicas answered, the peak PSS and RSS of every process of the service, each replica's PSS
every ``--every`` seconds and the banks each replica holds at the end (its warm-bank gauge).

``--milvus-server``: the banks go into a local Milvus server (cluster/milvus_server.py, the
shared layout, written in bulk) that the service uses. ``--retain-share``: that share of the
requests retain one memory into their bank instead (retain p50/p95 apart). ``--order each``:
every bank once (a shuffled order) instead of Zipf: a replica retaining into every bank, the
budget's worst case (``MEMLANE_RECALL__STATE_MAX_BANKS`` / ``_MB`` from the environment).
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


def write_banks_server(uri: str, data_dir: Path, n: int, seed: int = 7, bulk: int = 500) -> list[str]:
    """``n`` banks of 20-200 synthetic memories on a Milvus server, in its shared layout, ``bulk``
    banks per write (benchmarks/scale.py's path: the store's codec and layout, one upsert per
    collection; 82.5 banks/s there against ~10 through ``upsert_units`` per bank); their ids."""
    from benchmarks.many_banks_layout import DIM, bank_units
    from benchmarks.scale import _bulk_write
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    rng = random.Random(seed)
    settings = Settings(data_dir=data_dir, store={"milvus_uri": uri, "layout": "partition_key"})
    banks = [f"user-{i:06d}" for i in range(n)]
    t0 = time.perf_counter()
    with MilvusStore(settings, dim=DIM) as store:
        pending: list[tuple[str, list]] = []
        for i, bank in enumerate(banks):
            pending.append((bank, bank_units(bank, rng.randint(20, 200), seed * 1_000_003 + i)[0]))
            if len(pending) >= bulk or i == n - 1:
                _bulk_write(store, pending)
                pending = []
            if (i + 1) % max(1, n // 20) == 0:
                _say(f"{i + 1:,} of {n:,} banks written ({(i + 1) / (time.perf_counter() - t0):.1f} banks/s)")
    return banks


def each_once(banks: list[str], k: int, seed: int = 11) -> list[str]:
    """Every bank once in a seeded shuffle, repeated up to ``k`` requests."""
    rng = random.Random(seed)
    order = banks[:]
    rng.shuffle(order)
    return [order[i % len(order)] for i in range(k)]


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


async def _recalls(
    url: str, targets: list[str], concurrency: int, retain_share: float = 0.0
) -> dict[str, Any]:
    """Send a request per target bank at ``concurrency``: a recall, or with probability
    ``retain_share`` (seeded) a retain of one new memory."""
    import httpx

    from benchmarks.engine import bench_queries

    queries = bench_queries(200)
    kinds = random.Random(5)
    retains = {i for i in range(len(targets)) if kinds.random() < retain_share}
    lat: list[float] = []
    retain_lat: list[float] = []
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
                    if i in retains:
                        item = {"content": f"Request {i}: {queries[i % len(queries)]}", "speaker": "bench"}
                        r = await http.post(f"/v1/banks/{bank}/memories", json={"items": [item]})
                    else:
                        r = await http.post(
                            f"/v1/banks/{bank}/recall", json={"query": queries[i % len(queries)]}
                        )
                except httpx.HTTPError as exc:
                    errors += 1
                    first_error[:] = first_error or [repr(exc)]
                    return
                if r.status_code != 200:
                    errors += 1
                    first_error[:] = first_error or [f"{r.status_code} {r.text[:200]}"]
                    return
                if i in retains:
                    retain_lat.append(time.perf_counter() - t)
                    return
                lat.append(time.perf_counter() - t)
                warm += r.headers.get("X-Memlane-Bank") == "warm"
                replicas.add(r.headers.get("X-Memlane-Replica", ""))

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i, b) for i, b in enumerate(targets)))
        wall = time.perf_counter() - t0
    return {
        "requests": len(lat) + len(retain_lat),
        "errors": errors,
        "rps": round((len(lat) + len(retain_lat)) / wall, 1),
        "recalls": len(lat),
        "p50_ms": round(_pct(lat, 0.5) * 1000, 1),
        "p95_ms": round(_pct(lat, 0.95) * 1000, 1),
        **(
            {
                "retains": len(retain_lat),
                "retain_p50_ms": round(_pct(retain_lat, 0.5) * 1000, 1),
                "retain_p95_ms": round(_pct(retain_lat, 0.95) * 1000, 1),
            }
            if retains
            else {}
        ),
        "warm_hit_rate": round(warm / max(1, len(lat)), 3),
        "replicas_answering": len(replicas),
        **({"first_error": first_error[0]} if first_error else {}),
    }


def _held_gauges(port: int) -> dict[str, list[float]]:
    """The warm-bank gauges per deployment (one value per replica) from the metrics endpoint."""
    import httpx

    out: dict[str, list[float]] = {}
    for line in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text.splitlines():
        if line.startswith("ray_memlane_recall_warm_banks{") and 'deployment="' in line:
            dep = line.split('deployment="', 1)[1].split('"', 1)[0]
            out.setdefault(dep, []).append(float(line.rsplit(" ", 1)[1]))
    return out


def run(
    data_dir: Path,
    *,
    banks: int,
    requests: int,
    replicas: int,
    concurrency: int = 8,
    milvus_server: bool = False,
    milvus_uri: str = "",
    write: bool = True,
    retain_share: float = 0.0,
    order: str = "zipf",
    affinities: tuple[str, ...] = ("true", "false"),
    every_s: float = 10.0,
) -> dict[str, Any]:
    from cluster.local import free_port

    data_dir = data_dir.resolve()
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    from cluster import milvus_server as ms

    server = None
    if milvus_server and not milvus_uri:
        server = ms.start(data_dir / "milvus", port=free_port())
        milvus_uri = server.uri
    if milvus_uri:
        os.environ["MEMLANE_STORE__MILVUS_URI"] = milvus_uri
        os.environ["MEMLANE_STORE__LAYOUT"] = "partition_key"
    try:
        t0 = time.perf_counter()
        if not write:  # the banks of an earlier run with the same --banks, on --milvus-uri
            ids = [f"user-{i:06d}" for i in range(banks)]
        elif milvus_uri:
            ids = write_banks_server(milvus_uri, data_dir, banks)
        else:
            ids = write_banks(data_dir, banks)
        report: dict[str, Any] = {
            "banks": banks,
            "store": f"Milvus server at {milvus_uri}" if milvus_uri else "Milvus Lite",
            "write_s": round(time.perf_counter() - t0, 1) if write else None,
            "requests": requests,
            "retain_share": retain_share,
            "order": order,
            "replicas": replicas,
            "layout": os.environ.get("MEMLANE_STORE__LAYOUT", "default"),
            "state_max_banks": os.environ.get("MEMLANE_RECALL__STATE_MAX_BANKS", "default"),
        }
        targets = each_once(ids, requests) if order == "each" else zipf_choices(ids, requests)
        report["distinct_banks_used"] = len(set(targets))
        os.environ.setdefault("MEMLANE_SERVE__AUTH", "off")
        for affinity in affinities:
            os.environ["MEMLANE_SERVE__BANK_AFFINITY"] = affinity
            port = free_port()
            _say(f"bank affinity {affinity}: starting the service with {replicas} Ingress replicas")
            state = start_background(
                data_dir, port, _config(data_dir / "many-config.yaml", replicas), timeout_s=900
            )
            try:
                with Footprint(int(state["pid"]), every_s=every_s) as footprint:
                    result = asyncio.run(_recalls(state["url"], targets, concurrency, retain_share))
                    time.sleep(5)  # the gauges refresh every 2 s (actors/gauges.py)
                    result["held_banks_at_end"] = _held_gauges(int(state["metrics_export_port"]))
                fp = footprint.report()
                result.update(
                    peak_pss_mb=fp["peak_pss_mb"],
                    peak_rss_mb=fp["peak_rss_mb"],
                    replica_pss_mb_over_time=fp.get("replica_pss_mb_over_time", []),
                )
            finally:
                stop(data_dir)
            _say(
                f"bank affinity {affinity}: {json.dumps({k: v for k, v in result.items() if 'over_time' not in k})}"
            )
            report[f"affinity_{'on' if affinity == 'true' else 'off'}"] = result
    finally:
        if server is not None:
            ms.stop(data_dir / "milvus")
    return report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, default=Path(".memlane-many-banks"))
    p.add_argument("--banks", type=int, default=10_000)
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument(
        "--milvus-server", action="store_true", help="A local Milvus server (shared layout), not Lite."
    )
    p.add_argument("--milvus-uri", default="", help="A running Milvus server to use (not started here).")
    p.add_argument(
        "--no-write", action="store_true", help="The banks are there (an earlier run's, --milvus-uri)."
    )
    p.add_argument("--retain-share", type=float, default=0.0, help="Share of requests that retain a memory.")
    p.add_argument(
        "--order", choices=("zipf", "each"), default="zipf", help="Zipf over banks, or each bank once."
    )
    p.add_argument("--affinity", choices=("both", "on", "off"), default="both")
    p.add_argument("--every", type=float, default=10.0, help="Seconds between samples of each replica's PSS.")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    if a.banks < 1 or a.requests < 1 or a.replicas < 1 or not 0 <= a.retain_share <= 1:
        print(
            "error: --banks, --requests and --replicas must be at least 1, --retain-share in [0, 1]",
            file=sys.stderr,
        )
        raise SystemExit(2)
    report = run(
        a.data_dir,
        banks=a.banks,
        requests=a.requests,
        replicas=a.replicas,
        milvus_server=a.milvus_server,
        milvus_uri=a.milvus_uri,
        write=not a.no_write,
        retain_share=a.retain_share,
        order=a.order,
        affinities={"both": ("true", "false"), "on": ("true",), "off": ("false",)}[a.affinity],
        every_s=a.every,
    )
    if a.out:
        a.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
