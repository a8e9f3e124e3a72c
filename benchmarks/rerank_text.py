"""What the cross-encoder reads of a long turn, judged by the cross-encoder alone and without
banks: for each LongMemEval question with evidence turns, its evidence turns and the haystack's
BM25 best turns (a stand-in for recall's pool) are scored under each text config, and the
evidence's places among them are compared.

    PYTHONPATH=. .venv/bin/python benchmarks/rerank_text.py ../shared/data/longmemeval_s_dev60.json \\
        --config head1000:1000 --config head500:500 [--pool 20]

A config is ``name:chars``: what :func:`memlane.recall.rerank.candidate_text` gives the
cross-encoder at ``recall.rerank_text_chars`` = chars. Prints per config the cross-encoder's seconds and the
characters it read, the mean reciprocal rank of each question's best-placed evidence turn,
the share of questions with every evidence turn in the top 5 and with one at the top, overall
and for the questions whose evidence sits beyond a 500-character head.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path


def bm25_top(turns, query: str, k: int) -> list[int]:
    """The indices of ``turns``' ``k`` best by BM25 (k1 1.2, b 0.75) over the lexical index's tokens."""
    from memlane.query.words import stem_words, tokens

    docs = [Counter(stem_words(tokens(t.text))) for t in turns]
    q = set(stem_words(tokens(query)))
    n = len(docs)
    avg = sum(sum(d.values()) for d in docs) / max(n, 1)
    df = Counter(w for d in docs for w in q if w in d)
    idf = {w: math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) for w in q}
    scores = []
    for i, d in enumerate(docs):
        size = sum(d.values())
        s = sum(idf[w] * d[w] * 2.2 / (d[w] + 1.2 * (0.25 + 0.75 * size / avg)) for w in q if w in d)
        scores.append((-s, i))
    return [i for _, i in sorted(scores)[:k]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--config", action="append", required=True, help="name:chars")
    ap.add_argument("--pool", type=int, default=20, help="BM25 best turns beside the evidence")
    args = ap.parse_args(argv)

    from memlane.ingest.longmemeval import load_longmemeval
    from memlane.models.onnx_cross_encoder import OnnxCrossEncoder
    from memlane.recall.rerank import candidate_text
    from memlane.settings import Settings

    model = OnnxCrossEncoder("cross-encoder", threads=Settings().models.torch_threads)
    configs = []
    for spec in args.config:
        name, _, body = spec.partition(":")
        configs.append((name, int(body)))
    figs: dict[str, dict[str, list[float]]] = {n: defaultdict(list) for n, _ in configs}
    cost: dict[str, list[float]] = {n: [0.0, 0.0] for n, _ in configs}
    questions = [q for q in load_longmemeval(args.path) if q.evidence_turns]
    for q in questions:
        turns = list(q.turns)
        index = {t.turn_id: i for i, t in enumerate(turns)}
        gold = {index[e] for e in q.evidence_turns if e in index}
        cands = list(dict.fromkeys(bm25_top(turns, q.question, args.pool) + sorted(gold)))
        fields = [
            {
                "text": f"{turns[i].speaker}: {turns[i].text}",
                "mentioned_at": turns[i].timestamp.timestamp(),
                "metadata": {"speaker": turns[i].speaker},
            }
            for i in cands
        ]
        # Evidence whose answer a 500-character head would not hold (the turn is longer).
        deep = any(len(turns[i].text) > 500 for i in gold)
        for name, chars in configs:
            texts = [candidate_text(f, chars) for f in fields]
            start = time.perf_counter()
            scores = model.rerank(q.question, texts, list(range(len(texts))))
            cost[name][0] += time.perf_counter() - start
            cost[name][1] += sum(map(len, texts))
            order = [cands[j] for j in sorted(range(len(cands)), key=lambda j: -scores[j])]
            places = [order.index(g) for g in gold]
            row = {
                "mrr": 1.0 / (1 + min(places)),
                "all@5": float(max(places) < 5),
                "top1": float(min(places) == 0),
            }
            for k, v in row.items():
                figs[name][k].append(v)
                if deep:
                    figs[name][f"long {k}"].append(v)
    n_deep = len(figs[configs[0][0]]["long mrr"])
    print(
        f"{args.path.name}: {len(questions)} questions with evidence ({n_deep} with an evidence turn over 500 chars)"
    )
    print(
        "| config | cross-encoder s | chars read | MRR | all@5 | top 1 | long MRR | long all@5 | long top 1 |"
    )
    print("| --- |" + " ---: |" * 8)
    for name, _ in configs:
        f = figs[name]
        cells = [
            f"{statistics.mean(f[k]):.3f}" if f[k] else ""
            for k in ("mrr", "all@5", "top1", "long mrr", "long all@5", "long top1")
        ]
        print(f"| {name} | {cost[name][0]:.1f} | {cost[name][1]:.0f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
