"""memlane reflect / extract / merge-background end to end (in-process CLI runner, real engine,
fake OpenAI-compatible server over HTTP)."""

from __future__ import annotations

import json

import pytest
from fixtures import write_jsonl_fixture
from llm_fake import FakeLLMServer, extraction_reply
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
def server():
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    data = str(tmp_path / "data")
    return lambda *args: runner.invoke(app, [*args, "--data-dir", data])


def _one_line(result) -> str:
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _llm_env(monkeypatch, server):
    monkeypatch.setenv("MEMLANE_LLM__BASE_URL", server.base_url)
    monkeypatch.setenv("MEMLANE_LLM__MODEL", "fake")
    monkeypatch.setenv("MEMLANE_LLM__MAX_RETRIES", "0")
    monkeypatch.setenv("MEMLANE_BACKGROUND__REFLECT", "false")


def test_reflect_without_an_llm_exits_2_naming_the_setting(run, tmp_path):
    assert run("retain", "--bank", "ana", str(write_jsonl_fixture(tmp_path / "c.jsonl", ROWS))).exit_code == 0
    r = run("reflect", "--bank", "ana", "How is Pixel?")
    assert r.exit_code == 2
    assert "MEMLANE_LLM__BASE_URL" in _one_line(r)


def test_reflect_answers_with_citations(run, tmp_path, server, monkeypatch):
    path = write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)
    assert run("retain", "--bank", "ana", str(path)).exit_code == 0
    _llm_env(monkeypatch, server)
    server.script = [
        json.dumps(
            {
                "answer": "Pixel is my beagle.",
                "cited": ["M1"],
                "opinions": [{"statement": "I love Pixel.", "confidence": 0.9}],
            }
        )
    ]
    r = run("reflect", "--bank", "ana", "Who is Pixel?", "--json", "--budget", "low")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["answer"] == "Pixel is my beagle." and len(out["memory_ids"]) == 1
    assert out["opinions"][0]["text"] == "I love Pixel." and out["opinions"][0]["confidence"] == 0.9
    r = run("reflect", "--bank", "nobody", "Who?")
    assert r.exit_code == 2 and "unknown bank 'nobody'" in _one_line(r)
    r = run("reflect", "--bank", "ana", "Who?", "--budget", "huge")
    assert r.exit_code == 2 and "budget" in _one_line(r)


def test_extract_dry_run_with_rules_and_llm(run, tmp_path, server, monkeypatch):
    path = write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)
    r = run("extract", str(path), "--owner", "Ana", "--extractor", "rules", "--json")
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [len(x["facts"]) for x in rows] == [2, 1]  # one fact per turn, two sessions
    assert rows[0]["facts"][0]["fact_type"] == "experience"
    assert not (tmp_path / "data" / "milvus.db").exists()  # a dry run writes nothing

    _llm_env(monkeypatch, server)
    server.responder = lambda body: extraction_reply(body["messages"][1]["content"], owner="Ana")
    r = run("extract", str(path), "--owner", "Ana", "--extractor", "llm", "--limit", "1")
    assert r.exit_code == 0, r.stderr
    assert "via llm" in r.stdout and r.stdout.count("\n  [") == 2
    assert len(server.requests) == 1

    r = run("extract", str(path), "--extractor", "gpt")
    assert r.exit_code == 2 and "--extractor must be rules or llm" in _one_line(r)


def test_merge_background(run, tmp_path, server, monkeypatch):
    assert run("merge-background", "--bank", "nobody", "x").exit_code == 2
    _llm_env(monkeypatch, server)
    r = run("retain", "--bank", "ana", str(write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)))
    assert r.exit_code == 0, r.stderr
    r = run("merge-background", "--bank", "ana", "I am a vet.")
    assert r.exit_code == 0 and r.stdout.strip() == "I am a vet." and not server.requests
    server.script = [json.dumps({"background": "I am a vet in Porto."})]
    r = run("merge-background", "--bank", "ana", "I live in Porto.")
    assert r.exit_code == 0 and r.stdout.strip() == "I am a vet in Porto."
