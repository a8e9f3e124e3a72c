"""Milvus Lite layout benchmark: one collection per bank vs shared partition-key collections.

Run: ``.venv/bin/python benchmarks/milvus_layout.py`` (about 2-3 minutes on 2 cores).

What it measures, on Milvus Lite 3.x through pymilvus (the same client path as the store):

* insert throughput (rows/s, batches of 1000, flush included) for a bank with its own
  collection vs ten banks sharing one collection with ``bank_id`` as partition key;
* dense (COSINE, 384-d) and BM25 search p50/p95 for one query on one bank of 10k rows, in
  its own collection (a) and inside the shared 100k-row collection with a ``bank_id`` filter (b);
* a batch of 64 dense queries (retain builds semantic links that way);
* fetching 50 units by id, and counting one bank's rows;
* creating many banks (200 banks x 3 collections: units, chunks, entities): time, RSS and
  threads, extrapolated to 1000 banks; then a cold start in a fresh process on that data dir.

Vectors are random unit vectors; texts are synthetic 8-20-word sentences over a Zipf-like
vocabulary. The schemas mirror memlane.stores.milvus (same field kinds and index types).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from pymilvus import DataType, Function, FunctionType, MilvusClient

DIM = 384
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "pu", "ra", "si", "to", "vu", "ze") for b in range(500)]
WEIGHTS = [1.0 / (i + 1) for i in range(len(WORDS))]


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def n_threads() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return threading.active_count()


def release_lite(path: str) -> None:
    """Stop the in-process Milvus Lite server of ``path`` (flushes and frees the data-dir lock)."""
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(path)


def unit_schema(client: MilvusClient, partition_key: bool):
    s = client.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=512)
    s.add_field("bank_id", DataType.VARCHAR, max_length=128, is_partition_key=partition_key)
    s.add_field("text", DataType.VARCHAR, max_length=65535, enable_analyzer=True)
    s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    s.add_field("embedding", DataType.FLOAT_VECTOR, dim=DIM)
    s.add_field("fact_type", DataType.VARCHAR, max_length=16)
    for name in ("mentioned_at", "occurred_start", "occurred_end", "valid_from", "invalid_at", "proof_count"):
        s.add_field(name, DataType.INT64)
    s.add_field("confidence", DataType.DOUBLE)
    s.add_field("document_id", DataType.VARCHAR, max_length=512)
    s.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=256, max_length=512)
    s.add_field(
        "entity_ids", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=1024, max_length=512
    )
    s.add_field("links", DataType.JSON)
    s.add_function(
        Function(
            name="text_bm25",
            function_type=FunctionType.BM25,
            input_field_names=["text"],
            output_field_names=["sparse"],
        )
    )
    ip = client.prepare_index_params()
    ip.add_index("embedding", index_type="FLAT", metric_type="COSINE")
    ip.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    return s, ip


def aux_schema(client: MilvusClient):
    """Chunks / entities: scalar rows plus the 2-d placeholder vector Milvus requires."""
    s = client.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=512)
    s.add_field("bank_id", DataType.VARCHAR, max_length=128)
    s.add_field("document_id", DataType.VARCHAR, max_length=512)
    s.add_field("text", DataType.VARCHAR, max_length=65535)
    s.add_field("data", DataType.JSON)
    s.add_field("_v", DataType.FLOAT_VECTOR, dim=2)
    ip = client.prepare_index_params()
    ip.add_index("_v", index_type="FLAT", metric_type="L2")
    return s, ip


def create(client: MilvusClient, name: str, schema, ip) -> None:
    # sync=False: pymilvus otherwise polls the index state with a 0.5 s sleep per index
    # (measured: 1.0 s per collection instead of ~7 ms).
    client.create_collection(name, schema=schema, consistency_level="Strong")
    client.create_index(name, ip, sync=False)
    client.load_collection(name)


def sentence(rnd: random.Random) -> str:
    return " ".join(rnd.choices(WORDS, weights=WEIGHTS, k=rnd.randint(8, 20)))


def unit_rows(
    bank: str, start: int, n: int, rng: np.random.Generator, rnd: random.Random, composite_pk: bool
) -> list[dict]:
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = []
    for i in range(n):
        uid = f"u{start + i:07d}"
        rows.append(
            {
                "pk": f"{bank}/{uid}" if composite_pk else uid,
                "bank_id": bank,
                "text": sentence(rnd),
                "embedding": vecs[i],
                "fact_type": "world",
                "mentioned_at": 1_700_000_000 + i,
                "occurred_start": -1,
                "occurred_end": -1,
                "valid_from": -1,
                "invalid_at": -1,
                "proof_count": 1,
                "confidence": -1.0,
                "document_id": f"doc{(start + i) // 50}",
                "tags": ["t1"] if i % 3 else [],
                "entity_ids": [f"e{i % 97}"],
                "links": [{"target_id": "u0000001", "type": "semantic", "weight": 0.8}],
            }
        )
    return rows


OUT_FIELDS = [
    "pk",
    "bank_id",
    "text",
    "fact_type",
    "mentioned_at",
    "occurred_start",
    "occurred_end",
    "valid_from",
    "invalid_at",
    "proof_count",
    "confidence",
    "document_id",
    "tags",
    "entity_ids",
    "links",
]


def pct(samples: list[float]) -> tuple[float, float]:
    arr = np.asarray(samples) * 1000.0
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 95))


def timed(fn, repeat: int) -> list[float]:
    fn()  # warm: the first call builds per-segment indexes
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def load(
    client: MilvusClient, name: str, banks: list[str], rows_per_bank: int, composite_pk: bool, seed: int
) -> float:
    rng = np.random.default_rng(seed)
    rnd = random.Random(seed)
    total = 0
    t0 = time.perf_counter()
    for bank in banks:
        for start in range(0, rows_per_bank, 1000):
            rows = unit_rows(bank, start, min(1000, rows_per_bank - start), rng, rnd, composite_pk)
            client.upsert(name, rows)
            total += len(rows)
    client.flush(name)
    return total / (time.perf_counter() - t0)


def search_suite(
    client: MilvusClient, name: str, flt: str, pk_of, n_rows: int, repeat: int, rng: np.random.Generator
) -> dict[str, tuple[float, float]]:
    q1 = rng.standard_normal((repeat + 1, DIM)).astype(np.float32)
    q64 = rng.standard_normal((64, DIM)).astype(np.float32)
    rnd = random.Random(7)
    qi = iter(range(10**9))
    res: dict[str, tuple[float, float]] = {}
    res["dense 1q top100"] = pct(
        timed(
            lambda: client.search(
                name,
                data=[q1[next(qi) % len(q1)]],
                anns_field="embedding",
                limit=100,
                filter=flt,
                output_fields=OUT_FIELDS,
                search_params={"metric_type": "COSINE"},
            ),
            repeat,
        )
    )
    res["bm25 1q top100"] = pct(
        timed(
            lambda: client.search(
                name,
                data=[" ".join(rnd.choices(WORDS[:2000], k=4))],
                anns_field="sparse",
                limit=100,
                filter=flt,
                output_fields=OUT_FIELDS,
                search_params={"metric_type": "BM25"},
            ),
            repeat,
        )
    )
    res["dense 64q top10"] = pct(
        timed(
            lambda: client.search(
                name,
                data=list(q64),
                anns_field="embedding",
                limit=10,
                filter=flt,
                output_fields=["pk"],
                search_params={"metric_type": "COSINE"},
            ),
            max(3, repeat // 4),
        )
    )

    def get50():
        ids = ", ".join(json.dumps(pk_of(i)) for i in rnd.sample(range(n_rows), 50))
        expr = f"pk in [{ids}]" + (f" and {flt}" if flt else "")
        got = client.query(name, filter=expr, output_fields=OUT_FIELDS)
        assert len(got) == 50, len(got)

    res["get 50 ids"] = pct(timed(get50, repeat))

    def count():
        if flt:
            client.query(name, filter=flt, output_fields=["count(*)"])
        else:
            client.query(name, filter="", output_fields=["count(*)"])

    res["count one bank"] = pct(timed(count, max(3, repeat // 4)))
    return res


def bench_layouts(root: str, rows_per_bank: int, n_banks: int, repeat: int) -> dict:
    out: dict = {}
    # (a) one collection per bank (only the measured bank is built: the others would not be
    # touched by its searches).
    path_a = os.path.join(root, "per_bank.db")
    ca = MilvusClient(uri=path_a)
    s, ip = unit_schema(ca, partition_key=False)
    create(ca, "units_bank3", s, ip)
    out["insert_a"] = load(ca, "units_bank3", ["bank3"], rows_per_bank, False, 3)
    out["a"] = search_suite(
        ca, "units_bank3", "", lambda i: f"u{i:07d}", rows_per_bank, repeat, np.random.default_rng(11)
    )
    ca.close()
    release_lite(path_a)

    # (b) one shared collection, partition key bank_id, n_banks banks.
    path_b = os.path.join(root, "shared.db")
    cb = MilvusClient(uri=path_b)
    s, ip = unit_schema(cb, partition_key=True)
    create(cb, "units", s, ip)
    banks = [f"bank{i}" for i in range(n_banks)]
    out["insert_b"] = load(cb, "units", banks, rows_per_bank, True, 5)
    assert n_banks > 3, "the measured bank is bank3"
    out["b"] = search_suite(
        cb,
        "units",
        'bank_id == "bank3"',
        lambda i: f"bank3/u{i:07d}",
        rows_per_bank,
        repeat,
        np.random.default_rng(11),
    )
    # get by composite pk alone (the Lite fast path: no scalar filter next to "pk in [...]")
    rnd = random.Random(3)

    def get50_pk_only():
        ids = ", ".join(json.dumps(f"bank3/u{i:07d}") for i in rnd.sample(range(rows_per_bank), 50))
        got = cb.query("units", filter=f"pk in [{ids}]", output_fields=OUT_FIELDS)
        assert len(got) == 50

    out["b"]["get 50 ids (pk only)"] = pct(timed(get50_pk_only, repeat))
    cb.close()
    t0 = time.perf_counter()
    release_lite(path_b)
    out["close_b_s"] = time.perf_counter() - t0
    # cold start of the shared collection: open, load, first search.
    out["cold_b"] = cold_shared(path_b)
    return out


COLD_SHARED = r"""
import json, sys, time
import numpy as np
from pymilvus import MilvusClient
t0 = time.perf_counter()
c = MilvusClient(uri=sys.argv[1])
c.load_collection("units")
t1 = time.perf_counter()
q = np.ones((1, 384), dtype=np.float32)
c.search("units", data=[q[0]], anns_field="embedding", limit=10, filter='bank_id == "bank3"',
         output_fields=["pk"])
t2 = time.perf_counter()
rss = [l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]
print(json.dumps({"open_load_s": t1 - t0, "first_search_s": t2 - t1, "rss_mb": int(rss) / 1024}))
"""


def cold_shared(path: str) -> dict:
    r = subprocess.run([sys.executable, "-c", COLD_SHARED, path], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return {"error": r.stderr[-500:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


COLD_MANY = r"""
import json, sys, time
import numpy as np
from pymilvus import MilvusClient
def st(key):
    return int([l for l in open("/proc/self/status") if l.startswith(key)][0].split()[1])
path, n = sys.argv[1], int(sys.argv[2])
rss0, th0 = st("VmRSS"), st("Threads")
t0 = time.perf_counter()
c = MilvusClient(uri=path)
t_open = time.perf_counter() - t0
q = np.ones((1, 384), dtype=np.float32)
t0 = time.perf_counter()
assert c.has_collection("u_b0")
c.load_collection("u_b0")
c.search("u_b0", data=[q[0]], anns_field="embedding", limit=10, output_fields=["pk"])
t_first = time.perf_counter() - t0
t0 = time.perf_counter()
for i in range(n):
    for kind in ("u", "c", "e"):
        c.load_collection(f"{kind}_b{i}")
    c.query(f"u_b{i}", filter="", output_fields=["count(*)"])
t_all = time.perf_counter() - t0
print(json.dumps({"open_s": t_open, "first_bank_s": t_first, "touch_all_s": t_all,
                  "rss_mb": st("VmRSS") / 1024, "threads": st("Threads"),
                  "rss_before_mb": rss0 / 1024, "threads_before": th0}))
"""


def bench_many(root: str, n_banks: int) -> dict:
    """Runs in a fresh child process so that its RSS figures start from a clean baseline."""
    path = os.path.join(root, "many.db")
    r = subprocess.run(
        [sys.executable, __file__, "--many-child", path, "--many", str(n_banks)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        raise RuntimeError(f"many-banks child failed: {r.stderr[-2000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    r = subprocess.run(
        [sys.executable, "-c", COLD_MANY, path, str(n_banks)], capture_output=True, text=True, timeout=300
    )
    res["cold"] = (
        json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"error": r.stderr[-500:]}
    )
    return res


def many_child(path: str, n_banks: int) -> None:
    c = MilvusClient(uri=path)
    us, uip = unit_schema(c, partition_key=False)
    xs, xip = aux_schema(c)
    rng = np.random.default_rng(1)
    rnd = random.Random(1)
    warm = max(1, n_banks // 10)  # the first banks pay one-off costs (imports, analyzers)
    t_create = t_fill = 0.0
    for i in range(n_banks):
        if i == warm:
            rss_w, th_w = rss_mb(), n_threads()
        t0 = time.perf_counter()
        create(c, f"u_b{i}", us, uip)
        create(c, f"c_b{i}", xs, xip)
        create(c, f"e_b{i}", xs, xip)
        t1 = time.perf_counter()
        # a bank exists because something was retained into it
        c.upsert(f"u_b{i}", unit_rows(f"b{i}", 0, 20, rng, rnd, False))
        c.flush(f"u_b{i}")
        t_create += t1 - t0
        t_fill += time.perf_counter() - t1
    per_bank_rss = (rss_mb() - rss_w) / (n_banks - warm)
    per_bank_threads = (n_threads() - th_w) / (n_banks - warm)
    c.close()
    t0 = time.perf_counter()
    release_lite(path)
    t_close = time.perf_counter() - t0
    du = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(path) for f in fs)
    print(
        json.dumps(
            {
                "banks": n_banks,
                "collections": 3 * n_banks,
                "create_s": t_create,
                "fill_s": t_fill,
                "close_s": t_close,
                "rss_per_bank_mb": per_bank_rss,
                "threads_per_bank": per_bank_threads,
                "disk_mb": du / 2**20,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows-per-bank", type=int, default=10_000)
    ap.add_argument("--banks", type=int, default=10, help="banks sharing the collection in (b)")
    ap.add_argument("--many", type=int, default=200, help="banks for the many-collections test")
    ap.add_argument("--repeat", type=int, default=30, help="timed queries per figure")
    ap.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    ap.add_argument("--many-child", metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.many_child:
        many_child(args.many_child, args.many)
        return

    root = tempfile.mkdtemp(prefix="memlane-layout-")
    t_start = time.perf_counter()
    try:
        lay = bench_layouts(root, args.rows_per_bank, args.banks, args.repeat)
        many = bench_many(root, args.many)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    n_a, n_b = args.rows_per_bank, args.rows_per_bank * args.banks
    print(
        f"\nMilvus Lite layout benchmark ({DIM}-d, FLAT/COSINE + BM25; "
        f"{os.cpu_count()} CPUs; {time.perf_counter() - t_start:.0f} s)\n"
    )
    print(f"{'measure (ms, p50 / p95)':<28}{'(a) own collection':>22}{'(b) shared pk':>22}")
    print(f"{'rows scanned':<28}{n_a:>22,}{n_b:>22,}")
    print(f"{'insert rows/s (batch 1000)':<28}{lay['insert_a']:>22,.0f}{lay['insert_b']:>22,.0f}")
    for key in lay["a"]:
        a, b = lay["a"][key], lay["b"][key]
        print(f"{key:<28}{a[0]:>13.1f} / {a[1]:>6.1f}{b[0]:>13.1f} / {b[1]:>6.1f}")
    b = lay["b"]["get 50 ids (pk only)"]
    print(f"{'get 50 ids (bank/pk key)':<28}{'-':>22}{b[0]:>13.1f} / {b[1]:>6.1f}")
    cb = lay["cold_b"]
    if "error" in cb:
        print(f"cold start (b) failed: {cb['error']}")
    else:
        print(
            f"(b) cold start: open+load {cb['open_load_s']:.2f} s, first search "
            f"{cb['first_search_s']:.2f} s, RSS {cb['rss_mb']:.0f} MB "
            f"(close/flush before it {lay['close_b_s']:.2f} s)"
        )
    m = many
    f = 1000 / m["banks"]
    print(f"\nmany banks: {m['banks']} banks x 3 collections = {m['collections']} collections")
    print(
        f"  create: {m['create_s']:.1f} s ({1000 * m['create_s'] / m['collections']:.1f} ms "
        f"each), +20 units each + flush: {m['fill_s']:.1f} s, close {m['close_s']:.1f} s"
    )
    print(
        f"  marginal cost per bank: RSS +{m['rss_per_bank_mb']:.2f} MB, threads "
        f"+{m['threads_per_bank']:.1f}; disk {m['disk_mb']:.0f} MB in all"
    )
    print(
        f"  extrapolated to 1000 banks: create {m['create_s'] * f:.0f} s, "
        f"RSS +{m['rss_per_bank_mb'] * 1000:.0f} MB, threads +{m['threads_per_bank'] * 1000:.0f}"
        f" (only for banks a process has opened)"
    )
    cold = m["cold"]
    if "error" in cold:
        print(f"  cold start failed: {cold['error']}")
    else:
        print(
            f"  cold start: open {cold['open_s']:.2f} s, first bank (load+search) "
            f"{1000 * cold['first_bank_s']:.0f} ms, touch all {m['collections']} collections "
            f"{cold['touch_all_s']:.1f} s -> RSS {cold['rss_mb']:.0f} MB "
            f"(from {cold['rss_before_mb']:.0f}), threads {cold['threads']} "
            f"(from {cold['threads_before']})"
        )


if __name__ == "__main__":
    main()
