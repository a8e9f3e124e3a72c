"""``memlane eval statements``: per slot family, each extractor's precision and recall on a
statement file (a tiny one written for this test), and bad input as one line with exit code 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cluster.cli import app

STATEMENTS = [
    {"id": "t1", "speaker": "Ines", "said_at": "2026-02-01T10:00:00+00:00", "before": "",
     "text": "I work as a welder at Harrow Steel.", "kind": "positive",
     "facts": [{"slot": "job_title", "value": "welder"}, {"slot": "works_at", "value": "Harrow Steel"}]},
    {"id": "t2", "speaker": "Ines", "said_at": "2026-02-02T10:00:00+00:00", "before": "",
     "text": "My cousin is vegan and proud of it.", "kind": "other_person", "facts": []},
    {"id": "t3", "speaker": "Ines", "said_at": "2026-02-03T10:00:00+00:00", "before": "",
     "text": "We have two dogs now.", "kind": "positive", "facts": [{"slot": "count:dogs", "value": 2}]},
]  # fmt: skip


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def statements(tmp_path):
    path = tmp_path / "st.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in STATEMENTS))
    return path


def test_the_rules_are_scored_per_family(runner, statements, tmp_path):
    r = runner.invoke(
        app,
        [
            "eval",
            "statements",
            str(statements),
            "--extractors",
            "rules",
            "--out",
            str(tmp_path / "o"),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)["rules"]
    # "I work as a welder at Harrow Steel" -> job_title welder; "two dogs" -> count:dog 2
    assert report["job_title"]["predicted"] == 1 and report["job_title"]["precision"] == 1.0
    assert report["count"]["right"] == 1 and report["works_at"]["recall"] == 0.0
    assert report["all"]["labelled"] == 3 and "diet" not in report  # the cousin's diet: nothing
    rows = [json.loads(line) for line in (tmp_path / "o" / "rows.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["t1", "t2", "t3"] and rows[1]["predicted"]["rules"] == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--extractors", "rules,magic"], "--extractors takes rules, classifier, llm"),
        (
            ["--extractors", "classifier", "--embedder", "nomic"],
            "no slot classifier weights for embedder 'nomic'",
        ),
        (["--extractors", "llm"], "MEMLANE_LLM__BASE_URL"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(runner, statements, args, message, monkeypatch):
    monkeypatch.delenv("MEMLANE_LLM__BASE_URL", raising=False)
    r = runner.invoke(app, ["eval", "statements", str(statements), *args])
    assert r.exit_code == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_missing_or_malformed_file_is_named(runner, tmp_path):
    r = runner.invoke(app, ["eval", "statements", str(tmp_path / "nope.jsonl")])
    assert r.exit_code == 2 and "statement file not found" in r.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    r = runner.invoke(app, ["eval", "statements", str(bad)])
    assert r.exit_code == 2 and "bad.jsonl:1" in r.stderr
