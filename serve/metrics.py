"""Per-endpoint metrics with ray.util.metrics: requests, errors and a latency histogram, tagged
by route template (not the raw path, which would make one series per bank) and method. They
appear on the Ray dashboard's Metrics view and its Prometheus endpoint as
``ray_memlane_http_requests_total`` and friends."""

from __future__ import annotations

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
