"""Per-endpoint metrics with ray.util.metrics: requests, errors and a latency histogram, tagged
by route template (not the raw path, which would make one series per bank) and method. They
appear on the Ray dashboard's Metrics view and its Prometheus endpoint as
``ray_memlane_http_requests_total`` and friends."""

from __future__ import annotations

from typing import Callable

# Milliseconds; recall on this machine sits around 20-60 ms, retain batches take seconds.
LATENCY_BOUNDARIES_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000]


class EndpointMetrics:
    def __init__(self) -> None:
        from ray.util.metrics import Counter, Histogram

        tags = ("route", "method")
        self.requests = Counter(
            "memlane_http_requests_total", "HTTP requests by route", tag_keys=(*tags, "status")
        )
        self.errors = Counter(
            "memlane_http_errors_total", "HTTP 4xx and 5xx answers", tag_keys=(*tags, "status")
        )
        self.latency = Histogram(
            "memlane_http_latency_ms",
            "HTTP latency by route",
            boundaries=LATENCY_BOUNDARIES_MS,
            tag_keys=tags,
        )

    def record(self, route: str, method: str, status: int, ms: float) -> None:
        tags = {"route": route, "method": method}
        self.requests.inc(tags={**tags, "status": str(status)})
        if status >= 400:
            self.errors.inc(tags={**tags, "status": str(status)})
        self.latency.observe(ms, tags=tags)


# Milliseconds per recall stage: channels take ~1-20 ms at 10k memories, a cold embed or a
# cross-encoder rerank up to a few hundred.
STAGE_BOUNDARIES_MS = [0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500]


class RecallMetrics:
    """Recall stage timings (``RecallResult.timings_ms``: embed, semantic, lexical, temporal,
    graph, fetch, rerank, total) and the banks this replica holds in its derived index. Serve's
    metric classes add the deployment, replica and application tags, so the gauge is per
    replica: ``ray_memlane_recall_stage_ms`` and ``ray_memlane_recall_warm_banks``."""

    def __init__(self, held_banks: Callable[[], int]) -> None:
        """``held_banks``: how many banks the replica holds now (read every few seconds, see
        actors/gauges.py)."""
        from ray.serve.metrics import Gauge, Histogram

        from actors.gauges import keep

        self.stage = Histogram(
            "memlane_recall_stage_ms",
            "Recall time per stage",
            boundaries=STAGE_BOUNDARIES_MS,
            tag_keys=("stage",),
        )
        warm_banks = Gauge("memlane_recall_warm_banks", "Banks held in this replica's derived index")
        keep("memlane_recall_warm_banks", warm_banks, held_banks)

    def record(self, timings_ms: dict[str, float]) -> None:
        for stage, ms in timings_ms.items():
            self.stage.observe(float(ms), tags={"stage": stage})
