"""Many banks on a real Milvus server: write rate, bank-filtered search latency, isolation, the
server's memory; per-bank collections and Milvus Lite beside it in the same run.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/scale.py --banks 1000,10000 [--out F.json]``

It starts its own local Milvus server (cluster/milvus_server.py: Milvus 2.3.5, loopback only)
on a temporary data directory and stops it after. Per size, on a fresh collection prefix in the
shared (``partition_key``) layout, through memlane's store (one ``upsert_units`` call per bank,
as a retain writes them): N banks of 20-200 synthetic units each (random unit vectors of 384
dimensions, sentences of 8-20 made-up words; the vectors are synthetic at every size, so search
quality says nothing about recall of real text), then on ``--queries`` random banks a
bank-filtered dense search (top 10) with recall@10 against numpy's exact top 10 over the bank's
own vectors, and ``--isolation`` more random bank-filtered searches that count hits of another
bank. Milvus 2.3 reports no rows read per query (its search results carry no such statistic),
so the table has none. Beside it: per-bank collections on the same server for ``--per-bank``
banks (the time each bank's collections take to create and load, and the extrapolation to the
server's collection cap), and Milvus Lite (the embedded default) in the shared layout at the
smallest size.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.many_banks_layout import DIM, bank_units, pct, rss_kb
from cluster import milvus_server
from cluster.processes import exit_on_sigterm
from memlane.records import Bank
from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore
from memlane.stores.milvus.codec import bank_row, unit_row

MIN_UNITS, MAX_UNITS = 20, 200  # memories per bank (--max-units lowers the upper bound)
# Milvus's default cap on collections per instance (docs/milvus-layout.md); per_bank spends 3
# per bank (units, chunks, entities; a 4th once consolidated).
COLLECTION_CAP = 65_536


def _sizes(seed: int, n: int, most: int = MAX_UNITS) -> list[int]:
    rnd = random.Random(seed)
    return [rnd.randint(MIN_UNITS, most) for _ in range(n)]


def _bulk_write(store: MilvusStore, pending: list[tuple[str, list]]) -> None:
    """Rows of many banks in one upsert per collection (the store's own row codec, layout keys
    and capability adaptations; its bank records too), not one ``upsert_units`` per bank."""
    names = store.layout.names(pending[0][0])
    store._ensure(names["units"], "units")
    rows = []
    for bank, units in pending:
        rows += store.layout.stored_rows(
            bank, [unit_row(bank, u, u.embedding, store.dim, store.capabilities) for u in units]
        )
    store._upsert_rows(names["units"], rows)
    store._upsert_rows(store._banks, [bank_row(Bank(bank_id=b, name=b)) for b, _ in pending])


def write_and_search(
    store: MilvusStore,
    n_banks: int,
    queries: int,
    isolation: int,
    seed: int,
    label: str,
    bulk: int = 0,
    most: int = MAX_UNITS,
) -> dict:
    """Write ``n_banks`` banks through ``store`` (``bulk``: that many banks per write call, else
    one ``upsert_units`` per bank), then search them; the figures of one row."""
    sizes = _sizes(seed, n_banks, most)
    rnd = random.Random(seed + 1)
    probe = set(rnd.sample(range(n_banks), min(queries, n_banks)))
    kept: dict[int, tuple[list, np.ndarray]] = {}
    t0 = time.perf_counter()
    step = max(1, n_banks // 20)
    pending: list[tuple[str, list]] = []
    for b in range(n_banks):
        bank = f"bank{b:06d}"
        units, vecs = bank_units(bank, sizes[b], seed * 1_000_003 + b)
        if bulk:
            pending.append((bank, units))
            if len(pending) >= bulk or b == n_banks - 1:
                _bulk_write(store, pending)
                pending = []
        else:
            store.upsert_units(bank, units)
        if b in probe:
            kept[b] = (units, vecs)
        if (b + 1) % step == 0:
            rate = (b + 1) / (time.perf_counter() - t0)
            print(f"  {label}: {b + 1}/{n_banks} banks written ({rate:.1f} banks/s)", flush=True)
    write_s = time.perf_counter() - t0
    rows = sum(sizes)
    qrng = np.random.default_rng(seed + 2)
    dense, recall, foreign = [], [], 0
    for b in sorted(probe):
        bank = f"bank{b:06d}"
        units, vecs = kept[b]
        i = int(qrng.integers(len(units)))
        q = vecs[i] + 0.3 * qrng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
        t = time.perf_counter()
        hits = store.search_dense(bank, q[None, :], 10, fields=["bank_id"])[0]
        dense.append(time.perf_counter() - t)
        exact = {units[j].id for j in np.argsort(-(vecs @ (q / np.linalg.norm(q))))[:10]}
        recall.append(len(exact & {h.id for h in hits}) / len(exact))
        foreign += sum(1 for h in hits if h.fields["bank_id"] != bank)
    iso_lat, iso_foreign, iso_hits = [], 0, 0
    for _ in range(isolation):
        bank = f"bank{int(qrng.integers(n_banks)):06d}"
        q = qrng.standard_normal(DIM).astype(np.float32)
        t = time.perf_counter()
        hits = store.search_dense(bank, q[None, :], 10, fields=["bank_id"])[0]
        iso_lat.append(time.perf_counter() - t)
        iso_hits += len(hits)
        iso_foreign += sum(1 for h in hits if h.fields["bank_id"] != bank)
    return {
        "banks": n_banks,
        "write_path": f"bulk, {bulk} banks per upsert" if bulk else "upsert_units per bank",
        "rows": rows,
        "write_s": round(write_s, 1),
        "banks_per_s": round(n_banks / write_s, 1),
        "rows_per_s": round(rows / write_s, 1),
        "queries": len(probe),
        "dense": pct(dense),
        "dense_recall_at_10": round(float(np.mean(recall)), 4) if recall else None,
        "foreign_hits": foreign,
        "isolation_queries": isolation,
        "isolation_hits": iso_hits,
        "isolation_foreign_rows": iso_foreign,
        "isolation_dense": pct(iso_lat) if iso_lat else None,
    }


def per_bank_run(uri: str, n_banks: int, seed: int) -> dict:
    """Per-bank collections on the server: seconds per bank created and loaded."""
    settings = Settings(
        data_dir=tempfile.mkdtemp(),
        store={"milvus_uri": uri, "layout": "per_bank", "collection_prefix": "pb"},
    )
    with MilvusStore(settings, dim=DIM) as store:
        t0 = time.perf_counter()
        for b in range(n_banks):
            units, _ = bank_units(f"bank{b:06d}", MIN_UNITS, seed + b)
            store.upsert_units(f"bank{b:06d}", units)
        took = time.perf_counter() - t0
        collections = len([n for n in store.client.list_collections() if n.startswith("pb_")])
    per_bank_s = took / n_banks
    return {
        "banks": n_banks,
        "collections": collections,
        "s_per_bank": round(per_bank_s, 2),
        "banks_at_the_collection_cap": (COLLECTION_CAP - 3) // 3,
        "hours_to_create_that_many": round((COLLECTION_CAP - 3) // 3 * per_bank_s / 3600, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--banks", default="1000,10000", help="Comma-separated bank counts.")
    ap.add_argument("--queries", type=int, default=200, help="Searches with recall@10 per size.")
    ap.add_argument("--isolation", type=int, default=10_000, help="Random bank-filtered searches per size.")
    ap.add_argument(
        "--isolation-below-largest",
        type=int,
        default=None,
        help="Isolation searches for the sizes below the largest (default: --isolation).",
    )
    ap.add_argument("--per-bank", type=int, default=20, help="Banks in per-bank collections (0: skip).")
    ap.add_argument("--lite", action="store_true", help="Also Milvus Lite at the smallest size.")
    ap.add_argument("--bulk", type=int, default=0, help="Banks per write call (0: upsert_units per bank).")
    ap.add_argument("--max-units", type=int, default=MAX_UNITS, help="Most memories per bank (at least 20).")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    exit_on_sigterm()  # a `kill` still stops the Milvus server it starts
    sizes = [int(x) for x in args.banks.split(",") if x.strip()]
    root = Path(tempfile.mkdtemp(prefix="memlane-scale-"))
    out: dict = {"vectors": "synthetic random unit vectors (384-d) at every size", "server": {}, "rows": []}
    try:
        server = milvus_server.start(root / "server", port=_free_port())
        out["server"] = {"version": milvus_server.status(root / "server")["version"]}  # type: ignore[index]
        print(f"Milvus server {out['server']['version']} at {server.uri}", flush=True)
        for n in sizes:
            prefix = f"s{n}"
            settings = Settings(
                data_dir=root / "client",
                store={"milvus_uri": server.uri, "layout": "partition_key", "collection_prefix": prefix},
            )
            with MilvusStore(settings, dim=DIM) as store:
                row = write_and_search(
                    store,
                    n,
                    args.queries,
                    args.isolation
                    if n == max(sizes) or args.isolation_below_largest is None
                    else args.isolation_below_largest,
                    args.seed,
                    f"server {n}",
                    args.bulk,
                    args.max_units,
                )
            row.update(
                backend="server",
                layout="partition_key",
                server_rss_mb=round(rss_kb(server.milvus_pid) / 1024, 1),
            )
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
        if args.per_bank:
            out["per_bank"] = per_bank_run(server.uri, args.per_bank, args.seed)
            print(json.dumps(out["per_bank"]), flush=True)
    finally:
        milvus_server.stop(root / "server")
    if args.lite:
        n = min(sizes)
        settings = Settings(data_dir=root / "lite", store={"layout": "partition_key"})
        with MilvusStore(settings, dim=DIM) as store:
            row = write_and_search(
                store,
                n,
                args.queries,
                min(args.isolation, 1000),
                args.seed,
                f"lite {n}",
                args.bulk,
                args.max_units,
            )
        row.update(backend="lite", layout="partition_key")
        out["rows"].append(row)
        print(json.dumps(row), flush=True)
    shutil.rmtree(root, ignore_errors=True)
    _table(out)
    if args.out:
        args.out.write_text(json.dumps(out, indent=2))


def _free_port() -> int:
    from cluster.local import free_port

    return free_port()


def _table(out: dict) -> None:
    print(
        "\n| backend | banks | rows | banks/s | rows/s | dense p50 / p95 ms | recall@10 | isolation: queries, foreign rows | server RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in out["rows"]:
        iso = r["isolation_dense"] or {}
        print(
            f"| {r['backend']} | {r['banks']:,} | {r['rows']:,} | {r['banks_per_s']} | {r['rows_per_s']} | "
            f"{r['dense']['p50_ms']} / {r['dense']['p95_ms']} (isolation run {iso.get('p50_ms')} / {iso.get('p95_ms')}) | "
            f"{r['dense_recall_at_10']} | {r['isolation_queries']:,}, {r['isolation_foreign_rows']} | {r.get('server_rss_mb', '-')} |"
        )
    if "per_bank" in out:
        p = out["per_bank"]
        print(
            f"\nper-bank collections on the server: {p['banks']} banks, {p['collections']} collections, "
            f"{p['s_per_bank']} s per bank; the default cap of {COLLECTION_CAP:,} collections is "
            f"{p['banks_at_the_collection_cap']:,} banks, {p['hours_to_create_that_many']} h of creation at this rate"
        )


if __name__ == "__main__":
    main()
