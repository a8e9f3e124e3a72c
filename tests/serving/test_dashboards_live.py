"""The dashboards cannot rot: every metric that a panel of the service and Milvus dashboards
(infra/grafana/) queries is exported by the Ray metrics endpoint of a live `memlane serve`
after a small workload (a retain, a recall, an error), with the labels the panel groups by.
The backfill dashboard is checked against a live backfill in tests/pipelines/."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from dashboard_metrics import GAUGE_TTL_S, GRAFANA, queried, scrape, wait_for
from live import live_service

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    with live_service(tmp_path_factory.mktemp("dashboards")) as state:
        yield state


@pytest.fixture(scope="module")
def worked(service):
    """The service after a small workload: a bank, a retain, a recall and an error."""
    with httpx.Client(base_url=service["url"], timeout=120) as http:
        assert http.put("/v1/banks/dash", json={"name": ""}).status_code == 201
        retained = http.post(
            "/v1/banks/dash/memories",
            json={
                "items": [
                    {
                        "content": "My dog is called Biscuit",
                        "speaker": "Alice",
                        "timestamp": "2024-05-01T10:00:00Z",
                    },
                    {
                        "content": "We moved to Lisbon last May",
                        "speaker": "Alice",
                        "timestamp": "2024-06-01T10:00:00Z",
                    },
                ],
                "document_id": "chat-1",
            },
        )
        assert retained.status_code == 200, retained.text
        recalled = http.post("/v1/banks/dash/recall", json={"query": "What is the dog called?"})
        assert recalled.status_code == 200 and "Biscuit" in recalled.text
        # Errors: recall on a bank that does not exist (404 from the Ingress replica, where
        # recall runs) and reading it (404 raised in the Memory replica: Serve's error counter).
        assert http.post("/v1/banks/nobody/recall", json={"query": "anything"}).status_code == 404
        assert http.get("/v1/banks/nobody").status_code == 404
    time.sleep(GAUGE_TTL_S)  # past the agent's gauge TTL: gauges must still be exported
    return service


def test_metrics_port_is_in_the_state_file(service):
    port = service["metrics_export_port"]
    assert isinstance(port, int) and port > 0
    assert "ray_node_cpu_utilization" in scrape(port)  # Ray's own node metrics, on this endpoint


def test_the_write_replica_exports_the_banks_it_holds(worked):
    """The Memory replica (retain) holds the bank it wrote, under the engine's state budget,
    and exports it as the Ingress does its warm banks (same gauges, deployment tag Memory)."""
    deadline = time.monotonic() + 60
    while True:
        text = httpx.get(f"http://127.0.0.1:{worked['metrics_export_port']}/metrics", timeout=30).text
        values = {
            name: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            for name in ("ray_memlane_recall_warm_banks", "ray_memlane_recall_warm_bytes")
            if line.startswith(name + "{") and 'deployment="Memory"' in line
        }
        if len(values) == 2 or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert values.get("ray_memlane_recall_warm_banks", 0) >= 1, values
    assert values.get("ray_memlane_recall_warm_bytes", 0) >= 6 * 1024, values  # a memory at least


@pytest.mark.parametrize("dashboard", ["memlane-service.json", "memlane-milvus.json"])
def test_every_queried_metric_is_exported_by_the_live_service(worked, dashboard):
    wanted = queried(GRAFANA / dashboard)
    assert len(wanted) >= 3
    problems = wait_for(worked["metrics_export_port"], wanted, timeout_s=150)
    assert not problems, f"{dashboard} queries metrics the live service does not export: {problems}"
