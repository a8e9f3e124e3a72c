"""The abstention calibration (evals/abstention_calibrate.py): a fixed split, margins derived
from the calibration half alone, the held-out half reported. Synthetic signal rows; no recall."""

from __future__ import annotations

import random

from evals.abstention_calibrate import calibrate, half, report


def _row(i: int, category: int, gap: float) -> dict:
    named = 0.0 if gap > 0 else 0.5
    return {
        "dataset": "locomo",
        "sample": f"conv-{i % 10}",
        "question": f"question {i}",
        "category": category,
        "signals": {
            "unknown_entities": [],
            "names": ["Ana"],
            "support_any": named + gap,
            "support_named": named,
            "gap": gap,
            "top_cosine": 0.7,
        },
    }


def _rows(n: int = 800, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        if i % 4 == 0:  # adversarial: mostly a wide gap
            rows.append(_row(i, 5, round(rng.uniform(0.1, 0.9), 2)))
        else:  # answerable: mostly no gap, a few wide ones
            rows.append(_row(i, 1 + i % 4, round(rng.uniform(0.3, 0.6), 2) if rng.random() < 0.08 else 0.0))
    return rows


def test_the_split_is_fixed_and_covers_both_halves():
    rows = _rows()
    halves = [half(r) for r in rows]
    assert halves == [half(dict(r)) for r in rows]  # a function of sample and question only
    share = halves.count("calibration") / len(rows)
    assert 0.4 < share < 0.6


def test_held_out_rows_do_not_move_the_derived_point():
    rows = _rows()
    before = calibrate(rows)
    flipped = [
        r
        if half(r) == "calibration"
        else {**r, "signals": {**r["signals"], "gap": 1.0, "support_named": 0.0}}
        for r in rows
    ]
    after = calibrate(flipped)
    assert after["point"] == before["point"] and after["limit"] == before["limit"]
    assert after["calibration_rows"] == sum(1 for r in rows if half(r) == "calibration")


def test_the_limit_kept_holds_the_target_across_folds():
    out = calibrate(_rows(), target=0.05)
    assert out["cross_fold_false"][out["limit"]] <= 0.05
    assert all(v > 0.05 for k, v in out["cross_fold_false"].items() if k > out["limit"])
    assert calibrate(_rows(), cosines=[0.0])["point"].abstain_min_cosine == 0.0
    text = report(_rows())
    assert "held-out half (reported once)" in text and f"abstain_gap={out['point'].abstain_gap}" in text
