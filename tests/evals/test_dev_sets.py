"""The labelled date sets (evals/dates/) stay apart from what they measure: no sentence of theirs
is written into the date rules (memlane/temporal/) or the rules' tests, and the events set's
calibration/held split by turn is the one the rules were tuned on (calibration) and run once on
(held)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from evals.date_events import EVENTS_FILE, EVENTS_SPLIT_SEED, load_rows, split_turns, turn_kind

ROOT = Path(__file__).resolve().parents[2]
SETS = sorted((ROOT / "evals" / "dates").glob("*.jsonl"))
GUARDED = sorted(
    [
        *(ROOT / "memlane" / "temporal").glob("*.py"),
        *(ROOT / "tests" / "memlane").glob("test_temporal*.py"),
        ROOT / "tests" / "evals" / "test_eval_dates.py",
    ]
)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _sentences(text: str) -> list[str]:
    """The turn, and each of its sentences of six words or more (shorter ones, "wish me luck",
    can be any text's)."""
    parts = [p for p in re.split(r"(?<=[.!?])\s+|\s+-\s+", text) if len(p.split()) >= 6]
    return [_norm(p) for p in {text, *parts}]


def test_the_sets_are_there():
    names = {p.name for p in SETS}
    assert {"calibration.jsonl", "held.jsonl", "events.jsonl"} <= names
    assert len(GUARDED) >= 10  # the rules' modules and their tests were found


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.name)
def test_no_sentence_of_a_set_is_in_the_rules_or_their_tests(path):
    guarded = {p.relative_to(ROOT): _norm(p.read_text(encoding="utf-8")) for p in GUARDED}
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        for sentence in _sentences(row["text"]):
            found += [f"{row['id']} in {where}" for where, code in guarded.items() if sentence in code]
    assert found == []


def test_the_events_split_is_by_turn_stratified_and_fixed():
    rows = load_rows([EVENTS_FILE])
    calibration, held = split_turns(rows, EVENTS_SPLIT_SEED)
    assert sorted(r["id"] for r in calibration + held) == sorted(r["id"] for r in rows)

    def turns(half):
        out: dict[tuple[str, str], list[dict]] = {}
        for r in half:
            out.setdefault((r["said_at"], r["text"]), []).append(r)
        return out

    cal_turns, held_turns = turns(calibration), turns(held)
    assert not set(cal_turns) & set(held_turns)  # every line of a turn on one side
    cal_kinds = Counter(turn_kind(v) for v in cal_turns.values())
    held_kinds = Counter(turn_kind(v) for v in held_turns.values())
    # EVENTS.md: 30 deictic turns, 15 multi-event turns, 21 habit turns; calibration rounds down
    assert (cal_kinds, held_kinds) == (
        Counter(deictic=15, multi=7, habit=10),
        Counter(deictic=15, multi=8, habit=11),
    )
    # the held half the rules were run on once, after tuning on the other
    assert [r["id"] for r in held][:8] == [
        "E-001",
        "E-003",
        "E-004",
        "E-005",
        "E-010",
        "E-011",
        "E-020",
        "E-021",
    ]
    assert len(held) == 46 and held[-1]["id"] == "E-093"
