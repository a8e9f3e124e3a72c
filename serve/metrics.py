"""Per-endpoint metrics with ray.util.metrics: requests, errors and a latency histogram, tagged
by route template (not the raw path, which would make one series per bank) and method. They
appear on the Ray dashboard's Metrics view and its Prometheus endpoint as
``ray_memlane_http_requests_total`` and friends. The one-process runtime has no Ray, so no
metrics agent to export through: it records nothing (:class:`NoMetrics`)."""

from __future__ import annotations

from typing import Any, Callable

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
    graph, fetch, rerank, total) and this replica's warm banks (serve/bank_host.py): how many
    it holds and their estimated bytes (gauges), recalls that found their bank warm or had to
    load it, evictions (counters), and load time. Serve's metric classes add the deployment,
    replica and application tags: ``ray_memlane_recall_stage_ms``,
    ``ray_memlane_recall_warm_banks``, ``ray_memlane_recall_warm_bytes``,
    ``ray_memlane_recall_bank_hits_total``, ``..._bank_loads_total``,
    ``..._bank_evictions_total``, ``ray_memlane_recall_bank_load_ms``."""

    def __init__(self, held_banks: Callable[[], int], warm: Any = None) -> None:
        """``held_banks``: how many banks the replica holds now; ``warm``: its WarmBanks (for
        the bytes gauge); both read every few seconds (actors/gauges.py)."""
        from ray.serve.metrics import Counter, Gauge, Histogram

        from actors.gauges import keep

        self.stage = Histogram(
            "memlane_recall_stage_ms",
            "Recall time per stage",
            boundaries=STAGE_BOUNDARIES_MS,
            tag_keys=("stage",),
        )
        warm_banks = Gauge("memlane_recall_warm_banks", "Banks held in this replica's derived index")
        keep("memlane_recall_warm_banks", warm_banks, held_banks)
        if warm is not None:
            warm_bytes = Gauge("memlane_recall_warm_bytes", "Estimated bytes of this replica's warm banks")
            keep("memlane_recall_warm_bytes", warm_bytes, warm.total_bytes)
        self.hits = Counter("memlane_recall_bank_hits_total", "Recalls whose bank this replica held warm")
        self.loads = Counter("memlane_recall_bank_loads_total", "Recalls that loaded their bank first")
        self.evictions = Counter("memlane_recall_bank_evictions_total", "Banks evicted from this replica")
        self.load_ms = Histogram(
            "memlane_recall_bank_load_ms",
            "Recall time when the bank had to be loaded first",
            boundaries=LATENCY_BOUNDARIES_MS,
        )

    def record(self, timings_ms: dict[str, float], *, hit: bool = True) -> None:
        for stage, ms in timings_ms.items():
            self.stage.observe(float(ms), tags={"stage": stage})
        (self.hits if hit else self.loads).inc()

    def evicted(self, banks: int) -> None:
        """``banks`` left this replica (the budget's evictions, Serve's unloads); 0: none."""
        if banks > 0:  # Ray's counters refuse an increment of 0
            self.evictions.inc(banks)

    def loaded(self, ms: float) -> None:
        self.load_ms.observe(ms)


class NoMetrics:
    """The metrics of the one-process runtime (serve/process.py): none recorded. Stands for
    :class:`EndpointMetrics` and :class:`RecallMetrics` (built with the same arguments)."""

    def __init__(self, *_: Any) -> None:
        pass

    def record(self, *_: Any, **__: Any) -> None:
        pass

    def evicted(self, banks: int) -> None:
        pass

    def loaded(self, ms: float) -> None:
        pass
