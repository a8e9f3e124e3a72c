"""infra/grafana/ and infra/prometheus/ without a cluster: the committed dashboards are what
scripts/dashboards.py generates, they decode through Grafana's types (grafana-foundation-sdk)
unchanged, and every query names Ray-exported metrics only. That those metrics really are
exported is checked live in tests/serving/test_dashboards_live.py and
tests/pipelines/test_backfill_dashboard.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from dashboard_metrics import dashboard_files, grouping_labels, metric_names, queried, targets

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["memlane-backfill.json", "memlane-milvus.json", "memlane-service.json"]


def _generator():
    spec = importlib.util.spec_from_file_location("dashboards", ROOT / "scripts" / "dashboards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_dashboards_are_what_the_generator_writes(tmp_path):
    gen = _generator()
    assert sorted(gen.DASHBOARDS) == NAMES == [p.name for p in dashboard_files()]
    assert gen.main(["--out", str(tmp_path)]) == 0
    for name in NAMES:
        assert (ROOT / "infra" / "grafana" / name).read_text() == (tmp_path / name).read_text(), (
            f"infra/grafana/{name} differs from scripts/dashboards.py's output: run "
            "python scripts/dashboards.py"
        )
    assert gen.main(["--check"]) == 0
    (tmp_path / NAMES[0]).write_text("{}\n")  # and --check does notice a stale file
    assert gen.main(["--check", "--out", str(tmp_path)]) == 1


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_decodes_through_grafanas_types_unchanged(name):
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()  # panel options and Prometheus queries decode to their types
    raw = json.loads((ROOT / "infra" / "grafana" / name).read_text())
    # The SDK's decoder keeps only fields Grafana's schema defines: a misspelt or unknown key
    # anywhere (panel, target, field config, variable) would not survive the round trip.
    again = json.loads(JSONEncoder().encode(Dashboard.from_json(raw)))
    assert again == raw
    # ...as a misspelt key shows: it is dropped, so the round trip differs.
    raw["panels"][-1]["tagrets"] = raw["panels"][-1].pop("targets")
    assert json.loads(JSONEncoder().encode(Dashboard.from_json(raw))) != raw


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_structure(name):
    dash = json.loads((ROOT / "infra" / "grafana" / name).read_text())
    assert dash["uid"] == name.removesuffix(".json") and dash["title"].startswith("Memlane / ")
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource"]
    for panel in dash["panels"]:
        assert 0 <= panel["gridPos"]["x"] and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] in ("row", "text"):
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
    assert targets(ROOT / "infra" / "grafana" / name)


@pytest.mark.parametrize("name", NAMES)
def test_every_query_names_ray_exported_metrics(name):
    path = ROOT / "infra" / "grafana" / name
    for title, expr in targets(path):
        names = metric_names(expr)
        assert names, f"{title}: no metric found in {expr!r}"
        assert all(n.startswith("ray_") for n in names), f"{title}: {sorted(names)} from {expr!r}"
    assert queried(path)


def test_promql_reader():
    expr = (
        'histogram_quantile(0.95, sum by (le, stage) (rate(ray_a_bucket{outcome="ok", x=~"a|b"}[$__rate_interval])))'
        " / on (stage) group_left sum without (pod) (ray_b) > bool 0 or vector(1)"
    )
    assert metric_names(expr) == {"ray_a_bucket", "ray_b"}
    assert grouping_labels(expr) == {"stage"}
    assert metric_names("sum(rate(ray_x_total[5m])) by (route)") == {"ray_x_total"}
    assert grouping_labels("sum(rate(ray_x_total[5m])) by (route, method)") == {"route", "method"}


def test_prometheus_config_reads_rays_service_discovery_file():
    config = yaml.safe_load((ROOT / "infra" / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    files = [f for sd in jobs["ray"]["file_sd_configs"] for f in sd["files"]]
    assert files == ["/tmp/ray/prom_metrics_service_discovery.json"]
    # Ray's own template (shipped with the installed Ray) points at the same file.
    import ray

    template = Path(ray.__file__).parent / "dashboard/modules/metrics/export/prometheus/prometheus.yml"
    theirs = yaml.safe_load(template.read_text())
    assert theirs["scrape_configs"][0]["file_sd_configs"][0]["files"] == files
    pods = yaml.safe_load((ROOT / "infra" / "prometheus" / "podmonitor-ray.yaml").read_text())
    assert pods["kind"] == "PodMonitor"
    assert [e["port"] for e in pods["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert pods["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "memlane"}


@pytest.mark.parametrize("manifest", ["rayservice-memlane.yaml", "rayjob-backfill.yaml"])
def test_kuberay_pods_export_metrics_where_prometheus_looks(manifest):
    """Every Ray pod names the metrics port that infra/prometheus/ scrapes (the PodMonitor's
    named port, the annotations' number) and Ray's metrics-export-port is that number."""
    doc = yaml.safe_load((ROOT / "infra" / manifest).read_text())
    cluster = doc["spec"].get("rayClusterConfig") or doc["spec"]["rayClusterSpec"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        port = group["rayStartParams"]["metrics-export-port"]
        annotations = group["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == port
        pod_labels = group["template"]["metadata"]["labels"]
        assert pod_labels["app.kubernetes.io/name"] == "memlane"  # the PodMonitor's selector
        ports = {p["name"]: p["containerPort"] for p in group["template"]["spec"]["containers"][0]["ports"]}
        assert ports["metrics"] == int(port)
