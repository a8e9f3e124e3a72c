"""The learned ranker's model read and scored by lightgbm and by memlane/recall/trees.py
(numpy), in the same run.

    python -m benchmarks.ranker_eval [--runs 5] [--budget mid]

Each run is a fresh interpreter that has imported numpy and the memlane package and then
times, for one way: the
import (lightgbm, which imports scikit-learn and SciPy; or trees.py), reading the model
(memlane/recall/models/ranker-<budget>.txt) and scoring 100 recorded candidate rows
(tests/memlane/data/ranker_rows.npz); then the score of those 100 rows alone, the median of
200 repeats. The two ways alternate; printed: the medians (min-max) over the runs, and the
largest difference between their scores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "tests" / "memlane" / "data" / "ranker_rows.npz"

CHILD = """
import json, sys, time
import numpy as np
import memlane  # the package's own imports (settings) are not what is measured
way, model = sys.argv[1], sys.argv[2]
X = np.load(sys.argv[3])["X"][:100]
t0 = time.perf_counter()
if way == "lightgbm":
    import lightgbm
    t1 = time.perf_counter()
    booster = lightgbm.Booster(model_file=model)
    score = lambda: booster.predict(X, num_threads=1)
else:
    from pathlib import Path
    from memlane.recall.trees import Forest
    t1 = time.perf_counter()
    forest = Forest.load(Path(model))
    score = lambda: forest.scores(X)
t2 = time.perf_counter()
s = score()
t3 = time.perf_counter()
warm = []
for _ in range(200):
    a = time.perf_counter(); score(); warm.append(time.perf_counter() - a)
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first": t3 - t0, "warm": sorted(warm)[100],
                  "scores": s.tolist()}))
"""


def run(way: str, model: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, way, str(model), str(ROWS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", default="mid")
    args = parser.parse_args()
    model = ROOT / "memlane" / "recall" / "models" / f"ranker-{args.budget}.txt"
    ways = ("lightgbm", "trees.py")
    got: dict[str, list[dict]] = {w: [] for w in ways}
    for _ in range(args.runs):
        for w in ways:
            got[w].append(run(w, model))

    def ms(w: str, key: str) -> str:
        v = [r[key] * 1000 for r in got[w]]
        return f"{statistics.median(v):8.1f} ({min(v):.1f}-{max(v):.1f})"

    print(f"{model.name}, 100 rows, {args.runs} runs; ms, median (min-max)")
    print(f"{'':10} {'import':>22} {'read model':>22} {'import+read+score':>22} {'score (warm)':>22}")
    for w in ways:
        print(f"{w:10} {ms(w, 'import'):>22} {ms(w, 'load'):>22} {ms(w, 'first'):>22} {ms(w, 'warm'):>22}")
    diff = max(abs(a - b) for a, b in zip(got[ways[0]][0]["scores"], got[ways[1]][0]["scores"]))
    print(f"largest score difference: {diff:.3g}")


if __name__ == "__main__":
    main()
