"""What a retain costs when its document already exists, beside a new document's retain.

``python benchmarks/replace_cost.py [--sizes 1000,10000] [--docs 40] [--turns 20] [--reps 12] [--consolidate]``

For each bank size: a fresh Milvus Lite data directory, a bank of ``--docs`` documents of
``--turns`` templated chat turns, each retained in its own call (as the peer workload's requests
are: ``benchmarks/peer_bench.py``), topped up to the size with synthetic memories written
straight to the store (random vectors, no links: they make the bank as large as asked, the
retained documents carry the links and entities). Then ``--reps`` rounds, each re-retaining one
of the documents (round-robin) three ways, in alternating order:

* ``unchanged``: the document as it is stored;
* ``one-turn``: the same with one turn's text changed (the next round's ``unchanged`` sends
  this version);
* ``new``: a document id the bank never held (the baseline: nothing to delete).

With ``--consolidate`` the bank's tree is built (and its facts resolved) before the rounds, so a
retain also has a tree to keep and prunes the sessions it changed.

Prints per case the wall time of ``Memory.retain`` (p50 / p95 in ms) and the median of each
stage it recorded (``memlane.timings``: ``delete`` and its parts ``delete.*``, ``reuse_read``,
``store_write``, ``derived_update``, ``flush``, ``embed``...). Figures only, no assertions. Run
the code of another checkout with ``PYTHONPATH=/that/checkout`` (the path of the ``memlane``
imported is printed).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# appended, not prepended: PYTHONPATH (another checkout's memlane) wins
sys.path.append(str(Path(__file__).resolve().parents[1]))


def _say(message: str) -> None:
    print(f"replace cost: {message}", file=sys.stderr, flush=True)


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def documents(n: int, turns: int, seed: int = 5):
    """``n`` documents of ``turns`` templated turns, one session each, a day apart."""
    from benchmarks.engine import _sentence
    from memlane.records import Turn

    rng = random.Random(seed)
    start = datetime(2025, 1, 1, 18, 0, tzinfo=UTC)
    docs = []
    for d in range(n):
        doc = f"doc-{d:04d}"
        out = []
        for i in range(turns):
            who, text = _sentence(rng)
            out.append(
                Turn(
                    document_id=doc,
                    session_id=f"{doc}-s",
                    turn_id=f"{doc}:{i}",
                    index=i,
                    speaker=who,
                    text=text,
                    timestamp=start + timedelta(days=d, minutes=i),
                )
            )
        docs.append((doc, out))
    return docs


def run_size(
    size: int, n_docs: int, n_turns: int, reps: int, data_dir: Path, consolidate: bool = False
) -> dict[str, Any]:
    from benchmarks.engine import synthetic_batches, synthetic_chunks
    from memlane.engine import Memory
    from memlane.settings import Settings

    bank = "replace-bench"
    memory = Memory(Settings(data_dir=data_dir))
    try:
        memory.create_bank(bank)
        docs = documents(n_docs + reps, n_turns)
        current = dict(docs[:n_docs])
        fresh = docs[n_docs:]
        t = time.perf_counter()
        for doc, turns in docs[:n_docs]:
            memory.retain(bank, [(doc, turns)])
        retained = memory.store.count_units(bank)
        _say(f"size {size}: {n_docs} documents retained ({retained} units) in {time.perf_counter() - t:.1f}s")
        filler = max(0, size - retained)
        if filler:
            t = time.perf_counter()
            for units in synthetic_batches(bank, filler, memory.embedder.dim, 5000):
                for u in units:
                    u.id = f"fill-{u.id}"
                    u.document_id = f"fill-{u.document_id}"
                    u.chunk_id = f"fill-{u.chunk_id}"
                memory.store.upsert_units(bank, units)
            chunks = synthetic_chunks(bank, filler)
            for c in chunks:
                c.chunk_id, c.document_id = f"fill-{c.chunk_id}", f"fill-{c.document_id}"
            memory.store.upsert_chunks(bank, chunks)
            memory.store.bump_revision(bank)
            memory.derived.ensure(bank)
            _say(f"size {size}: {filler} synthetic units added in {time.perf_counter() - t:.1f}s")
        if consolidate:
            t = time.perf_counter()
            tree = memory.consolidate(bank, consolidator="rules")
            _say(
                f"size {size}: consolidated ({sum(tree.nodes.values())} nodes) in {time.perf_counter() - t:.1f}s"
            )
        units = memory.store.count_units(bank)
        entities = len(memory.store.list_entities(bank))

        walls: dict[str, list[float]] = defaultdict(list)
        stages: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        names = list(current)
        rng = random.Random(3)

        def timed(case: str, doc: str, turns) -> None:
            t0 = time.perf_counter()
            report = memory.retain(bank, [(doc, turns)])
            walls[case].append(time.perf_counter() - t0)
            for k, v in report.timings_s.items():
                stages[case][k].append(v)

        # one warm-up round, not counted
        memory.retain(bank, [(names[-1], current[names[-1]])])
        for r in range(reps):
            doc = names[r % len(names)]
            cases = ["unchanged", "one-turn", "new"]
            rng.shuffle(cases)
            for case in cases:
                if case == "unchanged":
                    timed(case, doc, current[doc])
                elif case == "one-turn":
                    turns = list(current[doc])
                    i = rng.randrange(len(turns))
                    turns[i] = turns[i].model_copy(update={"text": f"{turns[i].text} (edit {r})"})
                    current[doc] = turns
                    timed(case, doc, turns)
                else:
                    new_doc, new_turns = fresh[r]
                    timed(case, new_doc, new_turns)
        out: dict[str, Any] = {
            "size": size,
            "units": units,
            "entities": entities,
            "tree_nodes": len(memory.store.list_tree_nodes(bank)),
            "cases": {},
        }
        for case, xs in walls.items():
            out["cases"][case] = {
                "n": len(xs),
                "p50_ms": round(1000 * _pct(xs, 0.5), 1),
                "p95_ms": round(1000 * _pct(xs, 0.95), 1),
                "stages_p50_ms": {
                    k: round(1000 * statistics.median(v + [0.0] * (len(xs) - len(v))), 1)
                    for k, v in sorted(stages[case].items())
                },
            }
        return out
    finally:
        memory.close()


def format_size(res: dict[str, Any]) -> str:
    lines = [
        f"bank of {res['units']:,} units, {res['entities']} entities, {res['tree_nodes']} tree nodes at the end"
    ]
    cases = ["unchanged", "one-turn", "new"]
    keys = sorted({k for c in cases for k in res["cases"][c]["stages_p50_ms"]})
    lines.append(f"  {'':<22}" + "".join(f"{c:>12}" for c in cases))
    lines.append(f"  {'wall p50 ms':<22}" + "".join(f"{res['cases'][c]['p50_ms']:>12}" for c in cases))
    lines.append(f"  {'wall p95 ms':<22}" + "".join(f"{res['cases'][c]['p95_ms']:>12}" for c in cases))
    for k in keys:
        row = [res["cases"][c]["stages_p50_ms"].get(k, 0.0) for c in cases]
        if any(row):
            lines.append(f"  {'  ' + k + ' p50':<22}" + "".join(f"{x:>12}" for x in row))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000", help="bank sizes in units, comma-separated")
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    ap.add_argument("--consolidate", action="store_true", help="build the tree before the rounds")
    args = ap.parse_args(argv)

    import memlane

    _say(f"memlane from {Path(memlane.__file__).parent}")
    results = []
    for size in [int(s) for s in args.sizes.split(",") if s]:
        scratch = Path(tempfile.mkdtemp(prefix="memlane-replace-"))
        try:
            results.append(
                run_size(size, args.docs, args.turns, args.reps, scratch / "data", args.consolidate)
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if not args.json:
            print(format_size(results[-1]), flush=True)
    if args.json:
        print(json.dumps({"memlane": str(Path(memlane.__file__).parent), "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
