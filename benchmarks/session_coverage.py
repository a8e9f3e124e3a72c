"""How many sessions the top of each system's ranking covers, per category, from an eval run's
question log (issue 37 item 5: does a ranking that piles one session's turns on top miss the
other evidence sessions of multi-session questions?).

    PYTHONPATH=. .venv/bin/python benchmarks/session_coverage.py RUN_DIR/questions.jsonl [--k 10]

For each system and category: the mean number of distinct sessions among the first k turns,
the mean number of evidence sessions, and the share of questions whose top k turns miss an
evidence session while repeating one session three or more times (the "piled" misses).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from evals.metrics import session_of


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.log.read_text().splitlines() if line.strip()]
    stats: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)
    for row in rows:
        gold = row.get("evidence_turns") or row.get("evidence") or []
        gold_sessions = {session_of(t) for t in gold}
        if not gold_sessions:
            continue
        for system, turns in row["top_turns"].items():
            top = turns[: args.k]
            per = Counter(session_of(t) for t in top)
            missed = bool(gold_sessions - set(per))
            piled = missed and max(per.values(), default=0) >= 3
            for cat in (row["category"], "all"):
                stats[(system, cat)].append((len(per), len(gold_sessions), int(piled)))
    print(f"distinct sessions in the top {args.k} turns / evidence sessions / piled misses (share)")
    print("| system | category | n | sessions in top k | evidence sessions | piled misses |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (system, cat), xs in sorted(stats.items()):
        n = len(xs)
        mean = [sum(x[i] for x in xs) / n for i in range(3)]
        print(f"| {system} | {cat} | {n} | {mean[0]:.2f} | {mean[1]:.2f} | {mean[2]:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
