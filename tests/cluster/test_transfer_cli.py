"""`memlane export` and `memlane import` end to end (in-process runner, real engine, Milvus Lite)."""

from __future__ import annotations

import json

from fixtures import write_locomo_fixture
from typer.testing import CliRunner

from cluster.cli import app


def _error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_export_then_import_into_another_data_dir(tmp_path):
    runner = CliRunner()
    src, dst = str(tmp_path / "a"), str(tmp_path / "b")
    r = runner.invoke(
        app,
        [
            "retain",
            "--bank",
            "fx",
            str(write_locomo_fixture(tmp_path / "fx.json")),
            "--json",
            "--data-dir",
            src,
        ],
    )
    assert r.exit_code == 0, r.stderr
    units = json.loads(r.stdout.strip().splitlines()[-1])["units"]

    r = runner.invoke(app, ["export", "--bank", "fx", "--data-dir", src])  # to stdout
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert json.loads(lines[0])["counts"]["units"] == units
    assert "exported bank fx" in r.stderr

    out = tmp_path / "fx.jsonl"
    r = runner.invoke(app, ["export", "--bank", "fx", "--vectors", "--out", str(out), "--data-dir", src])
    assert r.exit_code == 0, r.stderr
    assert "embedding" in json.loads(out.read_text().splitlines()[-1])

    r = runner.invoke(app, ["import", str(out), "--json", "--data-dir", dst])
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["units"] == units and report["vectors"] == "imported"

    r = runner.invoke(
        app, ["import", "-", "--bank", "copy", "--data-dir", dst], input="\n".join(lines) + "\n"
    )
    assert r.exit_code == 0, r.stderr
    assert f"bank copy: imported {units} memories" in r.stdout and "re-embedded" in r.stdout

    r = runner.invoke(
        app, ["recall", "--bank", "copy", "What did Caroline research?", "--json", "--data-dir", dst]
    )
    ours = [m["unit"]["id"] for m in json.loads(r.stdout)["memories"]]
    r = runner.invoke(
        app, ["recall", "--bank", "fx", "What did Caroline research?", "--json", "--data-dir", src]
    )
    assert ours and ours == [m["unit"]["id"] for m in json.loads(r.stdout)["memories"]]


def test_bad_input_exits_2_with_one_line(tmp_path):
    runner = CliRunner()
    data = str(tmp_path / "d")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("garbage\n")
    r = runner.invoke(app, ["import", str(bad), "--data-dir", data])
    assert r.exit_code == 2
    assert _error_line(r) == "error: line 1: not JSON (Expecting value at column 1)"

    r = runner.invoke(app, ["import", str(tmp_path / "missing.jsonl"), "--data-dir", data])
    assert r.exit_code == 2 and "no such file" in _error_line(r)

    out = tmp_path / "none.jsonl"
    r = runner.invoke(app, ["export", "--bank", "nope", "--out", str(out), "--data-dir", data])
    assert r.exit_code == 2 and "unknown bank 'nope'" in _error_line(r)
    assert not out.exists()
