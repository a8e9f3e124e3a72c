"""`memlane model ...` and `memlane directive ...` (in-process runner, real engine, Milvus Lite)."""

from __future__ import annotations

import json

from fixtures import write_jsonl_fixture
from typer.testing import CliRunner

from cluster.cli import app

ROWS = [
    {"speaker": "Priya", "text": t, "timestamp": f"2025-03-01T09:0{i}:00Z", "session_id": "s1"}
    for i, t in enumerate(
        [
            "Priya prefers trains to planes because she hates flying on short trips.",
            "Priya always books a window seat on the train to Edinburgh for the views.",
            "Priya adopted a grey cat called Miso from the shelter in Leeds.",
        ]
    )
]
QUESTION = "How does Priya like to travel?"


def _error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_models_and_directives_from_the_command_line(tmp_path):
    runner = CliRunner()
    dd = ["--data-dir", str(tmp_path / "data")]

    def run(*args):
        return runner.invoke(app, [*args, *dd])

    r = run("retain", "--bank", "priya", str(write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)))
    assert r.exit_code == 0, r.stderr

    r = run("model", "put", "travel", QUESTION, "--bank", "priya")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "created model travel in bank priya"
    assert lines[1] == f"travel: {QUESTION}"
    assert lines[2].startswith(f"{QUESTION} (from 3 memories")
    r = run("model", "put", "travel", QUESTION, "--bank", "priya")
    assert r.exit_code == 0 and r.stdout.splitlines()[0] == "kept model travel in bank priya"

    r = run("model", "show", "travel", "--bank", "priya", "--json")
    assert r.exit_code == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["question"] == QUESTION and shown["recalled"] == 3
    texts = [row["text"] for row in ROWS]
    assert shown["sources"] and all(s["text"].split(": ", 1)[1] in texts for s in shown["sources"])
    r = run("model", "show", "travel", "--bank", "priya")
    for s in shown["sources"]:
        assert f"  {s['memory_id']}: {s['text']} [turns: {', '.join(s['turns'])}]" in r.stdout.splitlines()

    r = run("model", "list", "--bank", "priya")
    assert r.exit_code == 0 and r.stdout.startswith(f"travel: {QUESTION} ({len(shown['sources'])} sources")
    r = run("model", "refresh", "travel", "--bank", "priya", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["refreshed_at"] > shown["refreshed_at"]

    r = run("directive", "put", "no-ex", "Never mention her ex.", "--bank", "priya")
    assert r.exit_code == 0 and r.stdout.strip() == "created directive no-ex in bank priya"
    r = run(
        "directive", "put", "kids", "Speak simply.", "--bank", "priya", "--tag", "kids", "--tag", "school"
    )
    assert r.exit_code == 0, r.stderr
    r = run("directive", "list", "--bank", "priya")
    assert r.stdout.splitlines() == [
        "kids: Speak simply. [tags: kids, school]",
        "no-ex: Never mention her ex. [always]",
    ]

    r = run("model", "delete", "travel", "--bank", "priya")
    assert r.exit_code == 0 and r.stdout.strip() == "deleted model travel from bank priya"
    r = run("directive", "delete", "kids", "--bank", "priya")
    assert r.exit_code == 0
    assert run("model", "list", "--bank", "priya").stdout == ""
    assert json.loads(run("directive", "list", "--bank", "priya", "--json").stdout)[0]["id"] == "no-ex"

    # bad input: exit 2, one line naming the problem, nothing written
    r = run("model", "show", "travel", "--bank", "priya")
    assert r.exit_code == 2 and _error_line(r) == "error: mental model 'travel' is not in bank 'priya'"
    r = run("model", "put", "Bad Id", QUESTION, "--bank", "priya")
    assert r.exit_code == 2 and _error_line(r).startswith("error: model_id: String should match pattern")
    r = run("model", "put", "travel", "  ", "--bank", "priya")
    assert r.exit_code == 2 and _error_line(r) == "error: question: Value error, question must not be empty"
    r = run("model", "list", "--bank", "nobody")
    assert r.exit_code == 2 and _error_line(r) == "error: unknown bank 'nobody'"
    r = run("directive", "delete", "kids", "--bank", "priya")
    assert r.exit_code == 2 and _error_line(r) == "error: directive 'kids' is not in bank 'priya'"
    assert run("model", "list", "--bank", "priya").stdout == ""
