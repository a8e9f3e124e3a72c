"""The backfill on a two-node Ray cluster on one machine (head + one worker node, one CPU
each, all on 127.0.0.1): the retain actors land on both nodes and share one Milvus server."""

from __future__ import annotations

from collections import Counter

import pytest
from fixtures import write_jsonl_fixture

pytestmark = pytest.mark.slow


def _start_cluster(cluster_cls):
    """Head + one worker node, one CPU each, with the retries of a local start: CI once
    failed here on Ray's startup timeout while the 2 cores were busy."""
    from cluster.local import retry_startup

    made: list = []

    def start():
        made.append(cluster_cls())
        made[-1].add_node(num_cpus=1, include_dashboard=False)
        made[-1].add_node(num_cpus=1)
        return made[-1]

    return retry_startup(start, lambda: made[-1].shutdown())


def test_backfill_on_two_nodes(tmp_path):
    import ray
    from ray.cluster_utils import Cluster

    from cluster.local import MilvusLiteServer, bind_ray_to_loopback
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore
    from pipelines.backfill import BackfillConfig, run_backfill

    rows = [
        {
            "bank_id": f"b{b}",
            "session_id": f"s{i // 4}",
            "speaker": "Kit" if i % 2 else "Lou",
            "text": f"Note {i} for bank {b} about the ferry to Bergen.",
            "timestamp": f"2023-05-{1 + i // 4:02d}T09:{i:02d}:00Z",
        }
        for b in range(4)
        for i in range(12)
    ]
    src = write_jsonl_fixture(tmp_path / "two.jsonl", rows)

    bind_ray_to_loopback()
    server = MilvusLiteServer(tmp_path / "milvus")
    server.start()
    cluster = None
    try:
        cluster = _start_cluster(Cluster)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="WARNING")
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        results: list[dict] = []
        summary = run_backfill(
            BackfillConfig(
                path=src,
                milvus_uri=server.uri,
                data_dir=tmp_path / "bf",
                workers=2,
                group_turns=12,
                progress=False,
            ),
            on_result=results.append,
        )
        assert (summary.banks, summary.turns, summary.memories, summary.failed_banks) == (4, 48, 48, 0)
        assert len({r["node_id"] for r in results}) == 2  # both nodes retained banks
        store = MilvusStore(Settings(store={"milvus_uri": server.uri}), dim=384)
        try:
            assert {b: store.count_units(b) for b in ("b0", "b1", "b2", "b3")} == dict(
                Counter(r["bank_id"] for r in rows)
            )
        finally:
            store.close()
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        server.stop()
