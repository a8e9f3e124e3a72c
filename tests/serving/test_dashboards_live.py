"""The dashboards cannot rot: every metric that a panel of the service and Milvus dashboards
(infra/grafana/) queries is exported by the Ray metrics endpoint of a live `memlane serve`
after a small workload (a retain, a recall, an error), with the labels the panel groups by.
The backfill dashboard is checked against a live backfill in tests/pipelines/."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from dashboard_metrics import GAUGE_TTL_S, GRAFANA, RAY_ENV, queried, scrape, wait_for
from live import live_service

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 3  # banks of derived state per replica in this module's service
USERS = 5  # banks written besides "dash": more than the budget
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    # A budget of 3 banks for the derived state of every replica (recall.state_max_banks). The
    # Ray runtime: the service dashboard's Ray Serve panels and the per-deployment gauges below
    # are Ray Serve's (the one-process runtime's metrics: tests/serving/test_process_metrics.py).
    with live_service(
        tmp_path_factory.mktemp("dashboards"),
        env={"MEMLANE_RECALL__STATE_MAX_BANKS": str(BUDGET), **RAY_ENV},
        runtime="ray",
    ) as state:
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
        for u in range(USERS):  # more banks than the budget, each written and recalled
            assert http.put(f"/v1/banks/user{u}", json={"name": ""}).status_code == 201
            item = {"content": f"User {u} has a cat called Tom{u}", "speaker": "u"}
            assert http.post(f"/v1/banks/user{u}/memories", json={"items": [item]}).status_code == 200
            found = http.post(f"/v1/banks/user{u}/recall", json={"query": "What is the cat called?"})
            assert found.status_code == 200 and f"Tom{u}" in found.text
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


def _held(port: int, deployment: str) -> dict[str, list[float]]:
    """The warm-bank gauges of the deployment's replicas (one value per replica)."""
    deadline = time.monotonic() + 60
    while True:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        values: dict[str, list[float]] = {}
        for line in text.splitlines():
            for name in ("ray_memlane_recall_warm_banks", "ray_memlane_recall_warm_bytes"):
                if line.startswith(name + "{") and f'deployment="{deployment}"' in line:
                    values.setdefault(name, []).append(float(line.rsplit(" ", 1)[1]))
        if len(values) == 2 or time.monotonic() > deadline:
            return values
        time.sleep(2)


@pytest.mark.parametrize("deployment", ["Memory", "Ingress"])
def test_each_replica_holds_banks_within_the_budget_and_exports_them(worked, deployment):
    """The Memory replicas (retain) and the Ingress replicas (recall) hold the banks they used
    under the engine's one budget (3 banks here; 6 were written and recalled), and export them
    as the same gauges, told apart by the deployment tag."""
    values = _held(worked["metrics_export_port"], deployment)
    banks, held = (
        values.get("ray_memlane_recall_warm_banks", []),
        values.get("ray_memlane_recall_warm_bytes", []),
    )
    # (a replica that Serve added but sent nothing to holds none)
    assert banks and all(0 <= n <= BUDGET for n in banks), values
    assert sum(banks) >= BUDGET, values  # 6 banks were used: some replica filled its budget
    assert held and max(held) >= 6 * 1024, values  # a memory at least


@pytest.mark.parametrize("dashboard", ["memlane-service.json", "memlane-milvus.json"])
def test_every_queried_metric_is_exported_by_the_live_service(worked, dashboard):
    wanted = queried(GRAFANA / dashboard)
    assert len(wanted) >= 3
    problems = wait_for(worked["metrics_export_port"], wanted, timeout_s=150)
    assert not problems, f"{dashboard} queries metrics the live service does not export: {problems}"


def test_the_metrics_come_without_the_ray_dashboard_or_idle_workers(worked):
    """The local service starts no Ray dashboard unless asked (memlane serve --ray-dashboard)
    and no idle Ray workers ahead of use, while the metrics above are exported."""
    assert worked["dashboard_url"] is None
    names = _process_tree_names(worked["pid"])
    assert any("ServeReplica:memlane:Memory" in n for n in names), names  # the tree is the service's
    assert not [n for n in names if "ray-dashboard-" in n or n.startswith("ray::IDLE")], names


def _process_tree_names(root: int) -> list[str]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    names, todo = [], [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            names.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
        except OSError:
            continue
    return names
