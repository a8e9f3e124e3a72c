"""The vLLM batch extraction path with the engine mocked at the vLLM boundary
(``ray.data.llm.build_processor``), and its replies retained through the real engine."""

from __future__ import annotations

import json
import os

import pytest
from fixtures import write_locomo_fixture
from llm_fake import extraction_reply

from memlane.ingest import load_conversations
from memlane.records import Bank, FactType
from pipelines.llm_extract import (
    PrecomputedExtractor,
    VLLMExtractConfig,
    build_extraction_processor,
    chunk_rows,
)


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    path = write_locomo_fixture(tmp_path_factory.mktemp("fx") / "fx.json")
    return load_conversations(path, format="locomo")[0]


def test_chunk_rows_carry_the_prompt_and_retain_chunk_ids(conv):
    from memlane.retain.chunking import chunk_turns

    rows = chunk_rows(Bank(bank_id="b", name="Noor"), [(conv.document_id, conv.turns)], 8)
    expected = [c.chunk.chunk_id for c in chunk_turns("b", conv.document_id, conv.turns, 8)]
    assert [r["chunk_id"] for r in rows] == expected and len(rows) == 3
    assert rows[0]["messages"][1]["content"].count("\n[D1:") == 4


def test_processor_wiring_with_the_vllm_engine_mocked(conv, monkeypatch):
    import ray.data.llm as rdl

    seen = {}

    def fake_build_processor(config, preprocess=None, postprocess=None, **_):
        seen["config"] = config

        def run(rows):  # what the vLLM stage does per row, minus the GPU
            out = []
            for row in rows:
                req = preprocess(row)
                seen.setdefault("sampling", req["sampling_params"])
                text = extraction_reply(req["messages"][1]["content"], owner="Noor")
                out.append(postprocess({**req, "generated_text": text}))
            return out

        return run

    monkeypatch.setattr(rdl, "build_processor", fake_build_processor)
    cfg = VLLMExtractConfig(
        model_source="Qwen/Qwen2.5-7B-Instruct", batch_size=16, concurrency=2, max_tokens=900
    )
    processor = build_extraction_processor(cfg)
    rows = chunk_rows(Bank(bank_id="b", name="Noor"), [(conv.document_id, conv.turns)], 8)
    out = processor(rows)
    config = seen["config"]
    assert type(config).__name__ == "vLLMEngineProcessorConfig"
    assert (config.model_source, config.batch_size, config.concurrency) == ("Qwen/Qwen2.5-7B-Instruct", 16, 2)
    assert config.engine_kwargs["enable_prefix_caching"] is True
    params = seen["sampling"]
    assert params["temperature"] == 0.0 and params["max_tokens"] == 900
    assert params["structured_outputs"]["json"]["title"] == "ExtractionReply"
    assert [r["chunk_id"] for r in out] == [r["chunk_id"] for r in rows]
    assert all(json.loads(r["reply"])["facts"] for r in out)


def test_batch_replies_are_retained_with_fallback(conv, settings, embedder, extractor):
    from memlane.engine import Memory

    bank = Bank(bank_id="b", name="Noor")
    rows = chunk_rows(bank, [(conv.document_id, conv.turns)], settings.retain.chunk_max_turns)
    replies = {r["chunk_id"]: extraction_reply(r["messages"][1]["content"], owner="Noor") for r in rows}
    replies[rows[1]["chunk_id"]] = '{"facts": ['  # cut off: falls back to the rules
    del replies[rows[2]["chunk_id"]]  # missing: falls back too
    ext = PrecomputedExtractor(replies, extractor, model="qwen")
    with Memory(settings, embedder=embedder, extractor=ext) as memory:
        memory.create_bank("b", name="Noor")
        report = memory.retain("b", [(conv.document_id, conv.turns)])
        units = [u for batch in memory.store.iter_units("b") for u in batch]
    assert ext.stats == {"llm": 1, "fallback": 2}
    by_chunk = {}
    for u in units:
        by_chunk.setdefault(u.chunk_id, []).append(u)
    assert len(by_chunk[rows[0]["chunk_id"]]) == 2  # two LLM facts
    assert all(u.metadata.get("model") == "qwen" for u in by_chunk[rows[0]["chunk_id"]])
    assert len(by_chunk[rows[1]["chunk_id"]]) == 3  # one rules fact per turn
    assert report.units == 2 + 3 + 3
    assert any(u.fact_type == FactType.experience for u in by_chunk[rows[0]["chunk_id"]])


@pytest.mark.skipif(
    not os.environ.get("MEMLANE_TEST_VLLM_MODEL"),
    reason="set MEMLANE_TEST_VLLM_MODEL to a local model on a GPU machine",
)
def test_real_vllm_batch_extraction(conv):  # pragma: no cover - GPU machines only
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    import ray

    from pipelines.llm_extract import extract_replies

    rows = chunk_rows(Bank(bank_id="b", name="Noor"), [(conv.document_id, conv.turns)], 8)
    ray.init(num_gpus=1)
    try:
        replies = extract_replies(rows, VLLMExtractConfig(os.environ["MEMLANE_TEST_VLLM_MODEL"]))
    finally:
        ray.shutdown()
    assert set(replies) == {r["chunk_id"] for r in rows}


@pytest.mark.slow
def test_backfill_retains_vllm_batch_replies(tmp_path, monkeypatch):
    """run_backfill with a VLLMExtractConfig: one ray.data.llm job over every chunk of the
    corpus (the GPU engine mocked at build_processor, here run on the driver), its replies
    carried to the retain workers on a real local Ray and Milvus Lite server; the chunk whose
    reply is cut off falls back to the rules."""
    import ray
    import ray.data.llm as rdl
    from fixtures import write_jsonl_fixture

    from cluster.local import MilvusLiteServer, start_local_ray
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore
    from pipelines.backfill import BackfillConfig, run_backfill

    prompts: list[str] = []

    def fake_build_processor(config, preprocess=None, postprocess=None, **_):
        def run(ds):
            out = []
            for row in ds.take_all():
                req = preprocess(row)
                prompts.append(req["messages"][1]["content"])
                text = extraction_reply(req["messages"][1]["content"])
                if row["bank_id"] == "b1":
                    text = text[: len(text) // 2]  # cut off: the worker falls back
                out.append(postprocess({**req, "generated_text": text}))
            return ray.data.from_items(out)

        return run

    monkeypatch.setattr(rdl, "build_processor", fake_build_processor)
    rows = [
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
    src = write_jsonl_fixture(tmp_path / "c.jsonl", rows)
    with MilvusLiteServer(tmp_path / "milvus") as server:
        start_local_ray(num_cpus=2, include_dashboard=False)
        try:
            cfg = BackfillConfig(
                path=src,
                milvus_uri=server.uri,
                data_dir=tmp_path / "bf",
                progress=False,
                workers=1,
                vllm=VLLMExtractConfig(model_source="fake/model"),
            )
            summary = run_backfill(cfg)
        finally:
            ray.shutdown()
        store = MilvusStore(Settings(store={"milvus_uri": server.uri}), dim=384)
        try:
            units = {b: [u for batch in store.iter_units(b) for u in batch] for b in ("b0", "b1")}
        finally:
            store.close()
    assert len(prompts) == 2  # one chunk per bank, all in the one batch job
    assert summary.turns == 8 and summary.failed_banks == 0
    # b0: the model's facts (extraction_reply writes 2 per chunk), marked with the model
    assert len(units["b0"]) == 2
    assert all(u.metadata.get("model") == "vllm-batch" for u in units["b0"])
    # b1: its reply was cut off, so the rules wrote one fact per turn
    assert len(units["b1"]) == 4
    assert not any(u.metadata.get("model") for u in units["b1"])
