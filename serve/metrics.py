"""The service's metrics, named once for both runtimes: per-endpoint requests, errors and a
latency histogram, tagged by route template (not the raw path, which would make one series per
bank) and method, and recall's stage timings and warm banks. Each class records through an
export (actors/metric_export.py):

* the Ray runtime: Ray's metric classes (the default), exported by Ray's metrics agent on each
  node as ``ray_memlane_http_requests_total`` and friends;
* the one-process runtime (serve/process.py), which has no Ray: :class:`PrometheusExport`,
  prometheus_client in the process's own registry, served at the service's ``/metrics`` under
  the same names, Ray's ``ray_`` prefix included. So infra/grafana/'s dashboards and
  infra/prometheus/ query one set of names whatever the runtime (the other way, queries that
  match either name, would leave each metric two names and every query harder to read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from actors.metric_export import Export, RayExport

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# Milliseconds; recall on this machine sits around 20-60 ms, retain batches take seconds.
LATENCY_BOUNDARIES_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000]

# What Ray's metrics agent puts before every name; the one-process runtime exports the same.
EXPORTED_PREFIX = "ray_"


class EndpointMetrics:
    """``ray_memlane_http_requests_total``, ``..._errors_total`` (4xx and 5xx) by route, method
    and status, and ``ray_memlane_http_latency_ms`` by route and method."""

    def __init__(self, export: Export | None = None) -> None:
        """``export``: where they go; ray.util.metrics by default (the Ray runtime's Ingress)."""
        export = export or RayExport()
        tags = ("route", "method")
        self.requests = export.counter(
            "memlane_http_requests_total", "HTTP requests by route", (*tags, "status")
        )
        self.errors = export.counter(
            "memlane_http_errors_total", "HTTP 4xx and 5xx answers", (*tags, "status")
        )
        self.latency = export.histogram(
            "memlane_http_latency_ms", "HTTP latency by route", LATENCY_BOUNDARIES_MS, tags
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
    load it, evictions (counters), and load time. Tagged by replica (Serve's metric classes add
    the deployment, replica and application tags; the one-process runtime its ``replica``):
    ``ray_memlane_recall_stage_ms``, ``ray_memlane_recall_warm_banks``,
    ``ray_memlane_recall_warm_bytes``, ``ray_memlane_recall_bank_hits_total``,
    ``..._bank_loads_total``, ``..._bank_evictions_total``, ``ray_memlane_recall_bank_load_ms``."""

    def __init__(self, held_banks: Callable[[], int], warm: Any = None, export: Export | None = None) -> None:
        """``held_banks``: how many banks the replica holds now; ``warm``: its WarmBanks (for
        the bytes gauge); both read whenever the gauges are exported. ``export``: where they
        go; Ray Serve's metric classes by default (the Ray runtime's Ingress)."""
        export = export or RayExport(serve=True)
        self.stage = export.histogram(
            "memlane_recall_stage_ms", "Recall time per stage", STAGE_BOUNDARIES_MS, ("stage",)
        )
        export.gauge("memlane_recall_warm_banks", "Banks held in this replica's derived index", held_banks)
        if warm is not None:
            export.gauge(
                "memlane_recall_warm_bytes", "Estimated bytes of this replica's warm banks", warm.total_bytes
            )
        self.hits = export.counter(
            "memlane_recall_bank_hits_total", "Recalls whose bank this replica held warm"
        )
        self.loads = export.counter("memlane_recall_bank_loads_total", "Recalls that loaded their bank first")
        self.evictions = export.counter(
            "memlane_recall_bank_evictions_total", "Banks evicted from this replica"
        )
        self.load_ms = export.histogram(
            "memlane_recall_bank_load_ms",
            "Recall time when the bank had to be loaded first",
            LATENCY_BOUNDARIES_MS,
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


class PrometheusExport:
    """prometheus_client metrics in ``registry`` (the one-process runtime's, served at its
    ``/metrics``), named as Ray's agent exports them (:data:`EXPORTED_PREFIX` + the name), each
    series labelled with ``labels`` besides its own tags (the process's ``replica``, as Serve
    tags a replica's metrics). Thread-safe: recall and the writes record from worker threads."""

    def __init__(self, registry: CollectorRegistry, labels: dict[str, str] | None = None) -> None:
        self.registry = registry
        self.labels = dict(labels or {})

    def counter(self, name: str, description: str, tag_keys: tuple[str, ...] = ()) -> _Series:
        from prometheus_client import Counter

        metric = Counter(
            EXPORTED_PREFIX + name, description, (*tag_keys, *self.labels), registry=self.registry
        )
        return _Series(metric, self.labels, tag_keys)

    def histogram(
        self, name: str, description: str, boundaries: Sequence[float], tag_keys: tuple[str, ...] = ()
    ) -> _Series:
        from prometheus_client import Histogram

        metric = Histogram(
            EXPORTED_PREFIX + name,
            description,
            (*tag_keys, *self.labels),
            registry=self.registry,
            buckets=[float(b) for b in boundaries],
        )
        return _Series(metric, self.labels, tag_keys)

    def gauge(self, name: str, description: str, read: Callable[[], float]) -> None:
        from prometheus_client import Gauge

        gauge = Gauge(EXPORTED_PREFIX + name, description, tuple(self.labels), registry=self.registry)
        # read at each scrape: never stale, nothing to refresh
        (gauge.labels(**self.labels) if self.labels else gauge).set_function(read)


class _Series:
    """A prometheus_client metric called as Ray's are: ``inc(value, tags=...)``,
    ``observe(value, tags=...)``."""

    def __init__(self, metric: Any, labels: dict[str, str], tag_keys: tuple[str, ...]) -> None:
        self.metric, self.labels = metric, labels
        self.labelled = bool(labels or tag_keys)
        if labels and not tag_keys:
            metric.labels(**labels)  # its one series, exported (at 0) before the first record

    def _child(self, tags: dict[str, str] | None) -> Any:
        return self.metric.labels(**(tags or {}), **self.labels) if self.labelled else self.metric

    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        self._child(tags).inc(value)

    def observe(self, value: float, tags: dict[str, str] | None = None) -> None:
        self._child(tags).observe(value)
