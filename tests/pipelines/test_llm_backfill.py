"""MEMLANE_RETAIN__EXTRACTOR=llm through the backfill: the settings reach the workers (API key
from the workers' own environment, never in the payload), and a real `memlane backfill` on local Ray
extracts with a fake OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from fixtures import write_jsonl_fixture
from llm_fake import FakeLLMServer, extraction_reply
from typer.testing import CliRunner

ROWS = [
    {
        "bank_id": f"b{b}",
        "session_id": "s1",
        "speaker": "Kit" if i % 2 else "Lou",
        "text": f"Note {i} for bank {b} about the ferry to Bergen.",
        "timestamp": f"2023-05-01T09:{i:02d}:00Z",
    }
    for b in range(2)
    for i in range(4)
]


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        s.responder = lambda body: extraction_reply(body["messages"][1]["content"])
        yield s


def _env(monkeypatch, server):
    monkeypatch.setenv("MEMLANE_RETAIN__EXTRACTOR", "llm")
    monkeypatch.setenv("MEMLANE_LLM__BASE_URL", server.base_url)
    monkeypatch.setenv("MEMLANE_LLM__MODEL", "fake")
    monkeypatch.setenv("MEMLANE_LLM__API_KEY", "sk-secret")
    monkeypatch.setenv("MEMLANE_BACKGROUND__REFLECT", "false")


def test_worker_settings_carry_the_llm_but_not_the_keys(monkeypatch, server):
    from cluster.backfill_cmd import worker_settings
    from memlane.settings import Settings

    _env(monkeypatch, server)
    monkeypatch.setenv("MEMLANE_LLM__REFLECT__API_KEY", "sk-other")
    sent = worker_settings(Settings())
    assert sent["retain"]["extractor"] == "llm" and sent["llm"]["base_url"] == server.base_url

    def keys(tree: dict) -> list[str]:
        return [k for k, v in tree.items() for k in [k, *(keys(v) if isinstance(v, dict) else [])]]

    assert not [k for k in keys(sent) if k.endswith("api_key") or k == "milvus_token"]
    assert "sk-secret" not in json.dumps(sent)


def test_retain_worker_extracts_with_the_llm(monkeypatch, server, tmp_path):
    from actors.retain import RetainWorker
    from cluster.backfill_cmd import worker_settings
    from memlane.ingest import load_conversations
    from memlane.settings import Settings
    from pipelines.corpus import BankInput, encode_bank

    _env(monkeypatch, server)
    conv = load_conversations(write_jsonl_fixture(tmp_path / "c.jsonl", ROWS[:4]), format="jsonl")[0]
    worker = RetainWorker({**worker_settings(Settings()), "data_dir": str(tmp_path / "data")})
    try:
        out = worker(
            {
                "bank_id": ["b0"],
                "fingerprint": ["f"],
                "payload": [encode_bank(BankInput("b0", [(conv.document_id, conv.turns)]))],
            }
        )
        assert out["status"] == ["ok"] and out["memories"] == [2]  # two LLM facts for one chunk
        assert server.headers[0]["authorization"] == "Bearer sk-secret"  # from the environment
        units = [u for b in worker.memory.store.iter_units("b0") for u in b]
        assert {u.metadata["extractor"] for u in units} == {"llm"}
    finally:
        worker.memory.close()
        import ray

        if ray.is_initialized():  # RetainWorker asks Ray for its node id, which starts one
            ray.shutdown()


@pytest.mark.slow
def test_memlane_backfill_uses_the_llm_end_to_end(monkeypatch, server, tmp_path):
    from cluster.cli import app
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    _env(monkeypatch, server)
    src = write_jsonl_fixture(tmp_path / "two.jsonl", ROWS)
    data = tmp_path / "data"
    r = CliRunner().invoke(
        app, ["backfill", str(src), "--format", "jsonl", "--data-dir", str(data), "--workers", "1", "--json"]
    )
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert (summary["banks"], summary["turns"], summary["memories"]) == (2, 8, 4)
    assert len(server.requests) == 2 and all(h["authorization"] == "Bearer sk-secret" for h in server.headers)
    store = MilvusStore(Settings(data_dir=data), dim=384)
    try:
        units = [u for b in store.iter_units("b1") for u in b]
        assert len(units) == 2 and {u.metadata["extractor"] for u in units} == {"llm"}
    finally:
        store.close()
