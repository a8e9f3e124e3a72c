"""Backfill throughput beside its baselines, in one run:

1. raw embedding: the model through its fastest path (``build_embedder`` with
   ``--embedder-backend``, default ``auto``: ONNX Runtime where it works, see
   benchmarks/embed_bench.py) over the corpus' memory texts in one call (sentences/s; all
   cores; the best of batch sizes 16, 32 and 64);
2. plain loop: one process, ``Memory.retain`` bank after bank on an in-process Milvus Lite
   (turns/s, reading the corpus included, model loading excluded);
3. the Ray Data backfill (``pipelines.backfill``) on a local Ray + Milvus Lite server, for each
   ``--workers`` value (turns/s over the job's wall time: read, actor start and model loading
   included; Ray and server start excluded and reported apart). The workers embed through the
   same backend setting as the raw baseline, so the ratio compares like with like.

Peak memory is the largest sum of RSS over this process and all its descendants (Ray's GCS,
raylet, workers and the Milvus Lite server), sampled every 0.5 s from /proc.

    python benchmarks/backfill_bench.py ../shared/data/locomo10.json --check-ids
    python scripts/gen_corpus.py /tmp/syn100k.jsonl --turns 100000 --banks 1000
    python benchmarks/backfill_bench.py /tmp/syn100k.jsonl --skip-plain --embed-sample 5000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EMBED_BATCHES = (16, 32, 64)
sys.path.insert(0, str(ROOT))


class RssSampler:
    """Peak of (this process + descendants) RSS, sampled in a thread from /proc (Linux; psutil
    is not installed here)."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.peak_mb = 0.0
        self.peak_top: list[tuple[str, int]] = []  # the largest processes at the peak, MB
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _sample(detail: list | None = None) -> float:
        from cluster.local import descendants

        tree = descendants(os.getpid()) | {os.getpid()}
        total_kb = 0
        for pid in tree:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            kb = int(line.split()[1])
                            total_kb += kb
                            if detail is not None:
                                with open(f"/proc/{pid}/cmdline", "rb") as c:
                                    name = c.read().replace(b"\0", b" ").decode(errors="replace")
                                detail.append((name[:60], kb // 1024))
                            break
            except OSError:
                continue
        return total_kb / 1024

    def _run(self) -> None:
        while not self._stop.is_set():
            detail: list = []
            mb = self._sample(detail)
            if mb > self.peak_mb:
                self.peak_mb = mb
                self.peak_top = sorted(detail, key=lambda x: -x[1])[:8]
            self._stop.wait(self.every_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _read(path: Path, fmt: str):
    from pipelines.corpus import read_corpus

    rejects: list = []
    corpus = read_corpus(path, fmt, reject=rejects.append)
    return list(corpus.bank_inputs()), len(rejects)


def bench_embed(banks, sample: int | None, settings: dict) -> dict:
    """The model's best raw rate: one sorted call over all texts, all cores, at each batch size
    in EMBED_BATCHES; the fastest is the baseline (the others are reported beside it)."""
    from memlane.models.embedder import build_embedder
    from memlane.retain.chunking import format_turn
    from memlane.settings import Settings

    texts = [format_turn(t) for b in banks for _, turns in b.documents for t in turns]
    if sample and sample < len(texts):
        step = len(texts) / sample
        texts = [texts[int(i * step)] for i in range(sample)]
    emb = build_embedder(Settings(**settings))
    emb.embed(texts[:64])  # warm-up
    rates = {}
    for size in EMBED_BATCHES:
        emb.batch_size = size
        t0 = time.perf_counter()
        emb.embed(texts)
        rates[size] = len(texts) / (time.perf_counter() - t0)
    best = max(rates, key=rates.get)
    return {
        "backend": type(emb).__name__,
        "sentences": len(texts),
        "batch_size": best,
        "seconds": round(len(texts) / rates[best], 2),
        "sentences_per_s": round(rates[best], 1),
        "by_batch_size": {str(k): round(v, 1) for k, v in rates.items()},
    }


def bench_plain(path: Path, fmt: str, data_dir: Path, settings: dict) -> dict:
    from memlane.engine import Memory
    from memlane.settings import Settings

    with RssSampler() as rss:
        memory = Memory(Settings(**settings, data_dir=data_dir))
        _ = memory.embedder, memory.extractor, memory.store  # model loading excluded
        memory.embedder.embed(["warm up"])
        t0 = time.perf_counter()
        banks, _ = _read(path, fmt)
        turns = units = 0
        for bank in banks:
            report = memory.retain(bank.bank_id, bank.documents)
            memory.derived.evict(bank.bank_id)  # as the backfill workers do
            turns += report.turns
            units += report.units
        dt = time.perf_counter() - t0
        memory.close()
    return {
        "banks": len(banks),
        "turns": turns,
        "memories": units,
        "seconds": round(dt, 2),
        "turns_per_s": round(turns / dt, 1),
        "peak_rss_mb": round(rss.peak_mb),
    }


def bench_backfill(path: Path, fmt: str, data_dir: Path, workers: int | None, settings: dict) -> dict:
    from cluster.local import local_cluster
    from pipelines.backfill import BackfillConfig, run_backfill

    with RssSampler() as rss:
        t0 = time.perf_counter()
        with local_cluster(data_dir) as uri:
            started = time.perf_counter() - t0
            cfg = BackfillConfig(
                path=path,
                milvus_uri=uri,
                data_dir=data_dir,
                fmt=fmt,
                workers=workers,
                progress=sys.stderr.isatty(),
                resume=False,
                settings=settings,
            )
            done = {"banks": 0, "turns": 0, "t0": time.perf_counter()}

            def progress(rec: dict) -> None:  # partial figures, should a long run be cut
                done["banks"] += 1
                done["turns"] += rec["turns"]
                if done["banks"] % 50 == 0:
                    dt = time.perf_counter() - done["t0"]
                    print(
                        f"  progress: {done['banks']} banks, {done['turns']} turns in {dt:.0f}s "
                        f"({done['turns'] / dt:.1f} turns/s), RSS now "
                        f"{RssSampler._sample():.0f} MB, peak {rss.peak_mb:.0f} MB",
                        file=sys.stderr,
                        flush=True,
                    )

            summary = run_backfill(cfg, on_result=progress)
        total = time.perf_counter() - t0
    out = summary.as_dict()
    return {
        "workers": summary.workers,
        "banks": out["banks"],
        "turns": out["turns"],
        "memories": out["memories"],
        "entities": out["entities"],
        "links": out["links"],
        "rejects": out["rejects"],
        "seconds": out["wall_s"],
        "read_s": out["read_s"],
        "turns_per_s": out["turns_per_s"],
        "cluster_start_s": round(started, 1),
        "total_s": round(total, 1),
        "peak_rss_mb": round(rss.peak_mb),
        "peak_rss_top": rss.peak_top,
    }


def unit_ids(data_dir: Path, bank_ids) -> dict[str, list[str]]:
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    store = MilvusStore(Settings(data_dir=data_dir), dim=384)
    try:
        return {b: sorted(u.id for batch in store.iter_units(b) for u in batch) for b in bank_ids}
    finally:
        store.close()


def main() -> None:
    default = ROOT.parent / "shared" / "data" / "locomo10.json"
    ap = argparse.ArgumentParser(description="Backfill throughput vs plain loop vs raw embedding.")
    ap.add_argument("path", type=Path, nargs="?", default=default)
    ap.add_argument("--format", default="auto")
    ap.add_argument("--workers", type=int, action="append", help="pool sizes to run (repeatable)")
    ap.add_argument("--skip-plain", action="store_true")
    ap.add_argument("--skip-embed", action="store_true")
    ap.add_argument("--embed-sample", type=int, default=None, help="embed only N texts")
    ap.add_argument(
        "--check-ids", action="store_true", help="compare the memory ids of the backfill and the plain loop"
    )
    ap.add_argument(
        "--embedder-backend",
        choices=("auto", "onnx", "torch"),
        default="auto",
        help="MEMLANE_MODELS__EMBEDDER_BACKEND for the raw baseline, the backfill and the loop",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = {"models": {"embedder_backend": args.embedder_backend}}
    os.environ.setdefault("TQDM_DISABLE", "1")

    report: dict = {
        "corpus": str(args.path),
        "cpus": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }
    banks, rejects = _read(args.path, args.format)
    report["banks"], report["turns"] = len(banks), sum(b.n_turns for b in banks)
    report["rejects"] = rejects
    with tempfile.TemporaryDirectory(prefix="memlane-bfbench-") as tmp:
        tmp = Path(tmp)
        if not args.skip_embed:
            report["embed"] = bench_embed(banks, args.embed_sample, settings)
            print(f"raw embedding: {report['embed']}", file=sys.stderr)
        del banks
        runs = []
        for i, w in enumerate(args.workers or [None]):
            r = bench_backfill(args.path, args.format, tmp / f"backfill-{i}", w, settings)
            runs.append(r)
            print(f"backfill: {r}", file=sys.stderr)
        report["backfill"] = runs
        if not args.skip_plain:
            report["plain"] = bench_plain(args.path, args.format, tmp / "plain", settings)
            print(f"plain loop: {report['plain']}", file=sys.stderr)
        if args.check_ids and not args.skip_plain:
            bank_ids = [b.bank_id for b in _read(args.path, args.format)[0]]
            a, b = unit_ids(tmp / "backfill-0", bank_ids), unit_ids(tmp / "plain", bank_ids)
            report["same_memory_ids"] = a == b
            report["memory_ids_compared"] = sum(len(v) for v in a.values())
    report["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    best = max(report["backfill"], key=lambda r: r["turns_per_s"])
    if "plain" in report:
        report["backfill_vs_plain"] = round(best["turns_per_s"] / report["plain"]["turns_per_s"], 3)
    if "embed" in report:
        report["backfill_vs_embed"] = round(best["turns_per_s"] / report["embed"]["sentences_per_s"], 3)
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"corpus {report['corpus']}: {report['banks']} banks, {report['turns']} turns, "
        f"{report['rejects']} rejects ({report['cpus']} CPUs, load {report['loadavg_start']})"
    )
    if "embed" in report:
        e = report["embed"]
        print(
            f"  raw embedding      {e['sentences_per_s']:8.1f} sentences/s ({e['sentences']} in {e['seconds']}s, "
            f"{e['backend']}, batch {e['batch_size']}; by batch size {e['by_batch_size']})"
        )
    if "plain" in report:
        p = report["plain"]
        print(
            f"  plain loop         {p['turns_per_s']:8.1f} turns/s ({p['turns']} in {p['seconds']}s, "
            f"peak RSS {p['peak_rss_mb']} MB)"
        )
    for r in report["backfill"]:
        print(
            f"  backfill x{r['workers']:<2}       {r['turns_per_s']:8.1f} turns/s ({r['turns']} in "
            f"{r['seconds']}s; +{r['cluster_start_s']}s cluster start; peak RSS {r['peak_rss_mb']} MB)"
        )
    for key in ("backfill_vs_plain", "backfill_vs_embed", "same_memory_ids"):
        if key in report:
            print(f"  {key}: {report[key]}")


if __name__ == "__main__":
    main()
