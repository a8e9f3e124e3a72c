"""Small banks: does the top memory answer when the bank holds only a few turns, as a new user's
bank does in their first turns? The answer set's questions (:mod:`evals.answers_data`), each
asked of a bank of its own, P@1 (the top memory states the answer) per source, kind and half,
for each ordering in :data:`ORDERINGS`.

The construction, fixed before any result was read:

* **bank**: a run of ``n`` consecutive turns of the question's history, among the turns said by
  the time it is asked, holding its answer turn (the last of its expected turns said by then)
  at place ``k`` of the run (shifted to stay within the turns said). ``n`` (4 to 7) and ``k``
  (0 to n - 1) come from the SHA-1 of the question's id, so the answer is sometimes the run's
  first turn, sometimes its last, and the assistant's question before a short reply is often
  in the bank with it. Recall's reference time is the question's ``asked_at``; budget mid; the
  bank is consolidated as the answer eval's are.
* **halves**: by history, the SHA-1 of ``<source>/<history id>``: even, calibration; odd, held.
  Orderings are chosen on calibration; held is read once.
* **model**: each source is ranked by a model trained without it
  (``--ranker-models DIR``: ``DIR/<source>/ranker-mid.txt``, leave-one-source-out).

``python -m evals.small_banks --ranker-models DIR --data-dir D --out rows.jsonl [SOURCE ...]``
writes one row per question and ordering (banks already written are reused) and prints the
calibration half's tables; ``--tables --half held`` prints a half's from the rows alone. The
figures are at memlane/recall/learned.py ``MIN_CANDIDATES``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import defaultdict
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Sequence

from evals.answers_data import AnswerHistory, AnswerQuestion, load_answer_set, source_answer_paths
from evals.harness import consolidate, result_turns
from memlane.records import Turn

SOURCES = ("team", "friends", "assistant")
SIZES = (4, 5, 6, 7)
# Each ordering: the learned ranker's floor it runs with (memlane/recall/learned.py
# MIN_CANDIDATES; a recall of fewer candidates keeps the fused order).
ORDERINGS = {
    "fused": 8,  # before: a bank of fewer than 8 candidates kept the fused order
    "learned": 1,  # the model whatever the count
    "floor 3": 3,  # the model from 3 candidates: what ships
}


def _draw(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big")


def half(source: str, history_id: str) -> str:
    return "calibration" if _draw(f"{source}/{history_id}") % 2 == 0 else "held"


def small_bank(history: AnswerHistory, q: AnswerQuestion) -> list[Turn]:
    """The run of turns the question's bank holds (the module's construction)."""
    said = history.turns_before(q.asked_at)
    answer = max(i for i, t in enumerate(said) if t.turn_id in q.expected)
    draw = _draw(q.id)
    n = min(SIZES[draw % len(SIZES)], len(said))
    k = (draw // len(SIZES)) % n
    start = max(0, min(answer - k, len(said) - n))
    return said[start : start + n]


@contextmanager
def ordering(name: str) -> Iterator[None]:
    from memlane.recall import learned

    saved = learned.MIN_CANDIDATES
    learned.MIN_CANDIDATES = ORDERINGS[name]
    try:
        yield
    finally:
        learned.MIN_CANDIDATES = saved


def run_source(memory, source: str, models: Path, out) -> list[dict[str, Any]]:
    """Build each question's bank of ``source`` and rank it with every ordering."""
    memory.settings.recall.ranker = "learned"
    memory.settings.recall.ranker_models = models / source
    rows = []
    for path in source_answer_paths(source):
        for h in load_answer_set(path):
            for q in h.questions:
                turns = small_bank(h, q)
                bank = f"small-{source}-{q.id}"
                if not memory.store.count_units(bank):
                    memory.retain(bank, [(h.id, turns)])
                consolidate(memory, bank)
                speaker = {t.turn_id: t.speaker for t in turns}
                for name in ORDERINGS:
                    with ordering(name):
                        result = memory.recall(
                            bank, q.question, reference_time=q.asked_at, budget="mid", max_tokens=8192
                        )
                    ranked = result_turns(result)
                    top = ranked[0] if ranked else None
                    row = {
                        "source": source,
                        "half": half(source, h.id),
                        "history": h.id,
                        "id": q.id,
                        "kind": q.kind,
                        "ordering": name,
                        "turns": len(turns),
                        "memories": len(result.memories),
                        "p@1": float(top in q.expected),
                        "top": top,
                        "top_speaker": speaker.get(top or ""),
                        "top_trap": q.traps.get(top or ""),
                    }
                    rows.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
    return rows


def tables(rows: Sequence[dict[str, Any]]) -> str:
    """P@1 (n) per ordering: by source and half, then by kind and half (all sources)."""
    names = list(dict.fromkeys(r["ordering"] for r in rows))
    cells: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in rows:
        for group in (r["source"], f"kind:{r['kind']}", "all"):
            cells[(group, r["half"], r["ordering"])].append(r["p@1"])
    groups = sorted({g for g, _, _ in cells}, key=lambda g: (g.startswith("kind:"), g != "all", g))
    head = f"{'group':<22}{'half':<12}{'n':>5}" + "".join(f"{n:>22}" for n in names)
    lines = [head]
    for g in groups:
        for hv in ("calibration", "held"):
            got = [cells.get((g, hv, n), []) for n in names]
            if not got[0]:
                continue
            lines.append(
                f"{g:<22}{hv:<12}{len(got[0]):>5}"
                + "".join(f"{sum(v) / len(v):>15.3f} ({int(sum(v)):>3})" if v else f"{'-':>22}" for v in got)
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    from memlane.engine import Memory
    from memlane.settings import Settings

    p = argparse.ArgumentParser(description="Small banks: P@1 per source, kind and half.")
    p.add_argument("sources", nargs="*", default=list(SOURCES))
    p.add_argument("--ranker-models", type=Path, help="DIR/<source>/ranker-mid.txt")
    p.add_argument("--data-dir", type=Path, help="where the small banks are written")
    p.add_argument("--out", type=Path, required=True, help="the rows (JSON Lines, appended to)")
    p.add_argument("--tables", action="store_true", help="print the tables of --out's rows only")
    p.add_argument("--half", choices=("calibration", "held", "both"), default="calibration")
    a = p.parse_args(argv)
    if not a.tables:
        if a.ranker_models is None or a.data_dir is None:
            p.error("--ranker-models and --data-dir are needed to run (or --tables)")
        memory = Memory(Settings(data_dir=a.data_dir))
        started = datetime.now()
        try:
            with a.out.open("a") as out:
                for source in a.sources:
                    run_source(memory, source, a.ranker_models, out)
                    print(f"{source}: {datetime.now() - started}", flush=True)
        finally:
            memory.close()
    rows = [json.loads(x) for x in a.out.read_text().splitlines() if x.strip()]
    print(tables([r for r in rows if a.half in ("both", r["half"])]))


if __name__ == "__main__":
    main()
