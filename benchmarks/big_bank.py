"""One big bank on a real Milvus server: where dense search runs at 1M memories (issue 27).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/big_bank.py --sizes 10000,1000000 [--out F.json]``

It starts its own local Milvus server (cluster/milvus_server.py: Milvus 2.3.5, loopback only)
and stops it after. Per size, one bank written through memlane's store on the server
(``upsert_units`` in batches of 5,000, the shared layout), memories from
``benchmarks.engine.synthetic_batches`` with vectors composed from real phrase embeddings (the
engine benchmark's index mode: neighbourhoods like real embeddings', which random vectors lack)
and queries embedded for real. Then, on the same bank and queries, a top-10 dense search:

- ``server FLAT``: the store's own search (its units collection has an exact FLAT index);
- ``in-process exact``: the derived state's BankIndex (numpy), after loading the bank from the
  server the way a recall does (the load time and the RSS it adds are figures);
- ``in-process HNSW``: the same index's hnswlib graph (build time, RSS it adds);
- ``server HNSW``: the same collection re-indexed with HNSW (M=16, efConstruction=128, as the
  in-process graph), searched with the store's bank filter;

each with p50/p95 over the queries and recall@10 against numpy's exact top 10 over the bank's
vectors; and the whole recall (``Memory.recall``, every channel) p50/p95 with the in-process
index exact and with its graph.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.engine import bench_queries, phrase_vectors, rss_bytes, synthetic_batches, trim_heap
from benchmarks.many_banks_layout import pct, rss_kb
from cluster import milvus_server
from cluster.local import free_port
from cluster.processes import exit_on_sigterm
from memlane.engine import Memory
from memlane.settings import Settings

HNSW_PARAMS = {"M": 16, "efConstruction": 128}  # as memlane/recall/ann.py builds its graph
EXACT_ONLY = 1 << 62


def _recall(got: list[str], want: list[str]) -> float:
    return len(set(got) & set(want)) / max(1, len(want))


def _timed(queries: np.ndarray, search, truth: list[list[str]]) -> dict:
    """p50/p95 ms and mean recall@10 of ``search(q) -> ids`` over ``queries`` (3 warm-ups)."""
    for q in queries[:3]:
        search(q)
    lat, rec = [], []
    for q, want in zip(queries, truth):
        t = time.perf_counter()
        ids = search(q)
        lat.append(time.perf_counter() - t)
        rec.append(_recall(ids, want))
    return {**pct(lat), "recall_at_10": round(float(np.mean(rec)), 4)}


def _server_hnsw(memory: Memory, bank: str, queries: np.ndarray, truth, efs: list[int]) -> dict:
    """Re-index the bank's units collection with HNSW on the server; build time and searches."""
    store = memory.store
    client = store.client
    name = store.layout.names(bank)["units"]
    client.flush(name)
    client.release_collection(name)
    for idx in client.list_indexes(name):
        if client.describe_index(name, idx).get("field_name") == "embedding":
            client.drop_index(name, idx)
    params = client.prepare_index_params()
    params.add_index("embedding", index_type="HNSW", metric_type="COSINE", params=HNSW_PARAMS)
    t = time.perf_counter()
    client.create_index(name, params)
    while True:  # the server builds per sealed segment, in the background
        info = client.describe_index(name, "embedding")
        if int(info.get("pending_index_rows", 0)) == 0 and info.get("state") in ("Finished", None):
            break
        time.sleep(2)
    client.load_collection(name)
    build_s = time.perf_counter() - t
    scope = store.layout.scope(bank, "")
    out: dict = {"build_s": round(build_s, 1), "describe_index": {k: str(v) for k, v in info.items()}}
    for ef in efs:

        def search(q, ef=ef):
            res = client.search(
                name,
                data=[q.tolist()],
                anns_field="embedding",
                limit=10,
                filter=scope,
                output_fields=["id"],
                search_params={"metric_type": "COSINE", "params": {"ef": ef}},
            )
            return [store.layout.item_id(h["entity"]["id"]) for h in res[0]]

        out[f"ef{ef}"] = _timed(queries, search, truth)
    return out


def one_size(memory: Memory, server, size: int, qtexts, qvecs, phrases, recalls: int, efs) -> dict:
    bank = f"big{size}"
    dim = memory.embedder.dim
    memory.create_bank(bank)
    vecs = np.empty((size, dim), dtype=np.float32)
    ids: list[str] = []
    t0 = time.perf_counter()
    for units in synthetic_batches(bank, size, dim, 5000, phrases=phrases):
        memory.store.upsert_units(bank, units)
        vecs[len(ids) : len(ids) + len(units)] = [u.embedding for u in units]
        ids.extend(u.id for u in units)
        if len(ids) % 100_000 == 0 or len(ids) == size:
            print(
                f"  {bank}: {len(ids):,}/{size:,} written ({len(ids) / (time.perf_counter() - t0):.0f}/s)",
                flush=True,
            )
    write_s = time.perf_counter() - t0
    truth = [[ids[j] for j in np.argsort(-(vecs @ q))[:10]] for q in qvecs]
    row: dict = {"memories": size, "write_s": round(write_s, 1), "rows_per_s": round(size / write_s, 1)}
    row["server_flat"] = _timed(
        qvecs, lambda q: [h.id for h in memory.store.search_dense(bank, q[None, :], 10)[0]], truth
    )
    row["server_rss_mb_flat"] = round(rss_kb(server.milvus_pid) / 1024, 1)
    print(f"  {bank}: server FLAT {row['server_flat']}", flush=True)
    del vecs
    trim_heap()
    rss0 = rss_bytes()
    t = time.perf_counter()
    index = memory.derived.ensure(bank)
    row["derived_load_s"] = round(time.perf_counter() - t, 1)
    trim_heap()
    rss1 = rss_bytes()
    row["derived_rss_mb"] = round((rss1 - rss0) / 2**20, 1)
    row["in_process_exact"] = _timed(qvecs, lambda q: [h.id for h in index.search_dense(q, 10)], truth)
    print(
        f"  {bank}: loaded in {row['derived_load_s']} s, +{row['derived_rss_mb']} MB; exact {row['in_process_exact']}",
        flush=True,
    )
    t = time.perf_counter()
    index.build_ann()
    row["hnswlib_build_s"] = round(time.perf_counter() - t, 1)
    trim_heap()
    row["hnswlib_rss_mb"] = round((rss_bytes() - rss1) / 2**20, 1)
    index.ann_threshold = 1
    row["in_process_hnsw"] = _timed(qvecs, lambda q: [h.id for h in index.search_dense(q, 10)], truth)
    print(f"  {bank}: hnswlib built in {row['hnswlib_build_s']} s; {row['in_process_hnsw']}", flush=True)
    for mode, threshold in (("exact", EXACT_ONLY), ("hnsw", 1)):
        index.ann_threshold = threshold
        lat = []
        for k, text in enumerate([*qtexts[:3], *qtexts[:recalls]]):
            t = time.perf_counter()
            memory.recall(bank, text, max_tokens=1024)
            if k >= 3:
                lat.append(time.perf_counter() - t)
        row[f"recall_{mode}"] = pct(lat)
    print(f"  {bank}: whole recall exact {row['recall_exact']}, hnsw {row['recall_hnsw']}", flush=True)
    row["bench_rss_mb"] = round(rss_bytes() / 2**20, 1)
    memory.derived.drop(bank)
    trim_heap()
    row["server_hnsw"] = _server_hnsw(memory, bank, qvecs, truth, efs)
    row["server_rss_mb_hnsw"] = round(rss_kb(server.milvus_pid) / 1024, 1)
    print(f"  {bank}: server HNSW {row['server_hnsw']}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,1000000", help="Comma-separated bank sizes (memories).")
    ap.add_argument("--queries", type=int, default=100, help="Dense searches per path and size.")
    ap.add_argument("--recalls", type=int, default=30, help="Whole recalls per mode and size.")
    ap.add_argument("--ef", default="64,128", help="Server HNSW search beams.")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    exit_on_sigterm()  # a `kill` still stops the Milvus server below
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    efs = [int(x) for x in args.ef.split(",") if x.strip()]
    root = Path(tempfile.mkdtemp(prefix="memlane-bigbank-"))
    out: dict = {
        "vectors": "composed from real phrase embeddings plus noise (benchmarks/engine.py)",
        "rows": [],
    }
    try:
        server = milvus_server.start(root / "server", port=free_port())
        out["server"] = milvus_server.status(root / "server")["version"]  # type: ignore[index]
        settings = Settings(
            data_dir=root / "client",
            store={"milvus_uri": server.uri, "layout": "partition_key"},
            recall={"ann_threshold": EXACT_ONLY},  # the benchmark switches paths itself
        )
        memory = Memory(settings)
        out["embedder"] = (
            memory.embedder.name if hasattr(memory.embedder, "name") else type(memory.embedder).__name__
        )
        phrases = phrase_vectors(memory.embedder)
        qtexts = bench_queries(args.queries)
        qvecs = np.asarray(memory.embedder.embed_queries(qtexts), dtype=np.float32)
        for size in sizes:
            out["rows"].append(one_size(memory, server, size, qtexts, qvecs, phrases, args.recalls, efs))
            print(json.dumps(out["rows"][-1]), flush=True)
            if args.out:
                args.out.write_text(json.dumps(out, indent=2))
        memory.close()
    finally:
        milvus_server.stop(root / "server")
        shutil.rmtree(root, ignore_errors=True)
    _table(out)


def _table(out: dict) -> None:
    print("\n| memories | path | build / load s | dense top-10 p50 / p95 ms | recall@10 | RSS added MB |")
    print("|---|---|---|---|---|---|")
    for r in out["rows"]:
        n = f"{r['memories']:,}"
        f, e, h = r["server_flat"], r["in_process_exact"], r["in_process_hnsw"]
        print(
            f"| {n} | server FLAT (the store) | write {r['write_s']} | {f['p50_ms']} / {f['p95_ms']} | {f['recall_at_10']} | server {r['server_rss_mb_flat']} |"
        )
        print(
            f"| {n} | in-process exact | load {r['derived_load_s']} | {e['p50_ms']} / {e['p95_ms']} | {e['recall_at_10']} | {r['derived_rss_mb']} |"
        )
        print(
            f"| {n} | in-process hnswlib | {r['hnswlib_build_s']} | {h['p50_ms']} / {h['p95_ms']} | {h['recall_at_10']} | {r['hnswlib_rss_mb']} |"
        )
        for k, v in r["server_hnsw"].items():
            if k.startswith("ef"):
                print(
                    f"| {n} | server HNSW {k} | {r['server_hnsw']['build_s']} | {v['p50_ms']} / {v['p95_ms']} | {v['recall_at_10']} | server {r['server_rss_mb_hnsw']} |"
                )
        print(
            f"| {n} | whole recall, exact / hnswlib | | {r['recall_exact']['p50_ms']} / {r['recall_exact']['p95_ms']} ; {r['recall_hnsw']['p50_ms']} / {r['recall_hnsw']['p95_ms']} | | |"
        )


if __name__ == "__main__":
    main()
