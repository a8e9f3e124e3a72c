"""The Ray Data re-embed job end to end: real Ray on 127.0.0.1, a real Milvus Lite server,
MiniLM then bge-small. One small bank and one test, to keep CI's Ray time short (the engine
side, cut-short runs included, is tests/memlane/test_reembed.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.slow

TEXTS = [
    "I adopted a beagle called Pixel last spring.",
    "My sister Maria lives in Porto and teaches chemistry.",
    "I work night shifts as a nurse at the city hospital.",
    "I started learning the cello three months ago.",
]


def test_job_reembeds_a_bank_to_bge_small_and_a_rerun_has_nothing_to_do(tmp_path):
    import ray

    from cluster.local import MilvusLiteServer, start_local_ray
    from memlane.engine import Memory
    from memlane.records import Turn
    from memlane.settings import Settings
    from pipelines.reembed import ReembedConfig, resolve_banks, run_reembed

    data = tmp_path / "data"
    server = MilvusLiteServer(data)
    server.start()
    try:
        mini = Settings(data_dir=data, store={"milvus_uri": server.uri}, models={"embedder": "minilm"})
        start = datetime(2024, 5, 1, 9, tzinfo=UTC)
        turns = [
            Turn(
                document_id="d",
                session_id="s",
                turn_id=f"t{i}",
                index=i,
                speaker="Ana",
                text=t,
                timestamp=start + timedelta(minutes=i),
            )
            for i, t in enumerate(TEXTS)
        ]
        with Memory(mini) as memory:
            memory.retain("b", [("d", turns)])
            ids = memory.store.list_unit_ids("b")
        cfg = ReembedConfig(milvus_uri=server.uri, data_dir=data, embedder="bge-small", progress=False)
        start_local_ray(num_cpus=2, include_dashboard=False)
        try:
            planned = resolve_banks(cfg, ["b"])
            assert [(p.bank_id, p.units, p.source, p.pending) for p in planned] == [
                ("b", len(ids), "minilm", False)
            ]
            summary = run_reembed(cfg, planned)
        finally:
            ray.shutdown()
        assert (summary.done, summary.failed_banks, summary.units, summary.workers) == (1, 0, len(ids), 1), (
            summary
        )
        assert summary.rows_per_s > 0
        # a re-run finds the bank on the target: nothing to do, no Ray needed
        again = run_reembed(cfg, resolve_banks(cfg, ["b"]))
        assert (again.unchanged, again.done, again.units) == (1, 0, 0)
        bge = mini.model_copy(update={"models": mini.models.model_copy(update={"embedder": "bge-small"})})
        with Memory(bge) as memory:
            bank = memory.banks.get("b")
            assert (bank.embedder, bank.embedding_dim, bank.reembedding) == ("bge-small", 384, "")
            assert memory.store.list_unit_ids("b") == ids
            assert memory.banks.doctor("b").ok
            assert (
                memory.recall("b", "what is the dog called")
                .memories[0]
                .unit.text.endswith("Pixel last spring.")
            )
    finally:
        server.stop()
