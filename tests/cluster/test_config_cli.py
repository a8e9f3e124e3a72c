"""``memlane config show``: the effective settings of each entry point, the entry point's changes
marked, secrets masked, the JSON parseable, a bad ``--for`` one line with exit 2, and the docs'
table generated from the one table of changes (in-process CLI runner, no engine opened)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from cluster.cli import app
from memlane.settings import SECRETS_FILE_VAR

runner = CliRunner()


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    """No MEMLANE_* setting of the machine running the tests leaks into what is shown."""
    import os

    for name in [n for n in os.environ if n.startswith("MEMLANE_")]:
        monkeypatch.delenv(name)


def _show(*args: str):
    return runner.invoke(app, ["config", "show", *args])


def _json(*args: str) -> dict:
    result = _show(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _line(result, path: str) -> str:
    """The text output's line of the setting ``path`` (its field, under its area's header)."""
    area, field = path.split(".")
    lines = result.stdout.splitlines()
    start = lines.index(f"[{area}]")
    return next(x for x in lines[start + 1 :] if x.strip().startswith(f"{field} = "))


def test_serve_shows_the_tree_on_and_marks_it_as_the_entry_points():
    result = _show("--for", "serve")
    assert result.exit_code == 0, result.output
    assert _line(result, "background.tree") == "  tree = true  <- * entry point (serve)"
    assert _line(result, "recall.cold_bank") == '  cold_bank = "store"  <- * entry point (serve)'
    assert _line(result, "recall.rrf_k") == "  rrf_k = 60"  # a default, unmarked
    report = _json("--for", "serve")
    assert report["settings"]["background"]["tree"] is True
    assert report["origins"]["background.tree"] == "entry point (serve)"
    assert report["origins"]["recall.rrf_k"] == "default"
    # Without --for: the engine's own default, nothing marked.
    plain = _json()
    assert plain["settings"]["background"]["tree"] is False and plain["changes"] == []
    assert "entry point" not in json.dumps(plain["origins"])


def test_serve_keeps_the_users_tree_setting_and_says_where_it_came_from(monkeypatch):
    monkeypatch.setenv("MEMLANE_BACKGROUND__TREE", "false")
    report = _json("--for", "serve")
    assert report["settings"]["background"]["tree"] is False
    assert report["origins"]["background.tree"] == "env"
    (tree,) = [c for c in report["changes"] if c["setting"] == "background.tree"]
    assert tree["applied"] is False and tree["skipped"] == "the user's value is kept"
    assert _line(_show("--for", "serve"), "background.tree") == "  tree = false  <- env"


def test_backfill_shows_the_tree_off_even_when_the_user_turned_it_on(monkeypatch):
    monkeypatch.setenv("MEMLANE_BACKGROUND__TREE", "true")
    assert _json()["settings"]["background"]["tree"] is True  # the library takes the user's
    report = _json("--for", "backfill")
    assert report["settings"]["background"]["tree"] is False
    assert report["origins"]["background.tree"] == "entry point (backfill)"
    assert (
        _line(_show("--for", "backfill"), "background.tree") == "  tree = false  <- * entry point (backfill)"
    )


def test_engine_starts_from_the_jobs_settings_and_sets_the_actors_threads():
    report = _json("--for", "engine")
    assert report["settings"]["background"]["tree"] is False
    assert report["settings"]["models"]["torch_threads"] == 1  # one CPU outside an actor
    assert report["origins"]["models.torch_threads"] == "entry point (engine)"
    device = [c for c in report["changes"] if c["setting"] == "models.embedder_device"][0]
    assert device["applied"] is False and report["settings"]["models"]["embedder_device"] == "cpu"


@pytest.mark.parametrize("bad", ["nope", "Serve", ""])
def test_bad_for_exits_2_with_one_line(bad):
    result = _show("--for", bad)
    assert result.exit_code == 2
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert lines == [f"error: --for must be one of serve, backfill, engine, not {bad!r}"]
    assert result.stdout == ""


def test_secrets_are_masked_in_text_and_json(monkeypatch, tmp_path):
    secrets = tmp_path / "secrets.env"
    secrets.write_text(
        'MEMLANE_SERVE__API_KEYS={"key-from-file": "*"}\nMEMLANE_LLM__API_KEY=sk-file-canary\n'
    )
    monkeypatch.setenv(SECRETS_FILE_VAR, str(secrets))
    monkeypatch.setenv("MEMLANE_LLM__REFLECT__API_KEY", "sk-env-canary")
    monkeypatch.setenv("MEMLANE_STORE__MILVUS_TOKEN", "root:token-canary")
    for args in (["--for", "serve"], ["--for", "serve", "--json"], ["--json"]):
        result = _show(*args)
        assert result.exit_code == 0, result.output
        assert not re.search("canary|key-from-file", result.stdout), args
    report = _json("--for", "serve")
    assert report["settings"]["serve"]["api_keys"] == "***"
    assert report["settings"]["llm"]["api_key"] == "***"
    assert report["settings"]["llm"]["reflect"]["api_key"] == "***"
    assert report["settings"]["llm"]["qa"]["api_key"] is None  # unset: nothing to hide
    assert report["settings"]["store"]["milvus_token"] == "***"
    assert report["origins"]["llm.api_key"] == "file" and report["origins"]["llm.reflect.api_key"] == "env"


def test_a_removed_setting_name_exits_2_naming_its_replacement(monkeypatch):
    monkeypatch.setenv("MEMLANE_TREE__ONLINE", "off")
    result = _show("--for", "serve")
    assert result.exit_code == 2
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert lines == ["error: MEMLANE_TREE__ONLINE was renamed: use MEMLANE_BACKGROUND__TREE=false"]


def test_markdown_table_has_a_row_per_changed_setting_and_a_column_per_entry_point():
    from memlane.settings.entry_points import ENTRY_POINT_DEFAULTS

    result = _show("--markdown")
    assert result.exit_code == 0, result.output
    rows = result.stdout.strip().splitlines()
    assert rows[0] == "| setting | default | serve | backfill | engine | why |"
    paths = {p for changes in ENTRY_POINT_DEFAULTS.values() for p in changes}
    assert len(rows) == 2 + len(paths)
    tree = next(r for r in rows if r.startswith("| `background.tree` |"))
    cells = [c.strip() for c in tree.strip("|").split(" | ")]
    assert cells[1:5] == ["`false`", "`true` (unless the user set it)", "`false` (always)", ""]
