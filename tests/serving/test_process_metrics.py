"""The one-process runtime's metrics (serve/process.py): ``memlane serve`` on its default runtime
serves, at ``/metrics`` on its own port, the metrics the Ray runtime exports through Ray's
agent, under the same ``ray_memlane_*`` names, so the dashboards of infra/grafana/ and the
``memlane`` job of infra/prometheus/ work on it. A real service (engine, Milvus Lite, models)
takes a counted workload; its exposition is read before and after."""

from __future__ import annotations

import time

import httpx
import pytest
import yaml
from dashboard_metrics import GRAFANA, missing, parse_exposition, queried
from live import ROOT, live_service
from prometheus_client.parser import text_string_to_metric_families

KEY = "k-metrics"
RETAINS = 2
RECALLS = 3
RECALL = "/v1/banks/{bank_id}/recall"
RETAIN = "/v1/banks/{bank_id}/memories"


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    """A live service on the default runtime, auth on."""
    with live_service(tmp_path_factory.mktemp("process-metrics"), keys={KEY: "*"}) as state:
        assert state["runtime"] == "process"
        yield state


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _exposition(state: dict) -> str:
    # no API key: Prometheus scrapes without one
    response = httpx.get(state["url"] + "/metrics", timeout=30)
    assert response.status_code == 200, response.text
    return response.text


def _samples(state: dict) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(_exposition(state))
        for s in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    """The sum over ``name``'s samples that carry ``labels`` (0 when there are none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


@pytest.fixture(scope="module")
def worked(state):
    """``(before, after)``: the samples around RETAINS retains, RECALLS recalls and a recall of
    a bank that does not exist (404)."""
    before = _samples(state)
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=state["url"], headers=headers, timeout=120) as http:
        assert http.put("/v1/banks/metrics", json={"name": ""}).status_code == 201
        for i, content in enumerate(["My dog is called Biscuit", "We moved to Lisbon last May"]):
            item = {"content": content, "speaker": "Alice", "timestamp": f"2024-0{i + 5}-01T10:00:00Z"}
            retained = http.post("/v1/banks/metrics/memories", json={"items": [item]})
            assert retained.status_code == 200, retained.text
        for _ in range(RECALLS):
            recalled = http.post("/v1/banks/metrics/recall", json={"query": "What is the dog called?"})
            assert recalled.status_code == 200 and "Biscuit" in recalled.text, recalled.text
        assert http.post("/v1/banks/nobody/recall", json={"query": "anything"}).status_code == 404
    return before, _samples(state)


def _delta(worked, name: str, **labels: str) -> float:
    before, after = worked
    return _value(after, name, **labels) - _value(before, name, **labels)


def test_metrics_are_served_on_the_service_port_without_a_key(state):
    port = int(state["url"].rsplit(":", 1)[1])
    assert state["metrics_export_port"] == port  # where infra/prometheus/ and the tests look
    assert httpx.get(state["url"] + "/v1/banks", timeout=30).status_code == 401  # auth is on
    text = _exposition(state)
    assert "# TYPE ray_memlane_http_requests_total counter" in text
    assert "# TYPE ray_memlane_recall_stage_ms histogram" in text
    # the Prometheus config scrapes this path on the service's default port
    config = yaml.safe_load((ROOT / "infra" / "prometheus" / "prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "memlane")
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"] == [{"targets": ["127.0.0.1:8000"]}]  # memlane serve's --port default


def test_each_request_is_counted_once_by_route_method_and_status(worked):
    requests = "ray_memlane_http_requests_total"
    assert _delta(worked, requests, route=RECALL, method="POST", status="200") == RECALLS
    assert _delta(worked, requests, route=RECALL, method="POST", status="404") == 1
    assert _delta(worked, requests, route=RETAIN, method="POST", status="200") == RETAINS
    assert _delta(worked, requests, route="/v1/banks/{bank_id}", method="PUT", status="201") == 1
    errors = "ray_memlane_http_errors_total"
    assert _delta(worked, errors, route=RECALL, method="POST", status="404") == 1
    assert _delta(worked, errors, route=RECALL, method="POST") == 1  # the 200s are no errors
    latency = "ray_memlane_http_latency_ms_count"
    assert _delta(worked, latency, route=RECALL, method="POST") == RECALLS + 1
    assert _delta(worked, "ray_memlane_http_latency_ms_sum", route=RETAIN, method="POST") > 0
    # the scrapes themselves are not requests of the API
    assert not [k for k in worked[1] if ("route", "/metrics") in k[1]]


def test_recall_stages_and_bank_use_are_recorded_per_replica(state, worked):
    replica = f"process-{state['pid']}"
    stage = "ray_memlane_recall_stage_ms_count"
    # every recall that answered has a total (the 404 ran none)
    assert _delta(worked, stage, stage="total", replica=replica) == RECALLS
    stages = {dict(ls)["stage"] for (n, ls), v in worked[1].items() if n == stage and v > 0}
    assert "total" in stages and len(stages) >= 3, stages
    assert _delta(worked, "ray_memlane_recall_stage_ms_sum", stage="total") > 0
    used = _delta(worked, "ray_memlane_recall_bank_hits_total", replica=replica) + _delta(
        worked, "ray_memlane_recall_bank_loads_total", replica=replica
    )
    assert used == RECALLS
    # the warm banks are read at each scrape: the bank recalled is held (it may load in the
    # background after the first recall answered from the store)
    deadline = time.monotonic() + 60
    while True:
        now = _samples(state)
        banks = _value(now, "ray_memlane_recall_warm_banks", replica=replica)
        if banks >= 1 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert banks >= 1
    assert _value(now, "ray_memlane_recall_warm_bytes", replica=replica) > 0


def test_the_stores_calls_are_recorded(worked):
    ok = "ray_memlane_store_latency_ms_count"
    assert _delta(worked, ok, operation="upsert", outcome="ok") >= RETAINS
    assert _delta(worked, "ray_memlane_store_rows_total", operation="upsert") >= RETAINS


@pytest.mark.parametrize("dashboard", ["memlane-service.json", "memlane-milvus.json"])
def test_every_memlane_metric_a_dashboard_queries_is_exported(state, worked, dashboard):
    """Every name the dashboard's queries select, with the labels they group by, except Ray
    Serve's own (``ray_serve_*``: deployments and their replicas, which this runtime has not)."""
    wanted = queried(GRAFANA / dashboard)
    ours = {name: labels for name, labels in wanted.items() if not name.startswith("ray_serve_")}
    assert len(ours) >= 3 and all(n.startswith("ray_memlane_") for n in ours), sorted(wanted)
    exported = parse_exposition(_exposition(state))
    assert missing(ours, exported) == [], f"{dashboard}: {missing(ours, exported)}"


def test_the_prometheus_export_records_as_rays_classes_do():
    """serve/metrics.py's classes over prometheus_client, without a service: the exposition
    names carry Ray's prefix, every series the process's label, and gauges read at scrape."""
    from prometheus_client import CollectorRegistry

    from serve.metrics import EndpointMetrics, PrometheusExport, RecallMetrics

    registry = CollectorRegistry()
    export = PrometheusExport(registry, {"replica": "r1"})
    endpoint = EndpointMetrics(export)
    endpoint.record(RECALL, "POST", 200, 12.0)
    endpoint.record(RECALL, "POST", 200, 30.0)
    endpoint.record(RECALL, "POST", 404, 1.0)
    held = [2]
    recall = RecallMetrics(lambda: held[0], None, export)
    recall.record({"semantic": 3.0, "total": 7.5}, hit=False)
    recall.evicted(0)
    value = registry.get_sample_value
    ok = {"route": RECALL, "method": "POST", "status": "200", "replica": "r1"}
    assert value("ray_memlane_http_requests_total", ok) == 2
    assert value("ray_memlane_http_errors_total", ok) is None  # a 200 is no error
    assert value("ray_memlane_http_errors_total", {**ok, "status": "404"}) == 1
    latency = {"route": RECALL, "method": "POST", "replica": "r1"}
    assert value("ray_memlane_http_latency_ms_count", latency) == 3
    assert value("ray_memlane_http_latency_ms_bucket", {**latency, "le": "10.0"}) == 1  # the 1 ms
    assert value("ray_memlane_http_latency_ms_bucket", {**latency, "le": "25.0"}) == 2
    assert value("ray_memlane_recall_stage_ms_sum", {"stage": "total", "replica": "r1"}) == 7.5
    assert value("ray_memlane_recall_bank_loads_total", {"replica": "r1"}) == 1
    assert value("ray_memlane_recall_bank_hits_total", {"replica": "r1"}) == 0  # exported at 0
    assert value("ray_memlane_recall_bank_evictions_total", {"replica": "r1"}) == 0
    assert value("ray_memlane_recall_warm_banks", {"replica": "r1"}) == 2
    held[0] = 5
    assert value("ray_memlane_recall_warm_banks", {"replica": "r1"}) == 5
