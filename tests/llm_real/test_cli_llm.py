"""``memlane llm serve-local`` and the commands pointed at it (in-process CLI runner, real
engine, real llama.cpp server): retain with the LLM extractor, reflect, the server's
loopback-only socket, and the one-line failures (a model that does not exist, the server down)."""

from __future__ import annotations

import json

import pytest
from fixtures import write_jsonl_fixture
from listeners import is_loopback, listeners_of
from typer.testing import CliRunner

from cluster.cli import app
from cluster.local import free_port
from memlane.engine import Memory
from memlane.settings import Settings
from tests.llm_real.conftest import DAY1, EXTRACT_TOKENS

pytestmark = pytest.mark.llm_real


def _one_line(result) -> str:
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _environ(pid: int) -> dict[str, str]:
    """The environment process ``pid`` was started with (Linux /proc)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        entries = f.read().decode(errors="replace").split("\0")
    return dict(e.split("=", 1) for e in entries if "=" in e)


@pytest.fixture
def run():
    runner = CliRunner()
    return lambda *args, env=None: runner.invoke(app, list(args), env=env)


def test_serve_local_retain_with_the_llm_extractor_and_reflect(local_llm, run, tmp_path, monkeypatch):
    """The README's flow, its own server on its own data directory."""
    root, data, port = tmp_path / "llm", str(tmp_path / "data"), free_port()
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    r = run("llm", "serve-local", "--port", str(port), "--data-dir", str(root))
    assert r.exit_code == 0, r.stderr
    try:
        exports = dict(line[len("export ") :].split("=", 1) for line in r.stdout.splitlines())
        assert exports == {
            "MEMLANE_LLM__BASE_URL": f"http://127.0.0.1:{port}/v1",
            "MEMLANE_LLM__MODEL": "smollm2-135m-instruct",
        }
        status = json.loads(run("llm", "serve-local", "--status", "--data-dir", str(root)).stdout)
        assert status["answers"] is True and status["port"] == port
        listening = listeners_of([status["pid"]])
        assert [p for _, _, p in listening] == [port] and all(is_loopback(a) for _, a, _ in listening)
        # llama.cpp's OpenMP threads sleep between steps instead of spinning on busy cores
        assert _environ(status["pid"]).get("OMP_WAIT_POLICY") == "PASSIVE"
        r = run("llm", "serve-local", "--port", str(port), "--data-dir", str(root))
        assert r.exit_code == 2 and "already running" in _one_line(r)

        for key, value in {
            **exports,
            "MEMLANE_RETAIN__EXTRACTOR": "llm",
            "MEMLANE_LLM__MAX_RETRIES": "0",
            "MEMLANE_LLM__EXTRACT_MAX_TOKENS": str(EXTRACT_TOKENS),
        }.items():
            monkeypatch.setenv(key, value)
        path = write_jsonl_fixture(tmp_path / "c.jsonl", DAY1)
        r = run("retain", "--bank", "ana", str(path), "--data-dir", data)
        assert r.exit_code == 0, r.stderr
        r = run(
            "reflect",
            "--bank",
            "ana",
            "Who is Pixel?",
            "--json",
            "--budget",
            "low",
            "--answer-max-tokens",
            "200",
            "--data-dir",
            data,
        )
        if r.exit_code == 0:
            out = json.loads(r.stdout)
            shown = {m["unit"]["id"] for m in out["memories"]}
            assert out["answer"].strip() and set(out["memory_ids"]) <= shown
        else:  # the model's reply did not validate after its repair: one line naming that
            assert r.exit_code == 2 and "invalid ReflectReply after one repair" in _one_line(r)
        r = run("doctor", "--bank", "ana", "--data-dir", data)
        assert r.exit_code == 0, r.stdout + r.stderr
    finally:
        r = run("llm", "serve-local", "--stop", "--data-dir", str(root))
    assert r.exit_code == 0 and r.stdout.strip() == "stopped"
    r = run("llm", "serve-local", "--status", "--data-dir", str(root))
    assert r.exit_code == 1 and "no local model server runs" in r.stdout


def test_serve_local_keeps_the_operators_omp_wait_policy(local_llm, tmp_path, monkeypatch):
    """PASSIVE is the default; a policy the operator set reaches llama.cpp unchanged (local_llm:
    skipped, or failed in CI, without the local-llm extra)."""
    from cluster import llm_local

    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    root = tmp_path / "llm"
    server = llm_local.start(root, port=free_port())
    try:
        assert _environ(server.pid).get("OMP_WAIT_POLICY") == "ACTIVE"
    finally:
        llm_local.stop(root)


def test_serve_local_with_a_model_that_does_not_exist(run, tmp_path):
    r = run("llm", "serve-local", "--model", str(tmp_path / "nope.gguf"), "--data-dir", str(tmp_path))
    assert r.exit_code == 2
    assert _one_line(r) == f"error: model file not found: {tmp_path / 'nope.gguf'}"
    bogus = tmp_path / "notes.gguf"
    bogus.write_text("not a model")
    r = run("llm", "serve-local", "--model", str(bogus), "--data-dir", str(tmp_path))
    assert r.exit_code == 2 and "is not a GGUF model file" in _one_line(r)
    assert not (tmp_path / "llm-local.json").exists()


def test_commands_with_the_server_down_say_so_in_one_line(run, tmp_path, monkeypatch):
    data = str(tmp_path / "data")
    path = write_jsonl_fixture(tmp_path / "c.jsonl", DAY1)
    monkeypatch.setenv("MEMLANE_LLM__BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("MEMLANE_LLM__MODEL", "smollm2-135m-instruct")
    monkeypatch.setenv("MEMLANE_LLM__MAX_RETRIES", "0")
    monkeypatch.setenv("MEMLANE_RETAIN__EXTRACTOR", "llm")
    # retain falls back to the rules per chunk: nothing is lost, the reason is on each memory
    r = run("retain", "--bank", "ana", str(path), "--data-dir", data)
    assert r.exit_code == 0, r.stderr
    r = run("reflect", "--bank", "ana", "How is Pixel?", "--data-dir", data)
    assert r.exit_code == 2
    assert "reflect LLM at http://127.0.0.1:" in _one_line(r) and "ConnectError" in _one_line(r)
    with Memory(Settings(data_dir=data)) as m:
        units = [u for b in m.store.iter_units("ana") for u in b]
        assert len(units) == 3 and all("ConnectError" in u.metadata["llm_error"] for u in units)
        assert not [u for u in units if u.fact_type.value == "opinion"]
