"""``memlane config show --data-dir D``: the option every command takes, shown as the data
directory with its origin, over MEMLANE_DATA_DIR (in-process CLI runner, no engine opened)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cluster.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    import os

    for name in [n for n in os.environ if n.startswith("MEMLANE_")]:
        monkeypatch.delenv(name)


def test_config_show_takes_data_dir_and_says_it_came_from_the_option(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path / "from-env"))
    wanted = tmp_path / "from-option"
    result = runner.invoke(app, ["config", "show", "--data-dir", str(wanted), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["settings"]["data_dir"] == str(wanted)
    assert report["origins"]["data_dir"] == "--data-dir"
    text = runner.invoke(app, ["config", "show", "--for", "serve", "--data-dir", str(wanted)])
    assert text.exit_code == 0, text.output
    assert f"data_dir = {json.dumps(str(wanted))}  <- --data-dir" in text.stdout.splitlines()
    assert not wanted.exists()  # showing the settings creates nothing


def test_without_the_option_the_environments_data_dir_is_shown(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path / "from-env"))
    result = runner.invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["settings"]["data_dir"] == str(tmp_path / "from-env")
    assert report["origins"]["data_dir"] == "env"
