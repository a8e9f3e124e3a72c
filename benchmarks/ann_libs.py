"""Compare HNSW libraries for the in-process index's dense search (issue 14, big banks).

For each library (usearch, hnswlib, faiss-cpu HNSW; whichever import) at one size: build
time over 90% of the vectors, incremental add of the last 10% in batches of 100 (how retain
writes), query p50/p95 for a top-100 (one query at a time, one thread, as recall does),
recall@100 against the exact matrix product, and the RSS the index added. Vectors: the engine
benchmark's index mode (composed from real phrase embeddings, queries embedded for real), or
random unit vectors (no neighbourhoods: the hardest case for a graph index).

    PYTHONPATH=. python -m benchmarks.ann_libs --size 100000 [--libs usearch,hnswlib,faiss]
        [--vectors composed|random]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

import numpy as np

from benchmarks.engine import _pct, rss_bytes, trim_heap

M, EF_ADD = 16, 128


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _usearch(dim: int, cap: int, threads: int):
    from usearch.index import Index

    idx = Index(ndim=dim, metric="ip", dtype="f32", connectivity=M, expansion_add=EF_ADD)

    def add(keys, vecs, th=threads):
        idx.add(keys, vecs, threads=th)

    def search(q, k, ef):
        idx.expansion_search = ef
        return np.asarray(idx.search(q, k, threads=1).keys)

    return add, search


def _hnswlib(dim: int, cap: int, threads: int):
    import hnswlib

    idx = hnswlib.Index(space="ip", dim=dim)
    idx.init_index(max_elements=cap, ef_construction=EF_ADD, M=M)

    def add(keys, vecs, th=threads):
        idx.add_items(vecs, keys, num_threads=th)

    def search(q, k, ef):
        idx.set_ef(ef)
        return idx.knn_query(q, k=k, num_threads=1)[0][0]

    return add, search


def _faiss(dim: int, cap: int, threads: int):
    import faiss

    idx = faiss.IndexHNSWFlat(dim, M, faiss.METRIC_INNER_PRODUCT)
    idx.hnsw.efConstruction = EF_ADD

    def add(keys, vecs, th=threads):
        faiss.omp_set_num_threads(th)
        idx.add(vecs)  # labels are insertion order (keys are 0..n-1 in order here)

    def search(q, k, ef):
        faiss.omp_set_num_threads(1)
        idx.hnsw.efSearch = ef
        return idx.search(q.reshape(1, -1), k)[1][0]

    return add, search


LIBS: dict[str, Callable] = {"usearch": _usearch, "hnswlib": _hnswlib, "faiss": _faiss}


def bench_lib(
    name: str, data: np.ndarray, queries: np.ndarray, truth: list[set], threads: int
) -> dict[str, Any]:
    n, dim = data.shape
    base = int(n * 0.9)
    trim_heap()
    rss0 = rss_bytes()
    add, search = LIBS[name](dim, n, threads)
    t = time.perf_counter()
    add(np.arange(base, dtype=np.uint64), data[:base])
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    for lo in range(base, n, 100):
        add(np.arange(lo, min(n, lo + 100), dtype=np.uint64), data[lo : min(n, lo + 100)], 1)
    add_ms_per_100 = (time.perf_counter() - t) * 1000 / max(1, (n - base) // 100)
    trim_heap()
    rss1 = rss_bytes()
    out: dict[str, Any] = {
        "build_s": round(build_s, 1),
        "build_threads": threads,
        "add_100_ms": round(add_ms_per_100, 1),
        "index_rss_mb": round((rss1 - rss0) / 2**20, 1),
    }
    for ef in (128, 256, 512):
        lat, rec = [], []
        for q, exact in zip(queries, truth):
            t = time.perf_counter()
            got = search(q, 100, ef)
            lat.append((time.perf_counter() - t) * 1000)
            rec.append(len(exact & set(int(g) for g in got)) / 100)
        out[f"ef{ef}"] = {
            "p50_ms": round(_pct(lat, 0.5), 2),
            "p95_ms": round(_pct(lat, 0.95), 2),
            "recall@100": round(float(np.mean(rec)), 4),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--libs", default="usearch,hnswlib,faiss")
    ap.add_argument("--vectors", choices=("random", "composed"), default="composed")
    a = ap.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # as memlane.runtime.configure_process sets it for recall
    rng = np.random.default_rng(5)
    if a.vectors == "random":
        data = _unit(rng, a.size, a.dim)
        queries = _unit(rng, a.queries, a.dim)
    else:  # the engine benchmark's index mode: composed from real phrase embeddings
        from benchmarks.engine import bench_queries, phrase_vectors, synthetic_batches
        from memlane.models.embedder import build_embedder
        from memlane.settings import Settings

        embedder = build_embedder(Settings())
        phrases = phrase_vectors(embedder)
        data = np.empty((a.size, embedder.dim), dtype=np.float32)
        for units in synthetic_batches("b", a.size, embedder.dim, phrases=phrases):
            lo = int(units[0].id[1:])
            data[lo : lo + len(units)] = [u.embedding for u in units]
        queries = np.asarray(embedder.embed_queries(bench_queries(a.queries)), dtype=np.float32)
    lat = []
    truth = []
    for q in queries:  # the exact baseline: what BankIndex does today
        t = time.perf_counter()
        s = data @ q
        top = np.argpartition(-s, 99)[:100]
        lat.append((time.perf_counter() - t) * 1000)
        truth.append(set(int(i) for i in top))
    report: dict[str, Any] = {
        "size": a.size,
        "vectors": a.vectors,
        "exact": {"p50_ms": round(_pct(lat, 0.5), 2), "p95_ms": round(_pct(lat, 0.95), 2)},
    }
    for name in a.libs.split(","):
        print(f"ann_libs: {name} at {a.size:,}", file=sys.stderr, flush=True)
        report[name] = bench_lib(name, data, queries, truth, a.threads)
        print(json.dumps({name: report[name]}), file=sys.stderr, flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
