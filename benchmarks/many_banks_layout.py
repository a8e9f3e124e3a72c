"""Many small banks on the two tenant layouts, through the store and a ``milvus-lite server``.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/many_banks_layout.py --banks 1000``
(``--banks 10000``: about 10x longer; ``--per-bank-banks`` sets the per-bank run's size;
``--migrate`` also times ``memlane store migrate`` of the per-bank store to partition_key).

For each run (a fresh ``milvus-lite server`` on its own data directory, the store of
memlane.stores.milvus in the layout named, ``flush_writes`` off as on a server, one flush at
the end): write N banks of ``--units`` synthetic units each (384-d random unit vectors, 8-20
word sentences), one ``upsert_units`` call per bank as a retain writes them; then on
``--queries`` random banks time a dense search (top 10, query = one of the bank's vectors plus
noise), a BM25 search (top 10, two of the bank's words), a fetch of 5 units by id and a count,
and check that dense hits equal numpy's exact top 10 over the bank's own vectors (recall@10)
and that no hit comes from another bank. It prints the write rate (overall and per tenth of
the run), p50/p95 per operation, the server's RSS and the data directory's size.

Runs, in this order and in the same process: per_bank at ``--per-bank-banks`` banks,
partition_key at the same size (the baseline of the same run), partition_key at ``--banks``.

What Milvus Lite as a stand-in for a server shows and does not show: see NOTES below (also
printed with the results).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cluster.local import MilvusLiteServer
from memlane.records import MemoryUnit
from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore
from memlane.stores.milvus.migrate import migrate_layout

DIM = 384
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "pu", "ra", "si", "to", "vu", "ze") for b in range(500)]
WEIGHTS = [1.0 / (i + 1) for i in range(len(WORDS))]
T0 = 1_700_000_000

NOTES = """\
What the milvus-lite server stands in for, and what it cannot show:
- It shows: the store code of both layouts working at this many banks through a server process
  (gRPC, one client), isolation under a shared collection (no hit from another bank), exact
  recall@10 per bank, write throughput of one upsert per bank, and where per-bank collections
  stop being practical on Lite (collections and threads per bank, creation time).
- It does not show a server's latency: Milvus Lite 3.x is a Python engine (numpy / FAISS) that
  hashes a partition key into 16 buckets whatever num_partitions says and does not prune them on
  a bank filter; every bank query scans the whole shared collection, so its latency grows with
  the total rows, which a Milvus server's partition pruning and segment indexes avoid. Nor
  memory per collection on a server (query nodes load segments), nor its limits (65,536
  collections, quotas) or distributed write paths. Treat the partition_key latency here as a
  worst case and the per-bank figures as Lite's, not a server's."""


def rss_kb(pid: int) -> int:
    """Resident set of a process and its descendants, in kB (0 when gone)."""
    out = subprocess.run(["ps", "-o", "rss=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    total = sum(int(x) for x in out.split() if x.isdigit())
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    except OSError:
        pass
    return total


def threads(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs) * 1000.0
    return {"p50_ms": round(float(np.percentile(a, 50)), 2), "p95_ms": round(float(np.percentile(a, 95)), 2)}


def bank_units(bank: str, n: int, seed: int) -> tuple[list[MemoryUnit], np.ndarray]:
    rng = np.random.default_rng(seed)
    rnd = random.Random(seed)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    units = [
        MemoryUnit(
            id=f"u{i:04d}",  # the same ids in every bank: the shared layout keys them by bank
            bank_id=bank,
            text=" ".join(rnd.choices(WORDS, weights=WEIGHTS, k=rnd.randint(8, 20))),
            embedding=vecs[i].tolist(),
            mentioned_at=T0 + i * 60,
            document_id=f"doc{i // 10}",
        )
        for i in range(n)
    ]
    return units, vecs


def run(
    layout: str, n_banks: int, units: int, queries: int, root: Path, seed: int, migrate_to: str | None = None
) -> dict:
    """One layout at ``n_banks`` on a fresh server; ``migrate_to``: then time the migration
    of the whole store to that layout (memlane store migrate)."""
    data = root / f"{layout}-{n_banks}"
    shutil.rmtree(data, ignore_errors=True)
    server = MilvusLiteServer(data).start()
    try:
        settings = Settings(data_dir=data, store={"milvus_uri": server.uri, "layout": layout})
        store = MilvusStore(settings, dim=DIM, flush_writes=False)
        assert store.layout.name == layout and store.is_lite
        rnd = random.Random(seed)
        probe = sorted(rnd.sample(range(n_banks), min(queries, n_banks)))
        wanted = set(probe)
        kept: dict[int, tuple[list[MemoryUnit], np.ndarray]] = {}
        tenths: list[float] = []
        t0 = time.perf_counter()
        mark = t0
        step = max(1, n_banks // 10)
        for b in range(n_banks):
            bank = f"bank{b:06d}"
            us, vecs = bank_units(bank, units, seed * 1_000_003 + b)
            store.upsert_units(bank, us)
            if b in wanted:
                kept[b] = (us, vecs)
            if (b + 1) % step == 0:
                now = time.perf_counter()
                tenths.append(round(step / (now - mark), 1))
                mark = now
        write_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        for name in dict.fromkeys(store._names("bank000000").values()):
            if store.client.has_collection(name):
                store.client.flush(name)
        if not store.layout.shared:
            for b in range(n_banks):
                for kind, name in store._names(f"bank{b:06d}").items():
                    if kind != "tree":
                        store.client.flush(name)
        flush_s = time.perf_counter() - t1
        lat: dict[str, list[float]] = {"dense": [], "bm25": [], "get5": [], "count": []}
        recall, foreign, bm25_own = [], 0, 0
        qrng = np.random.default_rng(seed + 1)
        for b in probe:
            bank = f"bank{b:06d}"
            us, vecs = kept[b]
            i = int(qrng.integers(len(us)))
            q = vecs[i] + 0.3 * qrng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
            t = time.perf_counter()
            hits = store.search_dense(bank, q[None, :], 10, fields=["bank_id"])[0]
            lat["dense"].append(time.perf_counter() - t)
            exact = {us[j].id for j in np.argsort(-(vecs @ (q / np.linalg.norm(q))))[:10]}
            recall.append(len(exact & {h.id for h in hits}) / len(exact))
            foreign += sum(1 for h in hits if h.fields["bank_id"] != bank)
            words = us[i].text.split()
            t = time.perf_counter()
            lex = store.search_lexical(bank, " ".join(words[:2]), 10, fields=["bank_id"])
            lat["bm25"].append(time.perf_counter() - t)
            foreign += sum(1 for h in lex if h.fields["bank_id"] != bank)
            bm25_own += any(h.id == us[i].id for h in lex)
            ids = [u.id for u in us[:5]]
            t = time.perf_counter()
            got = store.get_units(bank, ids)
            lat["get5"].append(time.perf_counter() - t)
            foreign += sum(1 for u in got if u.bank_id != bank or u.text not in {x.text for x in us})
            t = time.perf_counter()
            n = store.count_units(bank)
            lat["count"].append(time.perf_counter() - t)
            assert n == units, (bank, n)
        listed = len(store.list_banks())
        collections = len(store.client.list_collections())
        store.close()
        # the server's footprint before any migration adds the other layout's copy
        pid = server.proc.pid if server.proc else 0
        rss_mb, n_threads, data_mb = round(rss_kb(pid) / 1024.0, 1), threads(pid), round(dir_mb(data), 1)
        moved: dict = {}
        if migrate_to:
            t = time.perf_counter()
            report = migrate_layout(
                settings.model_copy(update={"models": {"embedding_dim": DIM}}), migrate_to
            )
            took = time.perf_counter() - t
            assert report.switched and len(report.banks) == n_banks
            moved = {
                "migrate_to": migrate_to,
                "migrate_s": round(took, 1),
                "migrate_banks_per_s": round(n_banks / took, 1),
            }
        return {
            **moved,
            "layout": layout,
            "banks": n_banks,
            "units_per_bank": units,
            "rows": n_banks * units,
            "collections": collections,
            "banks_listed": listed,
            "write_s": round(write_s, 1),
            "banks_per_s": round(n_banks / write_s, 1),
            "units_per_s": round(n_banks * units / write_s, 1),
            "banks_per_s_by_tenth": tenths,
            "flush_s": round(flush_s, 1),
            "queries": len(probe),
            **{k: pct(v) for k, v in lat.items()},
            "dense_recall_at_10": round(float(np.mean(recall)), 4),
            "bm25_finds_source_unit": round(bm25_own / len(probe), 3),
            "foreign_hits": foreign,
            "server_rss_mb": rss_mb,
            "server_threads": n_threads,
            "data_mb": data_mb,
        }
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--banks", type=int, default=1000, help="banks on the partition-key layout")
    ap.add_argument("--per-bank-banks", type=int, default=200, help="banks on each same-size run")
    ap.add_argument("--units", type=int, default=20, help="units per bank")
    ap.add_argument("--queries", type=int, default=100, help="random banks queried per run")
    ap.add_argument("--skip-per-bank", action="store_true", help="only the partition-key run at --banks")
    ap.add_argument("--migrate", action="store_true", help="time migrating the per-bank run to partition_key")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if min(args.banks, args.per_bank_banks, args.units, args.queries) < 1:
        sys.exit("error: --banks, --per-bank-banks, --units and --queries must be positive")
    root = Path(tempfile.mkdtemp(prefix="memlane-many-banks-"))
    plan = (
        []
        if args.skip_per_bank
        else [("per_bank", args.per_bank_banks), ("partition_key", args.per_bank_banks)]
    )
    if args.banks != args.per_bank_banks or args.skip_per_bank:
        plan.append(("partition_key", args.banks))
    results = []
    try:
        for layout, n in plan:
            to = "partition_key" if args.migrate and layout == "per_bank" else None
            r = run(layout, n, args.units, args.queries, root, args.seed, migrate_to=to)
            results.append(r)
            if not args.json:
                print(json.dumps(r), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"runs": results, "notes": NOTES}))
        return
    print()
    head = f"{'layout':<14}{'banks':>8}{'coll.':>7}{'banks/s':>9}{'dense p50/p95':>16}{'bm25 p50/p95':>16}"
    head += f"{'get5 p50/p95':>16}{'count p50/p95':>16}{'recall@10':>10}{'RSS MB':>8}"
    print(head)
    for r in results:
        cells = [f"{r[k]['p50_ms']:.1f}/{r[k]['p95_ms']:.1f}" for k in ("dense", "bm25", "get5", "count")]
        print(
            f"{r['layout']:<14}{r['banks']:>8}{r['collections']:>7}{r['banks_per_s']:>9}"
            + "".join(f"{c:>16}" for c in cells)
            + f"{r['dense_recall_at_10']:>10}{r['server_rss_mb']:>8}"
        )
    print()
    print(NOTES)


if __name__ == "__main__":
    main()
