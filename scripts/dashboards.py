"""Generate the Grafana dashboards in infra/grafana/ from code.

    python scripts/dashboards.py            # write infra/grafana/*.json
    python scripts/dashboards.py --check    # exit 1 when a committed file differs

Built with grafana-foundation-sdk (Grafana's own typed builders, generated from Grafana's
schema; the 11.6 types), so a panel, a target or an option the schema does not have is a
Python error here, not a dashboard that silently shows nothing. ``tests/infra/`` checks that
the committed JSON is what this script writes, that it decodes back through the SDK's types
unchanged, and (against a live ``memlane serve`` and a live backfill) that every metric any
panel queries is exported by Ray.

Every metric comes from Ray's metrics endpoint, so every name carries Ray's ``ray_`` prefix:
Memlane's own (serve/metrics.py, actors/store_metrics.py, actors/retain.py,
pipelines/backfill.py) and Ray Serve's. ``memlane serve``'s one-process runtime, which has no
Ray, serves Memlane's service and store metrics at its own ``/metrics`` under the same names
(serve/process.py), so these queries read either runtime. Queries aggregate away Ray's
per-worker labels (WorkerId, SessionName, ...) and keep the ones a reader needs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as Stat
from grafana_foundation_sdk.builders.text import Panel as Text
from grafana_foundation_sdk.builders.timeseries import Panel as Timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

OUT = Path(__file__).resolve().parent.parent / "infra" / "grafana"
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"
TAGS = ["memlane"]


def _query(expr: str, legend: str, ref: str) -> Dataquery:
    return Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS)


def timeseries(title: str, unit: str, targets: list[tuple[str, str]], *, description: str = "", w: int = 12):
    """A time series panel; ``targets`` are (PromQL, legend) pairs."""
    panel = Timeseries().title(title).unit(unit).datasource(DS).height(8).span(w).fill_opacity(10)
    if description:
        panel = panel.description(description)
    for i, (expr, legend) in enumerate(targets):
        panel = panel.with_target(_query(expr, legend, chr(ord("A") + i)))
    return panel


def stat(title: str, unit: str, expr: str, legend: str, *, description: str = "", w: int = 6):
    panel = Stat().title(title).unit(unit).datasource(DS).height(5).span(w)
    if description:
        panel = panel.description(description)
    return panel.with_target(_query(expr, legend, "A"))


def quantiles(metric: str, by: str, qs: tuple[float, ...] = (0.5, 0.95, 0.99), where: str = ""):
    """(PromQL, legend) of ``histogram_quantile`` per quantile, per value of ``by``."""
    return [
        (
            f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{where}[{RATE}])))",
            f"p{int(q * 100)} {{{{{by}}}}}",
        )
        for q in qs
    ]


def _dashboard(uid: str, title: str, description: str) -> Dashboard:
    return (
        Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    )


def service() -> Dashboard:
    return (
        _dashboard(
            "memlane-service",
            "Memlane / Service",
            "The online service (memlane serve, infra/rayservice-memlane.yaml): HTTP by route, "
            "recall stages, banks held by recall replicas, and Ray Serve's replicas (the Ray "
            "runtime only; the one-process runtime exports the rest at its /metrics).",
        )
        .with_row(Row("HTTP (Ingress, by route template)"))
        .with_panel(
            timeseries(
                "Requests / s by route",
                "reqps",
                [
                    (
                        f"sum by (route, method) (rate(ray_memlane_http_requests_total[{RATE}]))",
                        "{{method}} {{route}}",
                    )
                ],
            )
        )
        .with_panel(
            timeseries(
                "Errors / s by route and status",
                "reqps",
                [
                    (
                        f"sum by (route, status) (rate(ray_memlane_http_errors_total[{RATE}]))",
                        "{{status}} {{route}}",
                    )
                ],
                description="4xx and 5xx answers (serve/metrics.py).",
            )
        )
        .with_panel(
            timeseries(
                "Latency by route",
                "ms",
                quantiles("ray_memlane_http_latency_ms", "route"),
                description="From the Ingress middleware: auth, validation and the deployment call.",
                w=16,
            )
        )
        .with_panel(
            stat(
                "Error share (5 min)",
                "percentunit",
                "(sum(rate(ray_memlane_http_errors_total[5m])) or vector(0)) / "
                "sum(rate(ray_memlane_http_requests_total[5m]))",
                "errors",
                w=8,
            )
        )
        .with_row(Row("Recall"))
        .with_panel(
            timeseries(
                "Recall stage p95",
                "ms",
                quantiles("ray_memlane_recall_stage_ms", "stage", (0.95,)),
                description="RecallResult.timings_ms: embed, semantic, lexical, temporal, graph, "
                "fetch, rerank and total.",
            )
        )
        .with_panel(
            timeseries(
                "Recall stage mean",
                "ms",
                [
                    (
                        f"sum by (stage) (rate(ray_memlane_recall_stage_ms_sum[{RATE}])) / "
                        f"sum by (stage) (rate(ray_memlane_recall_stage_ms_count[{RATE}]))",
                        "{{stage}}",
                    )
                ],
            )
        )
        .with_panel(
            timeseries(
                "Warm banks per recall replica",
                "short",
                [("sum by (replica) (ray_memlane_recall_warm_banks)", "{{replica}}")],
                description="Banks held in the replica's in-process index (memlane/derived.py); "
                "a bank not held is loaded on its first recall.",
            )
        )
        .with_panel(
            timeseries(
                "Recalls / s per replica",
                "reqps",
                [
                    (
                        f'sum by (replica) (rate(ray_memlane_recall_stage_ms_count{{stage="total"}}[{RATE}]))',
                        "{{replica}}",
                    )
                ],
            )
        )
        .with_row(Row("Replicas (Ray Serve)"))
        .with_panel(
            timeseries(
                "Healthy replicas by deployment",
                "short",
                [("sum by (deployment) (ray_serve_deployment_replica_healthy)", "{{deployment}}")],
            )
        )
        .with_panel(
            timeseries(
                "Autoscaling: target replicas by deployment",
                "short",
                [("max by (deployment) (ray_serve_autoscaling_target_replicas)", "{{deployment}}")],
            )
        )
        .with_panel(
            timeseries(
                "Requests / s by deployment",
                "reqps",
                [
                    (
                        f"sum by (deployment) (rate(ray_serve_deployment_request_counter_total[{RATE}]))",
                        "{{deployment}}",
                    )
                ],
            )
        )
        .with_panel(
            timeseries(
                "Errors / s by deployment",
                "reqps",
                [
                    (
                        f"sum by (deployment) (rate(ray_serve_deployment_error_counter_total[{RATE}]))",
                        "{{deployment}}",
                    )
                ],
                description="Exceptions raised in a replica (an engine error mapped to a 4xx "
                "counts here too).",
            )
        )
        .with_panel(
            timeseries(
                "Processing latency p95 by deployment",
                "ms",
                quantiles("ray_serve_deployment_processing_latency_ms", "deployment", (0.95,)),
            )
        )
        .with_panel(
            timeseries(
                "Ongoing and queued requests by deployment",
                "short",
                [
                    ("sum by (deployment) (ray_serve_replica_processing_queries)", "ongoing {{deployment}}"),
                    ("sum by (deployment) (ray_serve_deployment_queued_queries)", "queued {{deployment}}"),
                ],
            )
        )
    )


def backfill() -> Dashboard:
    return (
        _dashboard(
            "memlane-backfill",
            "Memlane / Backfill",
            "The Ray Data backfill (memlane backfill, infra/rayjob-backfill.yaml): throughput, "
            "rejects, per-stage latency and progress. The consolidation job does not exist yet.",
        )
        .with_panel(
            Text()
            .title("About")
            .height(3)
            .span(24)
            .content(
                "Worker metrics (actors/retain.py) and driver metrics (pipelines/backfill.py). "
                "Progress is the driver's share of this run's banks finished. A consolidation "
                "job (observations, opinions in bulk) does not exist yet and has no dashboard."
            )
        )
        .with_row(Row("Throughput"))
        .with_panel(
            stat(
                "Progress",
                "percentunit",
                "max(ray_memlane_backfill_progress)",
                "progress",
                description="Banks retained or failed / banks this run retains.",
            )
        )
        .with_panel(stat("Banks planned", "short", "max(ray_memlane_backfill_banks_planned)", "banks"))
        .with_panel(
            stat(
                "Banks by status",
                "short",
                "sum by (status) (ray_memlane_backfill_banks_total)",
                "{{status}}",
            )
        )
        .with_panel(stat("Turns read", "short", "sum(ray_memlane_backfill_turns_read_total)", "turns"))
        .with_panel(
            timeseries(
                "Rows / s",
                "rowsps",
                [
                    (f"sum(rate(ray_memlane_backfill_turns_retained_total[{RATE}]))", "turns retained"),
                    (f"sum(rate(ray_memlane_backfill_memories_written_total[{RATE}]))", "memories written"),
                ],
            )
        )
        .with_panel(
            timeseries(
                "Rejects by stage",
                "short",
                [("sum by (stage) (ray_memlane_backfill_rejects_total)", "{{stage}}")],
                description="read: records that failed validation; retain: the turns of banks "
                "that failed twice. Reasons are in the rejects file.",
            )
        )
        .with_row(Row("Latency"))
        .with_panel(
            timeseries(
                "Retain stage p95",
                "s",
                quantiles("ray_memlane_backfill_stage_seconds", "stage", (0.95,)),
                description="Seconds per retain stage, per bank.",
            )
        )
        .with_panel(
            timeseries(
                "Seconds per bank",
                "s",
                [
                    (
                        f"histogram_quantile({q}, sum by (le) (rate(ray_memlane_backfill_bank_seconds_bucket[{RATE}])))",
                        f"p{int(q * 100)}",
                    )
                    for q in (0.5, 0.95)
                ],
            )
        )
    )


def milvus() -> Dashboard:
    written = 'operation=~"upsert|insert|delete"'
    read = 'operation=~"query|search"'
    return (
        _dashboard(
            "memlane-milvus",
            "Memlane / Milvus (client side)",
            "The store of record as Memlane's clients see it (memlane.stores.milvus.observe, "
            "recorded by actors/store_metrics.py in Serve replicas, backfill workers and the "
            "one-process service). Milvus Lite exports no metrics; for a Milvus server's "
            "internals use Milvus's own dashboard.",
        )
        .with_panel(
            timeseries(
                "Calls / s by operation",
                "ops",
                [
                    (
                        f"sum by (operation) (rate(ray_memlane_store_latency_ms_count[{RATE}]))",
                        "{{operation}}",
                    )
                ],
            )
        )
        .with_panel(
            timeseries(
                "Errors / s by operation",
                "ops",
                [
                    (
                        f'sum by (operation) (rate(ray_memlane_store_latency_ms_count{{outcome="error"}}[{RATE}]))'
                        f" or 0 * sum by (operation) (rate(ray_memlane_store_latency_ms_count[{RATE}]))",
                        "{{operation}}",
                    )
                ],
                description="Calls that raised (connection lost, timeouts, server errors); 0 for "
                "an operation called without errors.",
            )
        )
        .with_panel(
            timeseries(
                "Latency p95 by operation",
                "ms",
                quantiles("ray_memlane_store_latency_ms", "operation", (0.95,), '{outcome="ok"}'),
            )
        )
        .with_panel(
            timeseries(
                "Latency p50 by operation",
                "ms",
                quantiles("ray_memlane_store_latency_ms", "operation", (0.5,), '{outcome="ok"}'),
            )
        )
        .with_panel(
            timeseries(
                "Rows written / s",
                "rowsps",
                [
                    (
                        f"sum by (operation) (rate(ray_memlane_store_rows_total{{{written}}}[{RATE}]))",
                        "{{operation}}",
                    )
                ],
                description="Rows sent by upserts and inserts, rows deleted.",
            )
        )
        .with_panel(
            timeseries(
                "Rows read / s",
                "rowsps",
                [
                    (
                        f"sum by (operation) (rate(ray_memlane_store_rows_total{{{read}}}[{RATE}]))",
                        "{{operation}}",
                    )
                ],
            )
        )
    )


DASHBOARDS = {
    "memlane-service.json": service,
    "memlane-backfill.json": backfill,
    "memlane-milvus.json": milvus,
}


def render(builder: Dashboard) -> str:
    """The dashboard's JSON as committed: sorted keys, 2-space indent, a final newline. Panels
    are numbered in order (the builders leave ids to the caller; Grafana links use them)."""
    model = builder.build()
    for n, panel in enumerate(model.panels or [], start=1):
        panel.id_val = n
    return JSONEncoder(sort_keys=True, indent=2).encode(model) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with infra/grafana/, write nothing")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        text = render(build())
        path = args.out / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)} (run python scripts/dashboards.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
