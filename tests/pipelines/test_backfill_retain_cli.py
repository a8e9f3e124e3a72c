"""Through the CLI, on a local Ray and a Milvus Lite server the backfill starts over the data
directory (as a user runs it): a file backfilled and consolidated, then retained again with
`memlane retain`, is found unchanged (0 memories written; the tree, the facts and their
supersessions as consolidation left them), and a second backfill of the unchanged file is
skipped though the bank received another document in between. Real engine, Ray and models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from derived_state import differences, snapshot
from fixtures import write_jsonl_fixture
from job_move_history import BANK, TURNS, rows
from typer.testing import CliRunner

from cluster.cli import app

pytestmark = pytest.mark.slow

# 7 sessions on 7 days of 7 weeks (tests/job_move_history.py), one profile
LEVELS = {"session": 7, "day": 7, "week": 7, "profile": 1}


def _run(data: Path, *args: str) -> dict:
    """The command's JSON output (its last line) after checking it succeeded."""
    r = CliRunner().invoke(app, [*args, "--data-dir", str(data), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def _state(data: Path) -> tuple[dict, dict[str, int]]:
    """The bank's snapshot (tests/derived_state.py) and its tree's node count per level."""
    from memlane.engine import Memory
    from memlane.records import Level
    from memlane.settings import Settings

    with Memory(Settings(data_dir=data)) as memory:
        state = snapshot(memory, BANK)
    levels = {lv.name: sum(1 for n in state["tree"].values() if n["level"] == lv.value) for lv in Level}
    return state, {k: v for k, v in levels.items() if v}


def _facts(state: dict, words: str) -> tuple[str | None, set[tuple[str, str, bool]]]:
    """The memory saying ``words``: its superseded_by and its facts (predicate, value,
    superseded)."""
    (unit,) = [u for u in state["units"].values() if words in u["text"]]
    return unit["superseded_by"], {
        (f["predicate"], f["object"], bool(f.get("superseded_by"))) for f in unit["metadata"].get("facts", [])
    }


def test_retain_of_the_backfilled_and_consolidated_file_writes_nothing(tmp_path):
    src = write_jsonl_fixture(tmp_path / "dana.jsonl", rows())
    data = tmp_path / "data"
    summary = _run(data, "backfill", str(src), "--consolidate", "--workers", "1")
    assert (summary["retained_banks"], summary["memories"]) == (1, TURNS)
    assert summary["consolidate"]["nodes"] == LEVELS
    before, levels = _state(data)
    assert levels == LEVELS
    analyst = next(i for i, u in before["units"].items() if "financial analyst" in u["text"])
    # the new job superseded both facts of the first one; the turn itself stays
    assert _facts(before, "junior accountant") == (
        analyst,
        {("job_title", "junior accountant", True), ("works_at", "Fenwick & Hale", True)},
    )

    report = _run(data, "retain", "--bank", BANK, str(src))

    assert (report["units"], report["unchanged"], report["removed"]) == (0, TURNS, 0)
    assert report["stale"] == {"tree_sessions": 0, "facts": 0}
    after, levels = _state(data)
    assert levels == LEVELS
    assert _facts(after, "junior accountant") == _facts(before, "junior accountant")
    assert differences(after, before) == []


def test_second_backfill_skips_the_unchanged_file_after_another_write_to_the_bank(tmp_path):
    src = write_jsonl_fixture(tmp_path / "dana.jsonl", rows())
    data = tmp_path / "data"
    first = _run(data, "backfill", str(src), "--workers", "1")
    assert (first["retained_banks"], first["memories"]) == (1, TURNS)
    other = write_jsonl_fixture(
        tmp_path / "other.jsonl",
        [
            {
                "session_id": "o1",
                "speaker": "Dana",
                "timestamp": "2025-05-01T10:00:00+00:00",
                "text": "I bought a green bicycle for the commute.",
            }
        ],
    )
    assert _run(data, "retain", "--bank", BANK, str(other))["units"] == 1  # document "other"
    before, _ = _state(data)

    again = _run(data, "backfill", str(src), "--workers", "1")

    assert (again["retained_banks"], again["skipped_banks"], again["memories"]) == (0, 1, TURNS)
    after, _ = _state(data)
    assert len(after["units"]) == TURNS + 1
    assert differences(after, before) == []
