"""The consolidation actor of ``pipelines.consolidate``: one engine per actor, one bank per row.

Each call builds the temporal tree of the banks in its batch with the engine's
``Memory.consolidate`` (bottom up: sessions, days, weeks, the profile), which writes only the
windows whose children changed, so a re-run or a retried task writes nothing new. A bank that
fails is reported with ``status="failed"`` and its error, and the job goes on.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime
from typing import Any

from actors.gauges import export_held_state
from memlane.records import Level

log = logging.getLogger(__name__)

LEVEL_NAMES = tuple(lv.name for lv in (Level.session, Level.day, Level.week, Level.profile))
# Per bank on 2 cores: a LoCoMo bank (~600 units) consolidates in seconds, a small one in
# tens of milliseconds, a very large one with an LLM in minutes.
_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180, 600]
# The columns a call returns (one row per bank); ``written_<level>`` etc. per level name.
COLUMNS = (
    "bank_id",
    "status",
    "error",
    "leaves",
    "removed",
    "fallbacks",
    "seconds",
    "worker_pid",
    *(f"{kind}_{lv}" for kind in ("written", "unchanged", "nodes") for lv in LEVEL_NAMES),
    "facts_written",  # facts conflict resolution rewrote (memlane/facts)
    "facts_superseded",  # of which invalidated by a newer value
)


class _Metrics:
    """``ray_memlane_consolidate_nodes_total{level, outcome}`` (outcome ``written`` or
    ``unchanged``), ``ray_memlane_consolidate_banks_total{status}``, the seconds per bank and
    ``ray_memlane_consolidate_facts_total{outcome}`` (conflict resolution's outcomes)."""

    def __init__(self) -> None:
        from ray.util.metrics import Counter, Histogram

        self.nodes = Counter(
            "memlane_consolidate_nodes",
            "Tree nodes consolidated, by level and outcome (written or unchanged).",
            tag_keys=("level", "outcome"),
        )
        self.banks = Counter(
            "memlane_consolidate_banks", "Banks consolidated, by status.", tag_keys=("status",)
        )
        self.bank_seconds = Histogram(
            "memlane_consolidate_bank_seconds", "Seconds to consolidate one bank.", boundaries=_BOUNDARIES
        )
        self.facts = Counter(
            "memlane_consolidate_facts",
            "Conflict resolution between facts (memlane/facts), by outcome: superseded, restated, "
            "elaboration, ambiguous, both_valid, adjudicated, written.",
            tag_keys=("outcome",),
        )

    def count(self, rec: dict[str, Any]) -> None:
        """Record one bank's result row."""
        ok = rec["status"] == "ok"
        self.banks.inc(1, tags={"status": "ok" if ok else "failed"})
        if not ok:
            return
        self.bank_seconds.observe(rec["seconds"])
        for outcome in ("written", "unchanged"):
            for lv in LEVEL_NAMES:
                n = int(rec[f"{outcome}_{lv}"])
                if n:
                    self.nodes.inc(n, tags={"level": lv, "outcome": outcome})
        for outcome, n in (rec.get("facts_outcomes") or {}).items():
            if n:
                self.facts.inc(int(n), tags={"outcome": outcome})


def consolidate_row(
    memory: Any, bank_id: str, now: datetime | None = None, consolidator: str | None = None
) -> dict[str, Any]:
    """Consolidate one bank on ``memory`` (a :class:`memlane.engine.Memory`): its result row
    (``COLUMNS``, plus ``facts_outcomes``: conflict resolution's counts by outcome). A bank
    that fails is reported with ``status="failed"`` and its error, never raised. The one
    row of both runners: a Ray Data actor's and the in-process loop's (pipelines/consolidate.py)."""
    t0 = time.perf_counter()
    report: dict[str, Any] | None = None
    error = ""
    try:
        report = memory.consolidate(bank_id, now=now, consolidator=consolidator).as_dict()
    except Exception as exc:  # noqa: BLE001 - reported per bank, the job goes on
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]
        log.warning("consolidation of bank %s failed: %s", bank_id, error)
    finally:
        memory.derived.evict(bank_id)  # keep the process's memory bounded
    return report_row(bank_id, report, error, time.perf_counter() - t0)


def report_row(bank_id: str, report: dict[str, Any] | None, error: str, seconds: float) -> dict[str, Any]:
    """A bank's result row (``COLUMNS``) from its :class:`memlane.tree.build.TreeReport` as a
    dict (None: failed, with ``error``): also what ``memlane consolidate`` makes of the
    service's answer."""
    facts = (report or {}).get("facts") or {}
    rec: dict[str, Any] = {
        "bank_id": bank_id,
        "status": "ok" if report is not None else "failed",
        "error": error,
        "seconds": seconds,
        "worker_pid": os.getpid(),
        "facts_written": int(facts.get("written", 0)),
        "facts_superseded": int(facts.get("superseded", 0)),
        "facts_outcomes": dict(facts),
    }
    for key in ("leaves", "removed", "fallbacks"):
        rec[key] = int(report[key]) if report else 0
    for kind in ("written", "unchanged", "nodes"):
        for lv in LEVEL_NAMES:
            rec[f"{kind}_{lv}"] = int(report[kind].get(lv, 0)) if report else 0
    return rec


class ConsolidateWorker:
    """Callable class for ``Dataset.map_batches``: ``{"bank_id": [...]}`` in, one row per bank
    out (see ``COLUMNS``).

    ``settings``: keyword arguments of :class:`memlane.settings.Settings` (``store.milvus_uri``
    must name a server every worker can reach; torch threads: the actor's CPUs unless set, see
    :func:`actors.engine_settings.engine_settings`). ``now``: ISO time the windows close by (one
    value for the whole job, so every bank is cut at the same instant; default: each call's
    current time). ``consolidator``: "auto", "rules" or "llm" (default: the settings').
    """

    def __init__(
        self, settings: dict[str, Any], now: str | None = None, consolidator: str | None = None
    ) -> None:
        from actors.engine_settings import engine_settings, open_engine

        self.settings = engine_settings(settings)
        self.memory = open_engine(self.settings)
        self.now = datetime.fromisoformat(now) if now else None
        self.consolidator = consolidator
        try:
            self.metrics: _Metrics | None = _Metrics()
        except Exception:  # noqa: BLE001 - metrics are optional outside a Ray worker
            self.metrics = None
        export_held_state(self.memory.derived, kind=type(self).__name__)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, list] = {k: [] for k in COLUMNS}
        for bank_id in batch["bank_id"]:
            rec = consolidate_row(self.memory, str(bank_id), self.now, self.consolidator)
            for key in COLUMNS:
                out[key].append(rec[key])
            if self.metrics is not None:
                self.metrics.count(rec)
        return out

    def __del__(self) -> None:
        try:
            self.memory.close()
        except Exception:  # noqa: BLE001
            pass
