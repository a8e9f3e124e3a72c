"""The memlane CLI end to end (in-process runner, real engine and stores)."""

from __future__ import annotations

import json

import pytest
from fixtures import write_jsonl_fixture, write_locomo_fixture
from typer.testing import CliRunner

from cluster.cli import app

ROWS = [
    {
        "speaker": "Ana",
        "text": "I adopted a beagle called Pixel last week.",
        "timestamp": "2025-03-10T09:00:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ben",
        "text": "Lovely! Is Pixel settling in?",
        "timestamp": "2025-03-10T09:01:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ana",
        "text": "Yes, and I started a pottery class in Porto.",
        "timestamp": "2025-04-02T18:00:00Z",
        "session_id": "s2",
    },
]


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    data = str(tmp_path / "data")

    def invoke(*args: str):
        return runner.invoke(app, [*args, "--data-dir", data])

    return invoke


def _error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_retain_recall_banks_delete(run, tmp_path):
    path = write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)
    r = run("retain", "--bank", "ana", str(path), "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["units"] == 3 and report["turns"] == 3

    r = run("recall", "--bank", "ana", "What is the name of the beagle Ana adopted?", "--json")
    assert r.exit_code == 0, r.stderr
    top = json.loads(r.stdout)["memories"][0]["unit"]
    assert "Pixel" in top["text"] and top["source_turns"] == ["s1:1"]

    r = run("banks", "--json")
    assert json.loads(r.stdout) == [{"bank_id": "ana", "name": "", "memories": 3}]

    r = run("delete", "--bank", "ana")
    assert r.exit_code == 0
    assert json.loads(run("banks", "--json").stdout) == []


def test_recall_trace_shows_each_memorys_ranks_and_scores_by_scale(run, tmp_path):
    """`memlane recall --trace` (text): under each memory, its channels' ranks, its fused rank
    and score, the cross-encoder's score and rank (budget high reads it by default) and the
    final score."""
    run("retain", "--bank", "ana", str(write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)))
    r = run(
        "recall",
        "--bank",
        "ana",
        "What is the name of the beagle Ana adopted?",
        "--budget",
        "high",
        "--trace",
    )
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "Pixel" in lines[0]
    assert lines[1].strip().startswith("channels: ") and "fused #" in lines[1]
    cross = lines[1].split("cross-encoder ")[1].split(";")[0]
    assert 0.5 < float(cross.split()[0]) < 1.0 and cross.endswith("(#1)")  # read, and ranked first
    # three candidates: the learned ranker orders them (from 3, memlane/recall/learned.py)
    # and the line names its rank
    assert "learned #1" in lines[1]
    final = float(lines[1].split("final ")[1].split()[0])
    assert f"{final:.3f}" == lines[0].split()[0]  # the score the memory is printed with


def test_recall_trace_of_a_two_memory_bank_has_no_learned_rank(run, tmp_path):
    """Under three candidates the fused order ranks (the mid model put a two-memory bank's
    second memory first): the trace line names no learned rank."""
    run("retain", "--bank", "ana", str(write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS[:2])))
    r = run("recall", "--bank", "ana", "What is the name of the beagle Ana adopted?", "--trace")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "Pixel" in lines[0] and "fused #" in lines[1]
    assert "learned #" not in lines[1]


def test_recall_trace_shows_the_learned_rank_on_a_bank_big_enough(run, tmp_path):
    """With the shipped mid model and ten candidates, each trace line names the learned rank and
    score, and the list falls by the printed score."""
    said = [
        "I adopted a beagle called Pixel last week.",
        "Pixel chews every sock she finds.",
        "The vet in Ancoats gave her the first jabs.",
        "My brother Tomas wants to walk her on Sundays.",
        "I started a new job at the library.",
        "The library opens at nine.",
        "We painted the kitchen yellow.",
        "Rain all week in Manchester.",
        "I booked a train to Leeds for Friday.",
        "Pixel slept through the whole storm.",
    ]
    rows = [
        {"speaker": "Ana", "text": t, "timestamp": f"2025-03-{10 + i:02d}T09:00:00Z", "session_id": f"s{i}"}
        for i, t in enumerate(said)
    ]
    run("retain", "--bank", "ana", str(write_jsonl_fixture(tmp_path / "ten.jsonl", rows)))
    r = run("recall", "--bank", "ana", "What is the name of Ana's dog?", "--trace", "--max-tokens", "400")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    memories = [line for line in lines if not line.startswith(" ")]
    traces = [line for line in lines if line.strip().startswith("channels:")]
    assert len(memories) == len(traces)
    ranks = [int(t.split("learned #")[1].split()[0]) for t in traces]
    assert len(ranks) >= 8 and ranks[0] == 1
    printed = [float(m.split()[0]) for m in memories]
    assert printed == sorted(printed, reverse=True)


# Job titles: the rules' one family trusted to supersede (memlane/facts/trust.py).
MOVES = [
    {"speaker": "Ana", "text": "I work as a nurse.", "timestamp": "2025-01-05T09:00:00Z", "session_id": "s1"},
    {
        "speaker": "Ana",
        "text": "I got promoted to ward manager last week!",
        "timestamp": "2025-03-05T09:00:00Z",
        "session_id": "s2",
    },
]


def test_recall_as_of_and_history_through_the_cli(run, tmp_path):
    assert (
        run("retain", "--bank", "ana", str(write_jsonl_fixture(tmp_path / "m.jsonl", MOVES))).exit_code == 0
    )
    from memlane.engine import Memory
    from memlane.settings import Settings

    with Memory(Settings(data_dir=tmp_path / "data")) as m:  # the engine's consolidation (no Ray)
        assert m.consolidate("ana").facts["superseded"] == 1

    def texts(*args):
        r = run(
            "recall", "--bank", "ana", "What does Ana do for a living?", "--planner", "off", "--json", *args
        )
        assert r.exit_code == 0, r.stderr
        return [m["unit"]["text"] for m in json.loads(r.stdout)["memories"]]

    # as of now: the nurse fact is superseded, its turn still recalled, after the new value
    assert texts() == ["Ana: I got promoted to ward manager last week!", "Ana: I work as a nurse."]
    assert texts("--as-of", "2025-02-01") == ["Ana: I work as a nurse."]
    # --history: the older value first, just before the one that replaced it (as the README says)
    assert texts("--history") == ["Ana: I work as a nurse.", "Ana: I got promoted to ward manager last week!"]

    # --trace names each memory's facts, and what superseded the old one and when
    r = run("recall", "--bank", "ana", "What does Ana do for a living?", "--planner", "off", "--trace")
    lines = r.stdout.splitlines()
    assert lines[0].endswith("Ana: I got promoted to ward manager last week!")
    assert lines[2].strip() == "facts: Ana job_title = ward manager (rules)"
    assert lines[3].endswith("Ana: I work as a nurse.")
    old = lines[5].strip()
    assert old.startswith("facts: Ana job_title = nurse (rules; superseded 2025-03-05 by ")
    new_id = json.loads(run("recall", "--bank", "ana", "ward manager", "--json").stdout)["memories"][0][
        "unit"
    ]["id"]
    assert old.endswith(f"by {new_id}#0)")


def test_retain_is_idempotent_through_the_cli(run, tmp_path):
    path = write_locomo_fixture(tmp_path / "fx.json")
    assert run("retain", "--bank", "fx", str(path)).exit_code == 0
    assert run("retain", "--bank", "fx", str(path)).exit_code == 0
    assert json.loads(run("banks", "--json").stdout)[0]["memories"] == 20


@pytest.mark.parametrize(
    "args, needle",
    [
        (("recall", "--bank", "ghost", "hello"), "unknown bank 'ghost'"),
        (("recall", "--bank", "ana", "   "), "query"),
        (("recall", "--bank", "ana", "hello", "--max-tokens", "0"), "max_tokens"),
        (("recall", "--bank", "ana", "hello", "--budget", "huge"), "budget"),
        (("delete", "--bank", "ghost"), "unknown bank 'ghost'"),
    ],
)
def test_bad_requests_exit_2_with_one_line(run, tmp_path, args, needle):
    assert run("retain", "--bank", "ana", str(write_jsonl_fixture(tmp_path / "c.jsonl", ROWS))).exit_code == 0
    r = run(*args)
    assert r.exit_code == 2
    assert needle in _error_line(r)
    assert json.loads(run("banks", "--json").stdout)[0]["memories"] == 3  # nothing changed


def test_bad_files_exit_2_and_write_nothing(run, tmp_path):
    bad = write_jsonl_fixture(tmp_path / "bad.jsonl", [ROWS[0], {**ROWS[1], "timestamp": "whenever"}])
    r = run("retain", "--bank", "ana", str(bad))
    assert r.exit_code == 2
    line = _error_line(r)
    assert "line 2" in line and "timestamp" in line and "whenever" in line
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    r = run("retain", "--bank", "ana", str(broken))
    assert r.exit_code == 2 and "broken.json" in _error_line(r)
    r = run("retain", "--bank", "ana", str(tmp_path / "missing.jsonl"))
    assert r.exit_code == 2 and "missing.jsonl" in _error_line(r)
    r = run("retain", "--bank", "bad id!", str(bad))
    assert r.exit_code == 2 and "bank id" in _error_line(r)
    assert json.loads(run("banks", "--json").stdout) == []
