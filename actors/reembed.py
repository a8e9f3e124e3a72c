"""The re-embed actor of ``pipelines.reembed``: one engine per actor, built with the target
embedder, one bank per row.

Each call re-embeds one bank with :func:`memlane.reembed.reembed_bank` (its units and tree
nodes, in writes under the bank's lease, the bank record switched in the last one). A bank
that fails is reported with ``status="failed"`` and its error, left marked as being
re-embedded (recall and retain refuse it until a re-run finishes it), and the job goes on.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from actors.gauges import export_held_state

log = logging.getLogger(__name__)

# Per bank on 2 cores: a LoCoMo bank (~600 units) in seconds, a LongMemEval one in tens.
_BOUNDARIES = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180, 600, 1800]
# The columns a call returns (one row per bank).
COLUMNS = ("bank_id", "status", "error", "source", "target", "units", "tree_nodes", "seconds", "worker_pid")


class _Metrics:
    """``ray_memlane_reembed_rows_total{kind}`` (kind ``units`` or ``tree_nodes``: vectors
    rewritten), ``ray_memlane_reembed_banks_total{status}`` and the seconds per bank."""

    def __init__(self) -> None:
        from ray.util.metrics import Counter, Histogram

        self.rows = Counter(
            "memlane_reembed_rows",
            "Stored vectors re-embedded, by kind (units, tree_nodes).",
            tag_keys=("kind",),
        )
        self.banks = Counter(
            "memlane_reembed_banks",
            "Banks re-embedded, by status (done, unchanged, failed).",
            tag_keys=("status",),
        )
        self.bank_seconds = Histogram(
            "memlane_reembed_bank_seconds", "Seconds to re-embed one bank.", boundaries=_BOUNDARIES
        )


def reembed_row(memory: Any, bank_id: str, retain: Any, stop_after: int | None = None) -> dict[str, Any]:
    """Re-embed one bank with ``memory``'s embedder (the target) under ``retain`` settings:
    its result row (``COLUMNS``). A bank that fails is reported with ``status="failed"`` and
    its error, never raised. The one row of both runners: a Ray Data actor's and the
    in-process loop's (pipelines/reembed.py)."""
    from memlane.reembed import reembed_bank

    t0 = time.perf_counter()
    report: dict[str, Any] = {}
    error = ""
    try:
        report = reembed_bank(
            memory.store, memory.writer, memory.embedder, bank_id, retain, stop_after=stop_after
        ).as_dict()
    except Exception as exc:  # noqa: BLE001 - reported per bank, the job goes on
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]
        log.warning("re-embedding bank %s failed: %s", bank_id, error)
    finally:
        memory.derived.evict(bank_id)  # keep the process's memory bounded
    return {
        "bank_id": bank_id,
        "status": report.get("status", "failed"),
        "error": error,
        "source": str(report.get("source", "")),
        "target": str(report.get("target", memory.embedder.name)),
        "units": int(report.get("units", 0)),
        "tree_nodes": int(report.get("tree_nodes", 0)),
        "seconds": time.perf_counter() - t0,
        "worker_pid": os.getpid(),
    }


class ReembedWorker:
    """Callable class for ``Dataset.map_batches``: ``{"bank_id": [...]}`` in, one row per bank
    out (see ``COLUMNS``).

    ``settings``: keyword arguments of :class:`memlane.settings.Settings`, whose
    ``models.embedder`` is the target (see :func:`actors.engine_settings.engine_settings` for
    threads and the GPU). ``stop_after``: end each bank after that many writes (tests: a run
    killed midway)."""

    def __init__(
        self, settings: dict[str, Any], use_gpu: bool = False, stop_after: int | None = None
    ) -> None:
        from actors.engine_settings import engine_settings, open_engine

        self.settings = engine_settings(settings, use_gpu=use_gpu)
        self.memory = open_engine(self.settings)
        self.stop_after = stop_after
        try:
            self.metrics: _Metrics | None = _Metrics()
        except Exception:  # noqa: BLE001 - metrics are optional outside a Ray worker
            self.metrics = None
        export_held_state(self.memory.derived, kind=type(self).__name__)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, list] = {k: [] for k in COLUMNS}
        for bank_id in batch["bank_id"]:
            rec = reembed_row(self.memory, str(bank_id), self.settings.retain, self.stop_after)
            for key in COLUMNS:
                out[key].append(rec[key])
            if self.metrics is not None:
                self.metrics.banks.inc(1, tags={"status": rec["status"]})
                self.metrics.bank_seconds.observe(rec["seconds"])
                for kind in ("units", "tree_nodes"):
                    if rec[kind]:
                        self.metrics.rows.inc(int(rec[kind]), tags={"kind": kind})
        return out

    def __del__(self) -> None:
        try:
            self.memory.close()
        except Exception:  # noqa: BLE001
            pass
