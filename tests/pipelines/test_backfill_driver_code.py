"""A backfill's Ray workers run the memlane its driver runs, whatever directory it is run in.

Ray puts the driver's working directory first on its workers' path; a copy of the sources there
(an older checkout) shadowed the installed memlane in the workers only, and `memlane backfill`
stored that copy's dating while `memlane retain` of the same file stored today's
(actors/driver_code.py). Here the working directory holds a copy of memlane whose turns date
only their first expression (the dating before the events): both commands, run through the CLI
from that directory, must store the same memories. Real engine, models, Ray and Milvus Lite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixtures import write_jsonl_fixture
from typer.testing import CliRunner

import memlane
from actors.driver_code import shadowing_paths
from cluster.cli import app

BANK = "odile"
TURNS = [
    ("s1", "2026-02-03T20:12:30+00:00", "Odile", "There's an opening at Vessel Packaging in Nantes."),
    (
        "s2",
        "2026-04-02T18:30:00+00:00",
        "Odile",
        "Signed the contract with Vessel today. First day is 4 May, I handed in my notice at "
        "Halden this afternoon.",
    ),
    ("s2", "2026-04-02T18:31:00+00:00", "Assistant", "That's a big step, well done."),
]
# What the copy's turn_events returns: the first dated event only (the old rule)
OLD_DATING = """

_all_events = turn_events


def turn_events(text, said_at):
    return TurnEvents(_all_events(text, said_at).spans[:1])
"""


def _older_checkout(root: Path) -> Path:
    """``root`` holding a copy of memlane whose turns date their first expression only."""
    shutil.copytree(
        Path(memlane.__file__).parent, root / "memlane", ignore=shutil.ignore_patterns("__pycache__")
    )
    with open(root / "memlane" / "temporal" / "events.py", "a", encoding="utf-8") as f:
        f.write(OLD_DATING)
    return root


def test_a_copy_of_the_packages_in_the_working_directory_shadows_them(tmp_path):
    """Only a directory with another copy of a project package than this process's is one."""
    repo = Path(memlane.__file__).resolve().parents[1]
    assert shadowing_paths(repo) == []  # this process's own copy
    assert shadowing_paths(tmp_path) == []  # no copy at all
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "__init__.py").write_text("")
    assert shadowing_paths(tmp_path) == [str(tmp_path)]


def _memories(data: Path) -> dict[str, tuple]:
    """Each memory of the bank by id: its text, occurrence and metadata (the dating's output)."""
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    store = MilvusStore(Settings(data_dir=data), dim=384)
    try:
        units = [u for batch in store.iter_units(BANK) for u in batch]
    finally:
        store.close()
    return {
        u.id: (u.text, u.occurred_start, u.occurred_end, json.dumps(u.metadata, sort_keys=True))
        for u in units
    }


@pytest.mark.slow
def test_backfill_from_an_older_checkout_stores_what_retain_stores(tmp_path, monkeypatch):
    rows = [
        {"bank_id": BANK, "session_id": s, "timestamp": ts, "speaker": who, "text": text}
        for s, ts, who, text in TURNS
    ]
    src = write_jsonl_fixture(tmp_path / "odile.jsonl", rows)
    monkeypatch.chdir(_older_checkout(tmp_path / "checkout"))
    runner = CliRunner()
    retained = runner.invoke(app, ["retain", str(src), "--bank", BANK, "--data-dir", str(tmp_path / "d1")])
    assert retained.exit_code == 0, retained.output
    backfilled = runner.invoke(
        app, ["backfill", str(src), "--data-dir", str(tmp_path / "d2"), "--workers", "1", "--json"]
    )
    assert backfilled.exit_code == 0, backfilled.output

    by_retain, by_backfill = _memories(tmp_path / "d1"), _memories(tmp_path / "d2")
    assert len(by_retain) == len(TURNS)
    # the turn of two events: both, with the occurrence covering them, as retain in process has it
    (text, start, end, meta) = next(v for v in by_retain.values() if "First day" in v[0])
    assert (start.date().isoformat(), end.date().isoformat()) == ("2026-04-02", "2026-05-04")
    assert json.loads(meta)["events"] == [["2026-04-02", "2026-04-02"], ["2026-05-04", "2026-05-04"]]
    assert by_backfill == by_retain
