"""Ray gauges that stay exported while their process lives.

Ray 2.60's metrics agent drops a gauge value that was not refreshed within two export
intervals (20 s by default: ray/_private/telemetry/open_telemetry_metric_recorder.py), and a
process sends a gauge again only when it is set again. A gauge set once (a Recall replica's
warm banks after warm-up, a backfill's progress at its end) vanished from a real Prometheus
about 20 s later. :func:`keep` re-sets each kept gauge from its reader every few seconds on
one daemon thread per process."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

log = logging.getLogger(__name__)

# Well inside the agent's 2 x export interval (10 s by default; 1 s at the least).
REFRESH_S = 2.0

_kept: dict[str, tuple[Any, Callable[[], float]]] = {}
_lock = threading.Lock()
_thread: threading.Thread | None = None


def keep(key: str, gauge: Any, read: Callable[[], float]) -> None:
    """Set ``gauge`` to ``read()`` now and every REFRESH_S seconds. A later call with the same
    ``key`` replaces the earlier one (a second backfill run in one driver, say)."""
    global _thread
    gauge.set(read())
    with _lock:
        _kept[key] = (gauge, read)
        if _thread is None:
            _thread = threading.Thread(target=_refresh, name="memlane-gauges", daemon=True)
            _thread.start()


def _refresh() -> None:
    import ray

    while True:
        time.sleep(REFRESH_S)
        if not ray.is_initialized():  # a driver after ray.shutdown (a test session, a notebook)
            continue
        with _lock:
            items = list(_kept.values())
        for gauge, read in items:
            try:
                gauge.set(read())
            except Exception:  # noqa: BLE001 - a metric must never take its process down
                pass


def export_held_state(derived: Any, gauge: Any = None, kind: str = "") -> None:
    """Export the per-bank state a process holds under the engine's budget (memlane/derived.py:
    banks, estimated bytes) as the Ingress exports its warm banks: ``ray_memlane_recall_warm_
    banks`` and ``..._bytes``. ``gauge``: Serve's Gauge class in a replica (it adds the
    deployment tag); by default Ray's, tagged ``deployment=kind`` (an actor's class name), so
    one query covers every deployment and actor. Outside Ray (a test, a tool) it exports nothing."""
    if gauge is None:
        from ray.util.metrics import Gauge

        def gauge(name: str, description: str) -> Any:
            g = Gauge(name, description, tag_keys=("deployment",))
            g.set_default_tags({"deployment": kind})
            return g

    try:
        banks = gauge("memlane_recall_warm_banks", "Banks whose derived state this process holds")
        held = gauge("memlane_recall_warm_bytes", "Estimated bytes of the derived state this process holds")
        keep("memlane_recall_warm_banks", banks, derived.held_banks)
        keep("memlane_recall_warm_bytes", held, derived.held_bytes)
    except Exception:  # noqa: BLE001 - a metric must never take its process down
        log.debug("the held-state gauges are not exported here", exc_info=True)
