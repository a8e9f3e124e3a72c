"""BM25 at big-bank sizes: BankIndex's postings beside bm25s on the same corpus and queries.

Corpus: ``n`` documents of 8-16 words drawn from a Zipf vocabulary (50,000 words, s=1.1,
realistic term frequencies: a few words in most documents, most words rare); 200 queries of
2-5 words from the same law. Both rank with k1=1.2, b=0.75 and idf = ln(1 + (N - df + .5) /
(df + .5)) (bm25s "lucene": its tf part lacks the constant (k1 + 1), so rankings are the same);
the report gives query p50/p95 for a top-100, build time, and how often both top-10s agree.

    PYTHONPATH=. python -m benchmarks.bm25_bench --size 1000000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime

import numpy as np

from benchmarks.engine import _pct, rss_bytes, trim_heap
from memlane.recall.index import BankIndex
from memlane.records import MemoryUnit
from memlane.stores.lexical import analyze

VOCAB = 50_000


def _words(rng: np.random.Generator, count: int) -> np.ndarray:
    ranks = rng.zipf(1.1, count)
    return np.minimum(ranks, VOCAB) - 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--skip-bm25s", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(2)
    vocab = [f"w{i}x" for i in range(VOCAB)]
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    trim_heap()
    rss0 = rss_bytes()
    index = BankIndex(1)
    corpus_tokens: list[list[str]] = []
    t = time.perf_counter()
    build_ours = 0.0
    for lo in range(0, a.size, 10_000):
        units = []
        for i in range(lo, min(a.size, lo + 10_000)):
            text = " ".join(vocab[w] for w in _words(rng, int(rng.integers(8, 17))))
            units.append(MemoryUnit(id=f"u{i}", bank_id="b", text=text, embedding=[1.0], mentioned_at=t0))
        if not a.skip_bm25s:
            corpus_tokens.extend(analyze(u.text).split() for u in units)
        s = time.perf_counter()
        index.bulk_load(units)
        build_ours += time.perf_counter() - s
    trim_heap()
    rss1 = rss_bytes()
    print(f"bm25: corpus of {a.size:,} built in {time.perf_counter() - t:.0f}s", file=sys.stderr, flush=True)
    queries = [" ".join(vocab[w] for w in _words(rng, int(rng.integers(2, 6)))) for _ in range(a.queries)]
    ours, ours_top = [], []
    for q in queries[:10] + queries:
        s = time.perf_counter()
        hits = index.search_lexical(q, 100)
        ours.append((time.perf_counter() - s) * 1000)
        ours_top.append([int(h.id[1:]) for h in hits[:10]])
    ours, ours_top = ours[10:], ours_top[10:]
    report: dict = {
        "size": a.size,
        "postings": {
            "build_s": round(build_ours, 1),
            "p50_ms": round(_pct(ours, 0.5), 2),
            "p95_ms": round(_pct(ours, 0.95), 2),
            "index_rss_mb": round((rss1 - rss0) / 2**20, 1),
        },
    }
    if not a.skip_bm25s:
        import bm25s

        s = time.perf_counter()
        model = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        model.index(corpus_tokens, show_progress=False)
        build = time.perf_counter() - s
        del corpus_tokens
        lat, agree = [], 0
        for j, q in enumerate(queries[:10] + queries):
            toks = analyze(q).split()
            s = time.perf_counter()
            scores = model.get_scores(toks)
            k = min(100, int(np.count_nonzero(scores)))
            top = np.argpartition(-scores, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
            top = top[np.lexsort((top, -scores[top]))]
            lat.append((time.perf_counter() - s) * 1000)
            if j >= 10:
                agree += [int(x) for x in top[:10]] == ours_top[j - 10]
        lat = lat[10:]
        report["bm25s"] = {
            "build_s": round(build, 1),
            "p50_ms": round(_pct(lat, 0.5), 2),
            "p95_ms": round(_pct(lat, 0.95), 2),
            "same_top10_share": round(agree / len(queries), 3),
            "note": "static index: no add or delete; every write needs a rebuild",
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
