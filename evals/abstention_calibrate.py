"""Abstention margins derived on a calibration half only, reported once on the other half
(issue 24 item 7; the rule: memlane/recall/abstain.py, the study: :mod:`evals.abstention`).

The shipped margins were calibrated on the even LoCoMo conversations at "categories 1-4
abstain <= 3.5 %", a limit chosen after seeing two held-out figures. Here nothing is chosen
after looking at the held-out half:

1. **Split, fixed before any figure**: a LoCoMo question belongs to the calibration half when
   the first byte of ``sha256(sample id + "\\x1f" + question)`` is even, else to the held-out
   half; a second byte splits the calibration half into two folds the same way. Questions of
   every conversation land in both halves.
2. **Margin, on the calibration half only**: for each limit ``L`` in :data:`LIMITS`, the grid
   point of :func:`evals.abstention.sweep`'s grid (highest category-5 abstain rate with
   categories 1-4 at most ``L``, same tie-breaks) is chosen on one fold and its categories 1-4
   abstain rate measured on the other, both ways round. The limit kept is the largest whose
   mean cross-fold rate stays within the target (``--target``, 5 %: issue 13's).
3. **Point**: the grid point at that limit on the whole calibration half.
4. **Held-out**: that point's figures on the held-out half, printed once, then on all; and on
   LongMemEval's rows when given (never used to choose).

    python -m evals.abstention_calibrate --from-signals rows.jsonl   # rows of evals.abstention --signals
    python -m evals.abstention_calibrate locomo10.json --data-dir DIR [--lme FILE --lme-data-dir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np

from evals.abstention import (
    COSINES,
    GAPS,
    NAMED_MAX,
    _fmt,
    collect_lme,
    collect_locomo,
    lme_lines,
    point,
    rates,
)
from memlane.recall.abstain import decide

TARGET = 0.05
LIMITS = (0.02, 0.025, 0.03, 0.035, 0.04, 0.045, 0.05)


def grid_points(cosines: Sequence[float] = COSINES) -> list[SimpleNamespace]:
    """:func:`evals.abstention.sweep`'s grid, in its order; ``cosines`` narrows the floors tried
    (``[0.0]``: no floor, for an embedder whose cosine scale the calibration did not see)."""
    return [
        point(gap, named, cos, unknown)
        for unknown, gap, named, cos in itertools.product(("all", "any", "off"), GAPS, NAMED_MAX, cosines)
    ]


def _digest(row: dict[str, Any]) -> bytes:
    return hashlib.sha256(f"{row['sample']}\x1f{row['question']}".encode()).digest()


def half(row: dict[str, Any]) -> str:
    """``"calibration"`` or ``"held-out"``: the fixed rule (first hash byte even or odd)."""
    return "calibration" if _digest(row)[0] % 2 == 0 else "held-out"


def fold(row: dict[str, Any]) -> int:
    """0 or 1: the calibration half's inner folds (second hash byte)."""
    return _digest(row)[1] % 2


class Grid:
    """Every grid point's verdict on every row, computed once (``flags[point, row]``)."""

    def __init__(self, rows: Sequence[dict[str, Any]], points: Sequence[SimpleNamespace]) -> None:
        self.points = list(points)
        self.flags = np.array([[decide(r["signals"], p)[0] for r in rows] for p in self.points], dtype=bool)
        self.cat5 = np.array([r["category"] == 5 for r in rows])
        self.answerable = np.array([r["category"] in (1, 2, 3, 4) for r in rows])

    def rates(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per grid point: category-5 abstain rate and categories 1-4 abstain rate on ``mask``."""
        pos, neg = mask & self.cat5, mask & self.answerable
        return self.flags[:, pos].mean(axis=1), self.flags[:, neg].mean(axis=1)

    def best(self, mask: np.ndarray, limit: float) -> int:
        """The index of :func:`evals.abstention.sweep`'s choice on the rows of ``mask``."""
        recall, false = self.rates(mask)
        best, key = None, None
        for i, p in enumerate(self.points):
            if false[i] > limit:
                continue
            k = (recall[i], -false[i], p.abstain_gap, -p.abstain_named_max, -p.abstain_min_cosine)
            if key is None or k > key:
                best, key = i, k
        if best is None:
            raise ValueError(f"no grid point keeps categories 1-4 at or under {limit:.1%}")
        return best


def calibrate(
    rows: Sequence[dict[str, Any]], target: float = TARGET, cosines: Sequence[float] = COSINES
) -> dict[str, Any]:
    """Steps 2 and 3 on the calibration rows of ``rows`` (LoCoMo): the cross-fold false rate
    per limit, the limit kept and the point chosen with it. Reads no held-out row."""
    cal = [r for r in rows if half(r) == "calibration"]
    grid = Grid(cal, grid_points(cosines))
    folds = np.array([fold(r) for r in cal])
    per_limit = {}
    for limit in LIMITS:
        outside = []
        for f in (0, 1):
            i = grid.best(folds == f, limit)
            outside.append(float(grid.rates(folds != f)[1][i]))
        per_limit[limit] = sum(outside) / 2
    within = [limit for limit, false in per_limit.items() if false <= target]
    if not within:
        raise ValueError(f"no limit keeps the cross-fold categories 1-4 rate within {target:.1%}")
    limit = max(within)
    chosen = grid.points[grid.best(np.ones(len(cal), dtype=bool), limit)]
    return {"cross_fold_false": per_limit, "limit": limit, "point": chosen, "calibration_rows": len(cal)}


def report(rows: Sequence[dict[str, Any]], target: float = TARGET, cosines: Sequence[float] = COSINES) -> str:
    """The calibration, then the held-out half's figures (the one look at them)."""
    loco = [r for r in rows if r["dataset"] == "locomo"]
    out = calibrate(loco, target, cosines)
    p: SimpleNamespace = out["point"]
    flag = lambda r: decide(r["signals"], p)[0]  # noqa: E731 - the chosen point, on the signals
    held = [r for r in loco if half(r) == "held-out"]
    lines = [
        f"LoCoMo: {len(loco)} questions, {out['calibration_rows']} calibration / {len(held)} held-out (sha256 rule)",
        "cross-fold categories 1-4 abstain rate per calibration limit: "
        + ", ".join(f"{k:.1%} -> {v:.3f}" for k, v in out["cross_fold_false"].items()),
        f"limit kept (largest with cross-fold rate <= {target:.1%}): {out['limit']:.1%}",
        f"derived: abstain_gap={p.abstain_gap} abstain_named_max={p.abstain_named_max} "
        f"abstain_min_cosine={p.abstain_min_cosine} abstain_unknown_entities={p.abstain_unknown_entities}",
        _fmt("calibration half", rates([r for r in loco if half(r) == "calibration"], flag)),
        _fmt("held-out half (reported once)", rates(held, flag)),
        _fmt("all", rates(loco, flag)),
    ]
    lines += lme_lines([r for r in rows if r["dataset"] == "longmemeval"], flag, "the derived point")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m evals.abstention_calibrate", description=__doc__.split("\n")[0]
    )
    ap.add_argument("locomo", type=Path, nargs="?")
    ap.add_argument("--data-dir", type=Path, help="The LoCoMo banks (a Memlane data dir).")
    ap.add_argument("--lme", type=Path, help="A LongMemEval file whose banks are in --lme-data-dir.")
    ap.add_argument("--lme-data-dir", type=Path)
    ap.add_argument("--from-signals", type=Path, help="Rows written by python -m evals.abstention --signals.")
    ap.add_argument(
        "--cosine",
        dest="cosines",
        type=float,
        action="append",
        help="Floors tried (repeatable; default the grid's).",
    )
    ap.add_argument(
        "--target", type=float, default=TARGET, help="Categories 1-4 abstain rate to stay within."
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.from_signals:
        rows = [json.loads(line) for line in args.from_signals.read_text().splitlines() if line.strip()]
    elif args.locomo is not None and args.data_dir is not None:
        rows = collect_locomo(args.locomo, args.data_dir)
        if args.lme is not None:
            rows += collect_lme(args.lme, args.lme_data_dir or args.data_dir)
    else:
        ap.error("give --from-signals, or the LoCoMo file and --data-dir")
    print(report(rows, args.target, args.cosines or COSINES))
    print(f"wall {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
