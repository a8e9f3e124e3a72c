"""Ray metrics of the Milvus store as its client sees it (memlane.stores.milvus.observe):
latency per operation with the outcome, and rows per operation. Milvus Lite exports no metrics
of its own, so these are the Milvus dashboard of a local or Lite deployment; a Milvus server's
own metrics come beside them. Installed once per process by the retain workers and the Serve
replicas that hold a store; the one-process runtime records them with prometheus_client
(serve/process.py)."""

from __future__ import annotations

import threading

from actors.metric_export import Export, RayExport

# Milliseconds: a point lookup on loopback ~1 ms, a flush or a 1,000-row upsert up to seconds.
STORE_BOUNDARIES_MS = [0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000]

_installed = False
_lock = threading.Lock()


class StoreMetrics:
    """``ray_memlane_store_latency_ms{operation, outcome}`` (outcome ``ok`` or ``error``: the
    error rate is the histogram's count with ``outcome="error"``, so the series exists before
    the first error) and ``ray_memlane_store_rows_total{operation}``."""

    def __init__(self, export: Export | None = None) -> None:
        """``export``: where they go (actors/metric_export.py); Ray's metrics by default."""
        export = export or RayExport()
        self.latency = export.histogram(
            "memlane_store_latency_ms",
            "Milvus client call latency by operation and outcome",
            STORE_BOUNDARIES_MS,
            ("operation", "outcome"),
        )
        self.rows = export.counter(
            "memlane_store_rows_total",
            "Rows written (upsert, insert), deleted or read (query, search) by operation",
            ("operation",),
        )

    def __call__(self, operation: str, seconds: float, ok: bool, rows: int) -> None:
        self.latency.observe(
            seconds * 1000, tags={"operation": operation, "outcome": "ok" if ok else "error"}
        )
        if rows > 0:
            self.rows.inc(rows, tags={"operation": operation})


def install_store_metrics() -> bool:
    """Record this process's store calls into Ray metrics (idempotent); False outside Ray."""
    global _installed
    from memlane.stores.milvus.observe import add_observer

    with _lock:
        if _installed:
            return True
        try:
            metrics = StoreMetrics()
        except Exception:  # noqa: BLE001 - no Ray worker context (a plain unit use)
            return False
        add_observer(metrics)
        _installed = True
        return True
