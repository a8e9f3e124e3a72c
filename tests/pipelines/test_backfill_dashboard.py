"""The backfill and Milvus dashboards (infra/grafana/) against a live backfill: after a small
Ray Data backfill on a local Ray that this module starts (with one rejected record), every
metric those dashboards query is exported by the Ray node's metrics endpoint, with the labels
the panels group by. Scraped before the module's Ray shuts down."""

from __future__ import annotations

import time

import pytest
from dashboard_metrics import (
    GAUGE_TTL_S,
    GRAFANA,
    REPORT_INTERVAL_MS,
    missing,
    queried,
    ray_env,
    scrape,
    wait_for,
)
from fixtures import write_jsonl_fixture

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Milvus Lite server and a 2-CPU Ray on 127.0.0.1; yields (Milvus URI, metrics export
    port)."""
    import ray

    from cluster.local import MilvusLiteServer, start_local_ray

    server = MilvusLiteServer(tmp_path_factory.mktemp("milvus"))
    server.start()
    try:
        with ray_env():
            ctx = start_local_ray(num_cpus=2)
            try:
                assert ray._config.metrics_report_interval_ms() == REPORT_INTERVAL_MS
                yield server.uri, ctx.address_info["metrics_export_port"]
            finally:
                ray.shutdown()
    finally:
        server.stop()


def _records() -> list[dict]:
    rows = [
        {
            "bank_id": f"dash-{b}",
            "session_id": "s1",
            "speaker": "Ada" if i % 2 == 0 else "Ben",
            "text": f"Message {i}: we met at the harbour in Lisbon last week.",
            "timestamp": f"2024-03-0{1 + i}T10:00:00Z",
        }
        for b in range(2)
        for i in range(6)
    ]
    rows.append({**rows[0], "text": ""})  # rejected on read: missing text
    return rows


@pytest.fixture(scope="module")
def backfilled(cluster, tmp_path_factory):
    from pipelines.backfill import BackfillConfig, run_backfill

    uri, port = cluster
    tmp = tmp_path_factory.mktemp("bf")
    src = write_jsonl_fixture(tmp / "chats.jsonl", _records())
    cfg = BackfillConfig(
        path=src, milvus_uri=uri, data_dir=tmp / "data", progress=False, workers=1, max_reject_share=0.2
    )
    summary = run_backfill(cfg)
    assert (summary.retained_banks, summary.rejects, summary.turns) == (2, 1, 12)
    time.sleep(GAUGE_TTL_S)  # past the agent's gauge TTL: the progress gauges must still be there
    return port


@pytest.mark.parametrize("dashboard", ["memlane-backfill.json", "memlane-milvus.json"])
def test_every_queried_metric_is_exported_by_a_live_backfill(backfilled, dashboard):
    wanted = queried(GRAFANA / dashboard)
    assert len(wanted) >= 2
    problems = wait_for(backfilled, wanted, timeout_s=120)
    assert not problems, f"{dashboard} queries metrics the backfill does not export: {problems}"


def test_the_check_reports_a_metric_or_label_that_is_not_exported(backfilled):
    """The comparison above can fail: a name no process exports, and a grouping label that
    an exported metric does not carry, are both reported."""
    exported = scrape(backfilled)
    assert "ray_memlane_backfill_rejects_total" in exported
    assert missing({"ray_memlane_backfill_no_such_metric": set()}, exported) == [
        "ray_memlane_backfill_no_such_metric (not exported)"
    ]
    assert missing({"ray_memlane_backfill_rejects_total": {"stage", "shard"}}, exported) == [
        "ray_memlane_backfill_rejects_total lacks labels ['shard']"
    ]
