"""``memlane eval longmemeval|locomo`` and ``memlane bench suite`` through the CLI (in-process
runner, real engine and stores, tiny inputs)."""

from __future__ import annotations

import json
import sys
import types

import pytest
from fixtures import write_locomo_fixture, write_longmemeval_fixture
from typer.testing import CliRunner

from cluster.cli import app
from tests.evals.test_eval_qa_report import ScriptedLLM


@pytest.fixture
def runner():
    return CliRunner()


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_eval_longmemeval_writes_a_run_directory(runner, tmp_path):
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    out = tmp_path / "run"
    r = runner.invoke(
        app,
        [
            "eval",
            "longmemeval",
            str(path),
            "--limit",
            "2",
            "--k",
            "1",
            "--k",
            "5",
            "--json",
            "--out",
            str(out),
            "--data-dir",
            str(tmp_path / "data"),
        ],
    )
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["info"]["questions"] == 2 and report["info"]["ks"] == "1, 5"
    assert report["command"].startswith("memlane ")
    assert sorted(p.name for p in out.iterdir()) == [
        "by_category.png",
        "questions.jsonl",
        "recall_at_k.png",
        "report.json",
        "summary.md",
    ]
    assert len((out / "questions.jsonl").read_text().splitlines()) == 2
    md = (out / "summary.md").read_text()
    assert "## turn_recall_any" in md and "| memlane | all | 2 |" in md


def test_eval_longmemeval_systems_and_comparison(runner, tmp_path):
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    out = tmp_path / "run"
    r = runner.invoke(
        app,
        [
            "eval",
            "longmemeval",
            str(path),
            "--limit",
            "2",
            "--k",
            "5",
            "--k",
            "10",
            "--systems",
            "memlane,bm25,lexical+semantic",
            "--budget",
            "low",
            "--out",
            str(out),
            "--no-plots",
            "--data-dir",
            str(tmp_path / "data"),
        ],
    )
    assert r.exit_code == 0, r.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["systems"] == ["memlane", "bm25", "lexical+semantic"]
    assert report["info"]["budget"] == "low"
    assert set(report["summary"]["all"]) == {"questions", "n", "memlane", "bm25", "lexical+semantic"}
    row = json.loads((out / "questions.jsonl").read_text().splitlines()[0])
    assert set(row["scores"]) == {"memlane", "bm25", "lexical+semantic"}
    # the only baseline is bm25; every headline metric's k was run
    assert set(report["beats_best_baseline"]) == {
        "session_recall_any@5",
        "session_recall_all@5",
        "session_ndcg_any@10",
        "turn_recall_all@10",
    }
    entry = report["comparison"]["all"]["session_recall_any@5"]
    assert entry["best_baseline"] == "bm25" and list(entry["baselines"]) == ["bm25"]
    # the terminal and summary.md carry the comparison table (bm25 the only baseline column)
    for md in (r.stdout, (out / "summary.md").read_text()):
        assert "## Memlane vs best single-channel baseline" in md
        assert "| category | n | memlane | bm25 | best | diff | 95% CI | beats |" in md
        assert "| lexical+semantic | all | 2 |" in md


@pytest.mark.parametrize("command", ["longmemeval", "locomo"])
def test_eval_bad_system_exits_2_with_one_line(runner, tmp_path, command):
    path = (write_longmemeval_fixture if command == "longmemeval" else write_locomo_fixture)(
        tmp_path / "in.json"
    )
    r = runner.invoke(
        app,
        ["eval", command, str(path), "--systems", "memlane,bm25,vector", "--data-dir", str(tmp_path / "d")],
    )
    assert r.exit_code == 2
    line = _one_error_line(r)
    assert line.startswith("error: unknown system 'vector'") and "lexical" in line
    assert not (tmp_path / "d").exists()  # rejected before any bank is written


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--limit", "0"], "--limit must be >= 1"),
        (["--k", "0"], "--k must be >= 1"),
        (["--budget", "huge"], "--budget must be one of low, mid, high, not 'huge'"),
    ],
)
def test_eval_longmemeval_bad_options(runner, tmp_path, args, needle):
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    r = runner.invoke(app, ["eval", "longmemeval", str(path), *args, "--data-dir", str(tmp_path / "d")])
    assert r.exit_code == 2 and needle in _one_error_line(r)


def test_eval_longmemeval_bad_file_writes_nothing(runner, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "x"}]), encoding="utf-8")
    r = runner.invoke(app, ["eval", "longmemeval", str(bad), "--data-dir", str(tmp_path / "d")])
    assert r.exit_code == 2
    assert _one_error_line(r) == "error: bad.json: $[0]: missing field 'question_type'"
    assert not (tmp_path / "d").exists()


def test_qa_without_llm_layer_exits_2(runner, tmp_path, monkeypatch):
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    monkeypatch.setitem(sys.modules, "memlane.llm", None)  # the LLM layer is not installed
    r = runner.invoke(app, ["eval", "longmemeval", str(path), "--qa", "--data-dir", str(tmp_path / "d")])
    assert r.exit_code == 2
    assert _one_error_line(r).startswith("error: --qa needs an LLM: set MEMLANE_LLM__BASE_URL")
    # and with the layer present but nothing configured
    fake = types.ModuleType("memlane.llm")
    fake.build_llm = lambda settings, role: None
    monkeypatch.setitem(sys.modules, "memlane.llm", fake)
    r = runner.invoke(app, ["eval", "longmemeval", str(path), "--qa", "--data-dir", str(tmp_path / "d")])
    assert r.exit_code == 2 and "--qa needs an LLM" in _one_error_line(r)


def test_qa_with_a_configured_llm(runner, tmp_path, monkeypatch):
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    roles = []
    fake = types.ModuleType("memlane.llm")
    # Only the QA role has a model here (the eval's tree consolidation asks for its own role
    # and, getting none, consolidates without one).
    fake.build_llm = lambda settings, role: (
        roles.append(role) or ScriptedLLM("Minnow", "Minnow") if role == "qa" else None
    )
    monkeypatch.setitem(sys.modules, "memlane.llm", fake)
    out = tmp_path / "run"
    r = runner.invoke(
        app,
        [
            "eval",
            "longmemeval",
            str(path),
            "--limit",
            "1",
            "--qa",
            "--json",
            "--out",
            str(out),
            "--data-dir",
            str(tmp_path / "d"),
        ],
    )
    assert r.exit_code == 0, r.stderr
    assert roles.count("qa") == 1
    qa = json.loads(r.stdout)["qa_summary"]["all"]
    assert qa["memlane"]["n"] == 1 and qa["full-context"]["n"] == 1
    assert (out / "qa_accuracy.png").exists()
    row = json.loads((out / "questions.jsonl").read_text())
    assert row["qa"]["memlane"]["answer"] == "Minnow" and row["qa"]["memlane"]["correct"] is True


def test_eval_locomo_keeps_its_flags_and_writes_a_run(runner, tmp_path):
    path = write_locomo_fixture(tmp_path / "fx.json")
    out = tmp_path / "run"
    r = runner.invoke(
        app,
        [
            "eval",
            "locomo",
            str(path),
            "--limit",
            "1",
            "--k",
            "5",
            "--out",
            str(out),
            "--data-dir",
            str(tmp_path / "d"),
        ],
    )
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("LoCoMo evidence recall: 1 conversations, 3 questions")
    # --k 5 only: the comparison covers session_recall@5 (turn_recall@10 was not run)
    assert "Memlane vs best single-channel baseline" in r.stdout and "session_recall@5:" in r.stdout
    assert json.loads((out / "report.json").read_text())["beats_best_baseline"].keys() == {"session_recall@5"}
    assert (out / "summary.md").exists() and (out / "questions.jsonl").exists()
    r = runner.invoke(app, ["eval", "locomo", str(tmp_path / "nope.json"), "--data-dir", str(tmp_path / "d")])
    assert r.exit_code == 2 and "LoCoMo file not found" in _one_error_line(r)


def test_bench_suite_tiny(runner, tmp_path):
    out = tmp_path / "bench"
    r = runner.invoke(
        app,
        [
            "bench",
            "suite",
            "--size",
            "300",
            "--size",
            "100",
            "--queries",
            "3",
            "--retain-turns",
            "12",
            "--no-serve",
            "--json",
            "--out",
            str(out),
            "--data-dir",
            str(tmp_path / "scratch"),
        ],
    )
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert [row["memories"] for row in report["recall"]] == [100, 300]
    for row in report["recall"]:
        assert row["p50_ms"] > 0 and row["baseline_index_dense_p50_ms"] > 0
        assert "footprint" not in row
    for f in report["footprint"]:
        assert f["raw_vector_bytes_per_memory"] == 384 * 4
        assert f["disk_bytes_per_memory"] > 0 and f["raw_text_bytes_per_memory"] > 10
    assert report["retain"]["templated"]["turns"] == 12
    assert report["serve"] == "skipped: --no-serve"  # the Serve section has its own test
    assert sorted(p.name for p in out.iterdir()) == ["bench.json", "bench.md", "latency_vs_size.png"]
    assert "| 300 |" in (out / "bench.md").read_text()


def test_bench_suite_bad_size(runner, tmp_path):
    r = runner.invoke(app, ["bench", "suite", "--size", "0", "--data-dir", str(tmp_path / "s")])
    assert r.exit_code == 2 and "--size must be >= 1" in _one_error_line(r)


def test_suite_runs_a_given_serve_bench_with_the_arguments_it_takes(tmp_path):
    from benchmarks.suite import run_suite, suite_markdown

    calls = []

    def fake_serve_bench(queries):  # accepts only one of the offered arguments
        calls.append(queries)
        return {"recall_rps": 12.5, "trivial_rps": 80.0}

    report = run_suite(
        tmp_path / "scratch", sizes=[50], queries=2, retain_turns=0, serve_bench=fake_serve_bench
    )
    assert calls == [2]
    assert report["serve"] == {"recall_rps": 12.5, "trivial_rps": 80.0}
    assert report["retain"] == {} and [r["memories"] for r in report["recall"]] == [50]
    assert "- recall_rps: 12.5" in suite_markdown(report)
