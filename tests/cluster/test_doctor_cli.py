"""``memlane doctor`` end to end (in-process runner, real engine and Milvus Lite)."""

from __future__ import annotations

import json

from fixtures import write_jsonl_fixture
from typer.testing import CliRunner

from cluster.cli import app

ROWS = [
    {
        "speaker": "Ana",
        "text": "I adopted a beagle called Pixel.",
        "timestamp": "2025-03-10T09:00:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ben",
        "text": "Ben lives in Porto.",
        "timestamp": "2025-03-10T09:01:00Z",
        "session_id": "s1",
    },
]


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_doctor_passes_a_clean_store_and_fails_a_corrupted_bank(tmp_path):
    from memlane.engine import Memory
    from memlane.records import Link, LinkType
    from memlane.settings import Settings

    runner = CliRunner()
    data = str(tmp_path / "data")
    src = write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)
    for bank in ("ana", "ben"):
        assert runner.invoke(app, ["retain", str(src), "--bank", bank, "--data-dir", data]).exit_code == 0

    ok = runner.invoke(app, ["doctor", "--all", "--json", "--data-dir", data])
    assert ok.exit_code == 0, ok.output
    report = json.loads(ok.stdout)
    assert report["ok"] is True and [b["bank_id"] for b in report["banks"]] == ["ana", "ben"]
    assert all(b["counts"]["units"] == 2 and b["findings"] == [] for b in report["banks"])

    with Memory(Settings(data_dir=data)) as memory:  # a link to a memory that is gone
        unit = next(iter(memory.store.iter_units("ben", with_embedding=True)))[0]
        broken = unit.model_copy(update={"links": [Link(target_id="deleted-long-ago", type=LinkType.causes)]})
        memory.store.upsert_units("ben", [broken])
        memory.store.bump_revision("ben")

    bad = runner.invoke(app, ["doctor", "--all", "--data-dir", data])
    assert bad.exit_code == 1
    lines = bad.stdout.splitlines()
    assert lines[0].startswith("bank ana: ok")
    assert lines[1].startswith("bank ben: 1 violated")
    assert lines[2].startswith("  error links: 1 memory links to a memory that does not exist")
    assert unit.id in lines[2]
    only_ana = runner.invoke(app, ["doctor", "--bank", "ana", "--data-dir", data])
    assert only_ana.exit_code == 0 and "ben" not in only_ana.stdout


def test_doctor_bad_input_exits_2_with_one_line(tmp_path):
    runner = CliRunner()
    data = str(tmp_path / "data")
    neither = runner.invoke(app, ["doctor", "--data-dir", data])
    assert neither.exit_code == 2 and "--bank" in _one_line(neither)
    absent = runner.invoke(app, ["doctor", "--bank", "x", "--data-dir", data])
    assert absent.exit_code == 2 and "no store" in _one_line(absent)
    src = write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)
    assert runner.invoke(app, ["retain", str(src), "--bank", "ana", "--data-dir", data]).exit_code == 0
    unknown = runner.invoke(app, ["doctor", "--bank", "ana", "--bank", "zed", "--data-dir", data])
    assert unknown.exit_code == 2 and "unknown bank 'zed'" in _one_line(unknown)
    assert unknown.stdout == ""  # nothing checked before the bad name was found
