"""Engine benchmark: recall latency by bank size and retain throughput, each beside a baseline
measured in the same run.

- Recall banks are synthetic: templated sentences with random unit vectors written straight to
  the store (embedding 100k texts would take ~13 minutes here and latency does not depend on
  what the vectors mean). The query is embedded for real. Baseline: one bare dense search of
  the same bank, the floor that any recall pays.
- Retain: synthetic chat turns through the whole retain path (NER, time parsing, entities,
  embedding, links, Milvus and graph writes) beside raw embedding of the very texts retain
  embeds, with the same model and batch size.
"""

from __future__ import annotations

import random
import shutil
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memlane.model import MemoryUnit, Turn

NAMES = ["Avery", "Blake", "Casey", "Devon", "Emery", "Finley", "Harper", "Jordan", "Kai", "Logan",
         "Morgan", "Parker", "Quinn", "Riley", "Sage", "Taylor"]
PLACES = ["Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Bergen", "Austin", "Porto", "Seoul",
          "Cusco", "Hanoi", "Dublin"]
THINGS = ["a pottery class", "the marathon", "a new job", "the garden", "a road trip", "the book club",
          "a violin recital", "the startup", "a camping weekend", "the bakery", "a chess tournament",
          "the charity run", "a cooking course", "the museum visit", "a hiking trail", "the concert"]
VERBS = ["talked about", "signed up for", "finished", "planned", "was nervous about", "loved",
         "recommended", "cancelled", "is saving money for", "took photos at", "volunteered at"]
WHEN = ["yesterday", "last week", "two weeks ago", "last summer", "in March", "this morning", "", "", ""]


def _sentence(rng: random.Random) -> tuple[str, str]:
    who = rng.choice(NAMES)
    text = f"I {rng.choice(VERBS)} {rng.choice(THINGS)} in {rng.choice(PLACES)} {rng.choice(WHEN)}".strip()
    if rng.random() < 0.3:
        text += f" with {rng.choice(NAMES)}."
    return who, text


def synthetic_turns(n: int, seed: int = 7, sessions_of: int = 20) -> list[Turn]:
    """``n`` chat turns in sessions of ``sessions_of`` turns, one session a day from 2025-01-01."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, 18, 0, tzinfo=timezone.utc)
    turns = []
    for i in range(n):
        session = i // sessions_of
        who, text = _sentence(rng)
        turns.append(Turn(document_id="bench", session_id=f"s{session}", turn_id=f"s{session}:{i % sessions_of + 1}",
                          index=i % sessions_of, speaker=who, text=text,
                          timestamp=start + timedelta(days=session)))
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


def synthetic_units(bank_id: str, n: int, dim: int, seed: int = 11) -> list[MemoryUnit]:
    rng = random.Random(seed)
    vecs = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    entity_pool = [f"e{i}" for i in range(max(10, n // 20))]
    units = []
    for i in range(n):
        who, text = _sentence(rng)
        at = start + timedelta(minutes=37 * i)
        units.append(MemoryUnit(
            id=f"u{i:07d}", bank_id=bank_id, text=f"{who}: {text}", embedding=vecs[i].tolist(),
            mentioned_at=at, occurred_start=at, occurred_end=at, document_id=f"d{i // 500}",
            chunk_id=f"c{i // 8}", source_turns=[f"t{i}"], valid_from=at,
            entity_ids=[f"speaker-{who}", rng.choice(entity_pool)]))
    return units


def _say(message: str) -> None:
    """Progress on stderr, so --json output stays one object on stdout."""
    print(f"bench: {message}", file=sys.stderr, flush=True)


def _pct(xs: Sequence[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_engine_bench(data_dir: Path, *, sizes: Sequence[int] = (1000, 10000, 100000),
                     queries: int = 200, retain_turns: int = 1500) -> dict[str, Any]:
    """Run the benchmark in a fresh data directory; returns the figures."""
    from memlane.engine import Memory
    from memlane.retain.chunking import format_turn
    from memlane.settings import Settings

    data_dir = Path(data_dir)
    if data_dir.exists():
        shutil.rmtree(data_dir)
    memory = Memory(Settings(data_dir=data_dir))
    report: dict[str, Any] = {"recall": [], "retain": {}}
    try:
        embedder = memory.embedder
        rng = random.Random(3)
        qs = [f"What did {rng.choice(NAMES)} say about {rng.choice(THINGS)}?" for _ in range(queries)]
        for size in sizes:
            bank = f"bench-{size}"
            _say(f"writing a bank of {size:,} synthetic memories")
            memory.create_bank(bank)
            t = time.perf_counter()
            for lo in range(0, size, 5000):
                units = synthetic_units(bank, min(size, lo + 5000) - lo, embedder.dim, seed=lo)
                for j, u in enumerate(units):
                    u.id = f"u{lo + j:07d}"
                memory.store.upsert_units(bank, units)
            memory.store.bump_revision(bank)
            load_s = time.perf_counter() - t
            t = time.perf_counter()
            memory.derived.ensure(bank)  # builds the in-process index and graph from Milvus
            build_s = time.perf_counter() - t
            _say(f"stored in {load_s:.1f}s, index built in {build_s:.1f}s; {queries} recalls")
            for q in qs[:10]:
                memory.recall(bank, q, max_tokens=1024)
            lat, stages = [], []
            for q in qs:
                t = time.perf_counter()
                res = memory.recall(bank, q, max_tokens=1024)
                lat.append((time.perf_counter() - t) * 1000)
                stages.append(res.timings_ms)
            base = []  # the floor any recall pays: embed the query, one dense top-100 search
            for q in qs:
                t = time.perf_counter()
                memory.store.search_dense(bank, embedder.embed([q]), 100, fields=())
                base.append((time.perf_counter() - t) * 1000)
            report["recall"].append({
                "memories": size, "load_s": round(load_s, 1), "index_build_s": round(build_s, 1),
                "p50_ms": round(_pct(lat, 0.5), 1), "p95_ms": round(_pct(lat, 0.95), 1),
                "baseline_dense_p50_ms": round(_pct(base, 0.5), 1),
                "baseline_dense_p95_ms": round(_pct(base, 0.95), 1),
                "stage_mean_ms": {k: round(statistics.fmean(s.get(k, 0.0) for s in stages), 1)
                                  for k in stages[0]},
            })
            memory.delete_bank(bank)

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
            report["retain"][name] = {
                "turns": n, "retain_turns_per_s": round(n / retain_s, 1),
                "raw_embed_sentences_per_s": round(raw, 1),
                "ratio": round(n / retain_s / raw, 3), "stage_s": rep.timings_s,
            }
    finally:
        memory.close()
    return report


def format_bench(report: dict[str, Any]) -> str:
    lines = ["recall latency (in-process, RRF fallback, no cross-encoder)",
             f"{'memories':>9} {'p50 ms':>8} {'p95 ms':>8} {'dense-only p50':>15} {'p95':>6}  stage means"]
    for r in report["recall"]:
        lines.append(f"{r['memories']:>9} {r['p50_ms']:>8} {r['p95_ms']:>8} "
                     f"{r['baseline_dense_p50_ms']:>15} {r['baseline_dense_p95_ms']:>6}  {r['stage_mean_ms']}")
    for name, ret in report["retain"].items():
        lines.append(f"retain ({name}): {ret['retain_turns_per_s']} turns/s vs raw embedding "
                     f"{ret['raw_embed_sentences_per_s']} sentences/s of the same texts (ratio "
                     f"{ret['ratio']}) over {ret['turns']} turns; stage seconds {ret['stage_s']}")
    return "\n".join(lines)
