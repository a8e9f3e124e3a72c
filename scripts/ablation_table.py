"""Per-category ablation table of one eval run: system A against system B (paired bootstrap
95 % interval of the difference, :func:`evals.ablation.tree_ablation`), read from the run's
``questions.jsonl`` and ``report.json``. The run report prints this table for the tree
(``memlane`` - ``flat``) only; this prints it for any two systems the run scored, e.g.
multi-hop decomposition against the same recall without it:

    python scripts/ablation_table.py RUN_DIR --b nodecomp --split

``--split`` also counts, per category, the questions the rules decomposition splits.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evals.ablation import ablation_lines, tree_ablation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--a", default="memlane")
    ap.add_argument("--b", default="nodecomp")
    ap.add_argument("--split", action="store_true", help="count the questions the rules split")
    args = ap.parse_args()
    report = json.loads((args.run_dir / "report.json").read_text(encoding="utf-8"))
    with open(args.run_dir / "questions.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    table = tree_ablation(rows, report["headline_metrics"], a=args.a, b=args.b)
    if table is None:
        raise SystemExit(f"the run did not score {args.b!r}")
    lines = ablation_lines(table, a=args.a, b=args.b)
    print(f"{args.a} - {args.b}, paired bootstrap 95% CI;{lines[0].split(';', 1)[1]}")
    print("\n".join(lines[1:]))
    if args.split:
        from evals.summary import ALL
        from memlane.recall.decompose import decompose_rules

        split = [r for r in rows if decompose_rules(r["question"]).subqueries]
        print("questions the rules decomposition splits:")
        for cat in table:
            n = sum(1 for r in split if cat == ALL or r["category"] == cat)
            print(f"  {cat:<28}{n:>5} of {table[cat]['n']}")


if __name__ == "__main__":
    main()
