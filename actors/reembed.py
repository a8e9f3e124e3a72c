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

    def reembed(self, bank_id: str) -> dict[str, Any]:
        """Re-embed one bank; its :class:`memlane.reembed.ReembedReport` as a dict."""
        from memlane.reembed import reembed_bank

        m = self.memory
        return reembed_bank(
            m.store, m.writer, m.embedder, bank_id, self.settings.retain, stop_after=self.stop_after
        ).as_dict()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, list] = {k: [] for k in COLUMNS}
        for bank_id in batch["bank_id"]:
            bank_id = str(bank_id)
            t0 = time.perf_counter()
            report: dict[str, Any] = {}
            error = ""
            try:
                report = self.reembed(bank_id)
            except Exception as exc:  # noqa: BLE001 - reported per bank, the job goes on
                error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]
                log.warning("re-embedding bank %s failed: %s", bank_id, error)
            finally:
                self.memory.derived.evict(bank_id)  # keep the actor's memory bounded
            seconds = time.perf_counter() - t0
            status = report.get("status", "failed")
            out["bank_id"].append(bank_id)
            out["status"].append(status)
            out["error"].append(error)
            out["source"].append(str(report.get("source", "")))
            out["target"].append(str(report.get("target", self.memory.embedder.name)))
            out["units"].append(int(report.get("units", 0)))
            out["tree_nodes"].append(int(report.get("tree_nodes", 0)))
            out["seconds"].append(seconds)
            out["worker_pid"].append(os.getpid())
            if self.metrics is not None:
                self.metrics.banks.inc(1, tags={"status": status})
                self.metrics.bank_seconds.observe(seconds)
                for kind in ("units", "tree_nodes"):
                    if report.get(kind):
                        self.metrics.rows.inc(int(report[kind]), tags={"kind": kind})
        return out

    def __del__(self) -> None:
        try:
            self.memory.close()
        except Exception:  # noqa: BLE001
            pass
