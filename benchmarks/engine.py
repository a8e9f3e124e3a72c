"""Engine benchmark: recall latency by bank size and retain throughput, each beside a baseline
measured in the same run.

- Recall banks are synthetic: templated sentences with random unit vectors written straight to
  the store (embedding 100k texts would take ~13 minutes here and latency does not depend on
  what the vectors mean), in bounded batches so 1M memories fit. The query is embedded for
  real. Baselines: one bare dense search of the same bank in the store and in the in-process
  index, the floor that any recall pays. Footprint: bytes per memory in process (RSS grown by
  the index and graph build) and on disk, beside the raw float32 vector and the raw text.
- Retain: synthetic chat turns through the whole retain path (NER, time parsing, entities,
  embedding, links, Milvus and graph writes) beside raw embedding of the very texts retain
  embeds, with the same model and batch size.
"""

from __future__ import annotations

import math
import random
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memlane.records import Chunk, MemoryUnit, Turn

NAMES = [
    "Avery",
    "Blake",
    "Casey",
    "Devon",
    "Emery",
    "Finley",
    "Harper",
    "Jordan",
    "Kai",
    "Logan",
    "Morgan",
    "Parker",
    "Quinn",
    "Riley",
    "Sage",
    "Taylor",
]
PLACES = [
    "Lisbon",
    "Denver",
    "Osaka",
    "Nairobi",
    "Toronto",
    "Bergen",
    "Austin",
    "Porto",
    "Seoul",
    "Cusco",
    "Hanoi",
    "Dublin",
]
THINGS = [
    "a pottery class",
    "the marathon",
    "a new job",
    "the garden",
    "a road trip",
    "the book club",
    "a violin recital",
    "the startup",
    "a camping weekend",
    "the bakery",
    "a chess tournament",
    "the charity run",
    "a cooking course",
    "the museum visit",
    "a hiking trail",
    "the concert",
]
VERBS = [
    "talked about",
    "signed up for",
    "finished",
    "planned",
    "was nervous about",
    "loved",
    "recommended",
    "cancelled",
    "is saving money for",
    "took photos at",
    "volunteered at",
]
WHEN = ["yesterday", "last week", "two weeks ago", "last summer", "in March", "this morning", "", "", ""]


def _sentence_parts(rng: random.Random) -> tuple[str, str, list[str]]:
    """A templated sentence: speaker, text and the phrases it is made of."""
    who = rng.choice(NAMES)
    verb, thing, place, when = rng.choice(VERBS), rng.choice(THINGS), rng.choice(PLACES), rng.choice(WHEN)
    text = f"I {verb} {thing} in {place} {when}".strip()
    parts = [who, verb, thing, place]
    if rng.random() < 0.3:
        other = rng.choice(NAMES)
        text += f" with {other}."
        parts.append(other)
    return who, text, parts


def _sentence(rng: random.Random) -> tuple[str, str]:
    who, text, _ = _sentence_parts(rng)
    return who, text


#: Norm of the noise added to a composed vector (before normalising), against a sum of 4-5
#: phrase vectors: units sharing all phrases stay distinct, and units sharing most of them are
#: near, as real embeddings of such sentences are.
COMPOSED_NOISE = 1.0


def phrase_vectors(embedder) -> dict[str, np.ndarray]:
    """Real embeddings of the phrases the templated sentences are made of (about 60: under a
    second), so synthetic unit vectors can be composed from them (see synthetic_units)."""
    phrases = sorted(set(NAMES + VERBS + THINGS + PLACES))
    vecs = np.asarray(embedder.embed(phrases), dtype=np.float32)
    return dict(zip(phrases, vecs))


def synthetic_turns(n: int, seed: int = 7, sessions_of: int = 20) -> list[Turn]:
    """``n`` chat turns in sessions of ``sessions_of`` turns, one session a day from 2025-01-01."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, 18, 0, tzinfo=UTC)
    turns = []
    for i in range(n):
        session = i // sessions_of
        who, text = _sentence(rng)
        turns.append(
            Turn(
                document_id="bench",
                session_id=f"s{session}",
                turn_id=f"s{session}:{i % sessions_of + 1}",
                index=i % sessions_of,
                speaker=who,
                text=text,
                timestamp=start + timedelta(days=session),
            )
        )
    return turns


def sample_documents(n: int) -> list[tuple[str, list[Turn]]]:
    """The bundled sample chats (realistic turn lengths) repeated as distinct documents up to
    about ``n`` turns; empty when the samples folder is not there (installed package)."""
    from memlane.ingest import load_conversations

    path = Path(__file__).resolve().parents[1] / "samples" / "conversations.jsonl"
    if not path.exists():
        return []
    convs = load_conversations(path)
    docs, total, copy = [], 0, 0
    while total < n:
        for c in convs:
            turns = [t.model_copy(update={"document_id": f"{c.document_id}-{copy}"}) for t in c.turns]
            docs.append((f"{c.document_id}-{copy}", turns))
            total += len(turns)
        copy += 1
    return docs


def synthetic_units(
    bank_id: str, n: int, dim: int, seed: int = 11, phrases: dict[str, np.ndarray] | None = None
) -> list[MemoryUnit]:
    """``n`` templated memories. Vectors: random unit vectors, or with ``phrases``
    (:func:`phrase_vectors`) the normalised sum of the sentence's phrase vectors plus noise:
    vectors with the neighbourhoods of real embeddings (random 384-d vectors have none: every
    pair is at cosine ~0 +- 0.05, so a graph index finds 12% of an exact top-100 at ef=128,
    benchmarks/ann_libs.py), against which a real query embedding means something."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    vecs = nrng.standard_normal((n, dim)).astype(np.float32)
    if phrases is not None:
        vecs *= COMPOSED_NOISE / math.sqrt(dim)
    else:
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    entity_pool = [f"e{i}" for i in range(max(10, n // 20))]
    units = []
    for i in range(n):
        who, text, parts = _sentence_parts(rng)
        if phrases is not None:
            vecs[i] += sum(phrases[p] for p in parts)
            vecs[i] /= np.linalg.norm(vecs[i])
        at = start + timedelta(minutes=37 * i)
        units.append(
            MemoryUnit(
                id=f"u{i:07d}",
                bank_id=bank_id,
                text=f"{who}: {text}",
                embedding=vecs[i].tolist(),
                mentioned_at=at,
                occurred_start=at,
                occurred_end=at,
                document_id=f"d{i // 500}",
                chunk_id=f"c{i // 8}",
                source_turns=[f"t{i}"],
                valid_from=at,
                entity_ids=[f"speaker-{who}", rng.choice(entity_pool)],
            )
        )
    return units


def synthetic_chunks(bank_id: str, n: int) -> list[Chunk]:
    """The chunks :func:`synthetic_units` names (8 units each), in sessions of 20 units (about
    12 hours of the units' 37-minute spacing): what the temporal tree groups units by."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        Chunk(
            chunk_id=f"c{k}",
            bank_id=bank_id,
            document_id=f"d{(8 * k) // 500}",
            session_id=f"s{(8 * k) // 20}",
            index=k,
            text="",
            started_at=start + timedelta(minutes=37 * 8 * k),
        )
        for k in range((n + 7) // 8)
    ]


def _say(message: str) -> None:
    """Progress on stderr, so --json output stays one object on stdout."""
    print(f"bench: {message}", file=sys.stderr, flush=True)


def _pct(xs: Sequence[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def synthetic_batches(
    bank_id: str, n: int, dim: int, batch: int = 5000, phrases: dict[str, np.ndarray] | None = None
):
    """``n`` synthetic units in lists of at most ``batch`` (ids ``u0000000`` on), generated
    lazily: memory stays bounded by one batch whatever ``n`` is (1M included). ``phrases``:
    see :func:`synthetic_units`."""
    for lo in range(0, n, batch):
        units = synthetic_units(bank_id, min(n, lo + batch) - lo, dim, seed=lo, phrases=phrases)
        shift = timedelta(minutes=37 * lo)  # one timeline and one chunk numbering across batches
        for j, u in enumerate(units):
            u.id = f"u{lo + j:07d}"
            u.chunk_id = f"c{(lo + j) // 8}"
            u.document_id = f"d{(lo + j) // 500}"
            u.mentioned_at = u.mentioned_at + shift
            u.occurred_start = u.occurred_end = u.valid_from = u.mentioned_at
        yield units


def rss_bytes() -> int:
    """This process's resident set size (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def trim_heap() -> None:
    """Hand freed heap back to the OS (glibc), so an RSS delta measures what a new bank
    holds rather than what an earlier, deleted one left in the allocator."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def dir_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (0 when it does not exist)."""
    total = 0
    for p in Path(path).rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def bench_recall_size(
    memory, size: int, queries: Sequence[str], *, batch: int = 5000, budgets: Sequence[str] = ("mid",)
) -> dict[str, Any]:
    """Recall latency and memory footprint at one bank size, beside their baselines.

    Writes a synthetic bank of ``size`` units in bounded batches, builds its in-process index
    and graph, times ``queries`` recalls (after 10 warm-ups) against two baselines over the same
    bank (embed + one dense top-100 search of the store; embed + one dense top-100 search of
    the in-process index), measures bytes per memory (RSS grown by the index build, bytes the
    store wrote to disk) beside the raw float32 vector and the raw text, and deletes the bank."""
    bank = f"bench-{size}"
    embedder = memory.embedder
    data_dir = Path(memory.settings.data_dir)
    _say(f"writing a bank of {size:,} synthetic memories")
    memory.create_bank(bank)
    disk_before = dir_bytes(data_dir)
    text_bytes = 0
    t = time.perf_counter()
    for units in synthetic_batches(bank, size, embedder.dim, batch):
        text_bytes += sum(len(u.text.encode("utf-8")) for u in units)
        memory.store.upsert_units(bank, units)
    memory.store.upsert_chunks(bank, synthetic_chunks(bank, size))
    memory.store.bump_revision(bank)
    load_s = time.perf_counter() - t
    disk_after = dir_bytes(data_dir)
    trim_heap()
    rss_before = rss_bytes()
    t = time.perf_counter()
    memory.derived.ensure(bank)  # builds the in-process index and graph from Milvus
    build_s = time.perf_counter() - t
    trim_heap()
    rss_after = rss_bytes()
    _say(f"stored in {load_s:.1f}s, index built in {build_s:.1f}s; {len(queries)} recalls a budget")
    by_budget: dict[str, dict[str, Any]] = {}
    for b in budgets:  # the same bank and queries for each budget, one after the other
        for q in queries[:10]:
            memory.recall(bank, q, max_tokens=1024, budget=b)
        lat, stages = [], []
        for q in queries:
            t = time.perf_counter()
            res = memory.recall(bank, q, max_tokens=1024, budget=b)
            lat.append((time.perf_counter() - t) * 1000)
            stages.append(res.timings_ms)
        by_budget[b] = {
            "p50_ms": round(_pct(lat, 0.5), 1),
            "p95_ms": round(_pct(lat, 0.95), 1),
            "stage_mean_ms": {k: round(statistics.fmean(s.get(k, 0.0) for s in stages), 1) for k in stages[0]}
            if stages
            else {},
        }
    budget = budgets[0]
    # The temporal tree: consolidated (the extractive consolidator), then the same queries
    # with the tree stage on (the planner's levels) beside flat recall (planner off).
    t = time.perf_counter()
    tree = memory.consolidate(bank)
    consolidate_s = time.perf_counter() - t
    _say(f"consolidated in {consolidate_s:.1f}s: {tree.nodes}")
    for q in queries[:10]:
        memory.recall(bank, q, max_tokens=1024, budget=budget, planner="off")
    tree_lat, flat_lat = [], []
    for q in queries:
        t = time.perf_counter()
        memory.recall(bank, q, max_tokens=1024, budget=budget)
        tree_lat.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        memory.recall(bank, q, max_tokens=1024, budget=budget, planner="off")
        flat_lat.append((time.perf_counter() - t) * 1000)
    store_base, index_base = [], []  # the floor any recall pays: embed + one dense top-100
    for q in queries[:10]:  # warm-ups, as for recall
        memory.store.search_dense(bank, embedder.embed_queries([q]), 100, fields=())
        memory.derived.search_dense(bank, embedder.embed_queries([q]), 100)
    for q in queries:
        t = time.perf_counter()
        memory.store.search_dense(bank, embedder.embed_queries([q]), 100, fields=())
        store_base.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        memory.derived.search_dense(bank, embedder.embed_queries([q]), 100)
        index_base.append((time.perf_counter() - t) * 1000)
    row = {
        "memories": size,
        "load_s": round(load_s, 1),
        "index_build_s": round(build_s, 1),
        "p50_ms": by_budget[budget]["p50_ms"],
        "p95_ms": by_budget[budget]["p95_ms"],
        "budgets": by_budget,
        "baseline_dense_p50_ms": round(_pct(store_base, 0.5), 1),
        "baseline_dense_p95_ms": round(_pct(store_base, 0.95), 1),
        "baseline_index_dense_p50_ms": round(_pct(index_base, 0.5), 1),
        "baseline_index_dense_p95_ms": round(_pct(index_base, 0.95), 1),
        "tree": {
            "consolidate_s": round(consolidate_s, 1),
            "nodes": tree.nodes,
            "tree_p50_ms": round(_pct(tree_lat, 0.5), 1),
            "tree_p95_ms": round(_pct(tree_lat, 0.95), 1),
            "flat_p50_ms": round(_pct(flat_lat, 0.5), 1),
            "flat_p95_ms": round(_pct(flat_lat, 0.95), 1),
            "p95_ratio": round(_pct(tree_lat, 0.95) / max(_pct(flat_lat, 0.95), 1e-9), 2),
        },
        "stage_mean_ms": by_budget[budget]["stage_mean_ms"],
        "footprint": {
            "rss_bytes_per_memory": round((rss_after - rss_before) / size, 1),
            "disk_bytes_per_memory": round((disk_after - disk_before) / size, 1),
            "raw_vector_bytes_per_memory": embedder.dim * 4,
            "raw_text_bytes_per_memory": round(text_bytes / size, 1),
            "process_rss_mb": round(rss_after / 2**20, 1),
        },
    }
    memory.banks.delete(bank)
    return row


def _ids(res) -> list[str]:
    return [m.unit.id for m in res.memories]


def bench_index_size(
    memory, size: int, queries: Sequence[str], phrases: dict[str, np.ndarray], *, batch: int = 5000
) -> dict[str, Any]:
    """Recall at one bank size in index mode, the HNSW graph on beside exact dense search.

    Index mode: the synthetic units (vectors composed from phrase embeddings, see
    :func:`synthetic_units`) go straight into a BankIndex and the graph, not through the store
    (writing 1M units into Milvus Lite is out of reach here); the bank exists in the store
    (empty) so ``memory.recall`` runs the whole pipeline over that index. Each query is
    recalled twice in a row, exact then with the graph (the same index; the threshold moved),
    so both see the same load. Quality: the share of the exact recall's memories that the
    graph's recall returns (recall@k, k = the exact result's size), and the same for the
    semantic channel's top-100 alone."""
    from memlane.derived import node_of
    from memlane.recall.index import BankIndex

    bank = f"bench-index-{size}"
    dim = memory.embedder.dim
    memory.create_bank(bank)
    exact_only = 1 << 62
    index = BankIndex(
        dim, revision=memory.store.get_revision(bank), ann_threshold=exact_only, ann_background=False
    )
    nodes = []
    _say(f"index mode: loading {size:,} synthetic memories into the in-process index")
    trim_heap()
    rss0 = rss_bytes()
    t = time.perf_counter()
    for units in synthetic_batches(bank, size, dim, batch, phrases=phrases):
        index.bulk_load(units)
        nodes.extend(node_of(u) for u in units)
    load_s = time.perf_counter() - t
    memory.derived.graph.rebuild(bank, nodes)
    del nodes
    # No public way to hand DerivedState an index built elsewhere: set it as _load would.
    memory.derived._indexes[bank] = index
    trim_heap()
    rss1 = rss_bytes()
    t = time.perf_counter()
    index.build_ann()
    ann_build_s = time.perf_counter() - t
    trim_heap()
    rss2 = rss_bytes()
    _say(f"loaded in {load_s:.1f}s, graph built in {ann_build_s:.1f}s; {len(queries)} recalls x 2")
    prior = memory.settings.recall.chunk_prior
    lat = {"exact": [], "ann": []}
    final_recall, dense_recall = [], []
    for k, q in enumerate([*queries[:10], *queries]):
        res = {}
        for mode, threshold in (("exact", exact_only), ("ann", 1)):
            index.ann_threshold = threshold
            t = time.perf_counter()
            res[mode] = memory.recall(bank, q, max_tokens=1024)
            if k >= 10:  # the first 10 warm up
                lat[mode].append((time.perf_counter() - t) * 1000)
        if k < 10:
            continue
        want = _ids(res["exact"])
        final_recall.append(len(set(want) & set(_ids(res["ann"]))) / max(1, len(want)))
        v = memory.embedder.embed_queries([q])[0]
        index.ann_threshold = exact_only
        dense_want = {h.id for h in index.search_dense(v, 100, chunk_prior=prior)}
        index.ann_threshold = 1
        dense_got = {h.id for h in index.search_dense(v, 100, chunk_prior=prior)}
        dense_recall.append(len(dense_want & dense_got) / max(1, len(dense_want)))
    row = {
        "memories": size,
        "mode": "index",
        "load_s": round(load_s, 1),
        "ann_build_s": round(ann_build_s, 1),
        "exact_p50_ms": round(_pct(lat["exact"], 0.5), 1),
        "exact_p95_ms": round(_pct(lat["exact"], 0.95), 1),
        "ann_p50_ms": round(_pct(lat["ann"], 0.5), 1),
        "ann_p95_ms": round(_pct(lat["ann"], 0.95), 1),
        "ann_recall_at_k": round(statistics.fmean(final_recall), 4),
        "ann_recall_at_k_min": round(min(final_recall), 4),
        "ann_dense_recall_at_100": round(statistics.fmean(dense_recall), 4),
        "index_rss_mb": round((rss1 - rss0) / 2**20, 1),
        "graph_rss_mb": round((rss2 - rss1) / 2**20, 1),
    }
    memory.derived.drop(bank)
    memory.banks.delete(bank)
    del index
    trim_heap()
    return row


def bench_retain(memory, retain_turns: int) -> dict[str, Any]:
    """Retain throughput over ``retain_turns`` templated turns (and as many of the bundled
    sample chats, when present) beside raw embedding of the very texts retain embeds."""
    from memlane.retain.chunking import format_turn

    embedder = memory.embedder
    out: dict[str, Any] = {}
    corpora = {"templated": [("bench", synthetic_turns(retain_turns))]}
    sample = sample_documents(retain_turns)
    if sample:
        corpora["sample-chats"] = sample
    for name, docs in corpora.items():
        n = sum(len(turns) for _, turns in docs)
        _say(f"retain throughput over {n} {name} turns")
        texts = [format_turn(t) for _, turns in docs for t in turns]
        embedder.embed(texts[:64])
        t = time.perf_counter()
        embedder.embed(texts)
        raw = len(texts) / (time.perf_counter() - t)
        bank = f"bench-retain-{name}"
        memory.create_bank(bank)
        t = time.perf_counter()
        rep = memory.retain(bank, docs)
        retain_s = time.perf_counter() - t
        out[name] = {
            "turns": n,
            "retain_turns_per_s": round(n / retain_s, 1),
            "raw_embed_sentences_per_s": round(raw, 1),
            "ratio": round(n / retain_s / raw, 3),
            "stage_s": rep.timings_s,
        }
        memory.banks.delete(bank)
    return out


def bench_queries(n: int) -> list[str]:
    """``n`` templated questions about the synthetic memories (fixed seed)."""
    rng = random.Random(3)
    return [f"What did {rng.choice(NAMES)} say about {rng.choice(THINGS)}?" for _ in range(n)]


def run_engine_bench(
    data_dir: Path,
    *,
    sizes: Sequence[int] = (1000, 10000, 100000),
    queries: int = 200,
    retain_turns: int = 1500,
    index_sizes: Sequence[int] = (),
    budgets: Sequence[str] = ("mid",),
) -> dict[str, Any]:
    """Run the benchmark in a fresh data directory; returns the figures. ``sizes`` go through
    the store (Milvus Lite); ``index_sizes`` run in index mode (:func:`bench_index_size`:
    straight into the in-process index, exact beside the HNSW graph)."""
    from memlane.engine import Memory
    from memlane.settings import Settings

    data_dir = Path(data_dir)
    if data_dir.exists():
        shutil.rmtree(data_dir)
    memory = Memory(Settings(data_dir=data_dir))
    report: dict[str, Any] = {"recall": [], "retain": {}, "budget": budgets[0], "budgets": list(budgets)}
    try:
        qs = bench_queries(queries)
        for size in (s for s in sizes if s > 0):  # --size 0: no bank through the store
            report["recall"].append(bench_recall_size(memory, size, qs, budgets=budgets))
        if index_sizes:
            phrases = phrase_vectors(memory.embedder)
            report["index"] = []
            for size in index_sizes:
                report["index"].append(bench_index_size(memory, size, qs, phrases))
                _say(f"index mode {size:,}: {report['index'][-1]}")

        if retain_turns > 0:
            report["retain"] = bench_retain(memory, retain_turns)
    finally:
        memory.close()
    return report


def format_bench(report: dict[str, Any]) -> str:
    lines = [
        f"recall latency at budget {report.get('budget', 'mid')} (through the store: Milvus Lite; "
        "in-process index; the reranker as configured)",
        f"{'memories':>9} {'p50 ms':>8} {'p95 ms':>8} {'dense-only p50':>15} {'p95':>6}  stage means",
    ]
    for r in report["recall"]:
        lines.append(
            f"{r['memories']:>9} {r['p50_ms']:>8} {r['p95_ms']:>8} "
            f"{r['baseline_dense_p50_ms']:>15} {r['baseline_dense_p95_ms']:>6}  {r['stage_mean_ms']}"
        )
    if len(report.get("budgets") or ()) > 1:
        lines.append("recall latency per budget, same bank and queries")
        for r in report["recall"]:
            for b, f in r["budgets"].items():
                lines.append(
                    f"{r['memories']:>9} {b:>4} p50/p95 {f['p50_ms']}/{f['p95_ms']} ms  {f['stage_mean_ms']}"
                )
    lines.append("temporal tree: recall with the tree stage vs flat (planner off), same queries")
    for r in report["recall"]:
        t = r.get("tree")
        if t:
            lines.append(
                f"{r['memories']:>9} tree p50/p95 {t['tree_p50_ms']}/{t['tree_p95_ms']} ms, flat "
                f"{t['flat_p50_ms']}/{t['flat_p95_ms']} ms (p95 ratio {t['p95_ratio']}); "
                f"consolidated in {t['consolidate_s']} s: {t['nodes']}"
            )
    if report.get("index"):
        lines.append(
            "index mode (synthetic units straight into the in-process index, not the store): "
            "recall p50/p95 ms, exact dense search beside the HNSW graph, same queries"
        )
        for r in report["index"]:
            lines.append(
                f"{r['memories']:>9} exact {r['exact_p50_ms']}/{r['exact_p95_ms']} ms, graph "
                f"{r['ann_p50_ms']}/{r['ann_p95_ms']} ms; graph recall@k of the final recall "
                f"{r['ann_recall_at_k']} (min {r['ann_recall_at_k_min']}), semantic top-100 "
                f"{r['ann_dense_recall_at_100']}; loaded in {r['load_s']} s, graph built in "
                f"{r['ann_build_s']} s; index {r['index_rss_mb']} MB + graph {r['graph_rss_mb']} MB"
            )
    for name, ret in report["retain"].items():
        lines.append(
            f"retain ({name}): {ret['retain_turns_per_s']} turns/s vs raw embedding "
            f"{ret['raw_embed_sentences_per_s']} sentences/s of the same texts (ratio "
            f"{ret['ratio']}) over {ret['turns']} turns; stage seconds {ret['stage_s']}"
        )
    return "\n".join(lines)
