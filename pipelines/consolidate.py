"""Batch consolidation on Ray Data: banks in Milvus -> their temporal trees (TiMem).

Stages::

    driver:  which banks (named, the banks a corpus maps to, or every bank), largest first
    actors:  map_batches(ConsolidateWorker, batch_size=1, compute=ActorPoolStrategy(size=workers,
             max_tasks_in_flight_per_actor=1)); each call builds one bank's tree bottom up
             (sessions, days, weeks, profile) with the engine's Memory.consolidate
    driver:  stream results (iter_batches) -> summary, progress

The unit of parallelism is the bank, as in the backfill: a bank's levels depend on each other
(a day is written from its sessions), banks do not. One bank per row: a bank's tree takes from
tens of milliseconds to seconds, well above Ray's per-task overhead (a few ms), and one bank
per row lets the largest-first order balance the pool.

Idempotence: node ids derive from (bank, level, window) and each node keeps a signature of
what it was written from, so a re-run writes nothing (the summary shows 0 written), and a run
cut short is finished by the next one. Every bank is cut at the same ``now`` (the job's start
unless given), so a window that closes during the run is not half in.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable

from actors.consolidate import LEVEL_NAMES
from pipelines.job import Progress, cluster_pool, run_pool, worker_settings

log = logging.getLogger(__name__)


class UnknownBanks(ValueError):
    """Banks asked for that the store does not hold."""


@dataclass
class ConsolidateSummary:
    """What a consolidation job did, summed over its banks. ``written``/``unchanged``/``nodes``
    are per level name; ``nodes_per_s`` is nodes written per second of wall time and
    ``leaves_per_s`` memory units consolidated per second (the rate beside the backfill's
    turns/s)."""

    banks: int = 0
    failed_banks: int = 0
    leaves: int = 0
    written: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LEVEL_NAMES, 0))
    unchanged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LEVEL_NAMES, 0))
    nodes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LEVEL_NAMES, 0))
    removed: int = 0
    fallbacks: int = 0
    facts_written: int = 0  # conflict resolution (memlane/facts)
    facts_superseded: int = 0
    wall_s: float = 0.0
    nodes_per_s: float = 0.0
    leaves_per_s: float = 0.0
    workers: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def total_written(self) -> int:
        return sum(self.written.values())

    def add(self, rec: dict[str, Any]) -> None:
        """Count one bank's result row (``actors.consolidate.COLUMNS``)."""
        self.banks += 1
        if rec["status"] != "ok":
            self.failed_banks += 1
            self.failures.append({"bank_id": str(rec["bank_id"]), "error": str(rec["error"])})
            return
        self.leaves += int(rec["leaves"])
        self.removed += int(rec["removed"])
        self.fallbacks += int(rec["fallbacks"])
        self.facts_written += int(rec.get("facts_written", 0))
        self.facts_superseded += int(rec.get("facts_superseded", 0))
        for kind in ("written", "unchanged", "nodes"):
            totals = getattr(self, kind)
            for lv in LEVEL_NAMES:
                totals[lv] += int(rec[f"{kind}_{lv}"])

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["total_written"] = self.total_written
        return out


@dataclass
class ConsolidateConfig:
    """Inputs of :func:`run_consolidate`. ``settings`` are :class:`memlane.settings.Settings`
    keyword overrides sent to every worker; ``milvus_uri`` must be reachable from all of them."""

    milvus_uri: str
    data_dir: Path
    workers: int | None = None
    consolidator: str | None = None  # "auto" | "rules" | "llm"; None: the settings'
    now: datetime | None = None  # windows closed by then; None: the job's start
    progress: bool = True  # Ray Data's own bars
    settings: dict[str, Any] = field(default_factory=dict)
    max_restarts: int = 3
    runtime_env: dict[str, Any] | None = None


def resolve_banks(cfg: ConsolidateConfig, wanted: list[str] | None) -> list[tuple[str, int]]:
    """``(bank_id, memory units)`` of the banks to consolidate, largest first: ``wanted`` (each
    must exist: :class:`UnknownBanks` names the missing ones) or, when None, every bank."""
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    s = Settings(**worker_settings(cfg.settings, cfg.milvus_uri, cfg.data_dir))
    store = MilvusStore(s, dim=s.models.embedding_dim)
    try:
        return plan_banks(store.list_banks(), store.count_units, wanted)
    finally:
        store.close()


def plan_banks(
    present: Iterable[Any], count_units: Callable[[str], int], wanted: list[str] | None
) -> list[tuple[str, int]]:
    """``(bank_id, memory units)`` of ``wanted`` (each among the ``present`` banks, records
    with a ``bank_id``: :class:`UnknownBanks` names those that are not) or of every bank,
    largest first."""
    ids = [b.bank_id for b in present]
    if wanted is not None:
        have = set(ids)
        missing = [b for b in dict.fromkeys(wanted) if b not in have]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise UnknownBanks(f"unknown bank{'s' if len(missing) > 1 else ''}: {shown}")
        ids = list(dict.fromkeys(wanted))
    sized = [(b, count_units(b)) for b in ids]
    return sorted(sized, key=lambda x: (-x[1], x[0]))


def corpus_banks(path: str | Path, fmt: str = "auto") -> list[str]:
    """The bank ids a corpus maps to, exactly as ``memlane backfill`` maps them (its reader);
    ValueError when it holds no valid turn."""
    from pipelines.corpus import read_corpus

    rejects: list[dict[str, Any]] = []
    corpus = read_corpus(path, fmt, reject=rejects.append)
    ids = [b.bank_id for b in corpus.bank_inputs()]
    if not ids:
        why = f" (first reject: {rejects[0].get('where')}: {rejects[0].get('reason')})" if rejects else ""
        raise ValueError(f"{path}: no valid turns, so no banks{why}")
    return ids


def run_consolidate(
    cfg: ConsolidateConfig,
    banks: list[tuple[str, int]],
    *,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> ConsolidateSummary:
    """Consolidate ``banks`` (from :func:`resolve_banks`) on the Ray cluster this process is
    connected to (``ray.init`` first). ``on_result`` is called with each bank's result row as
    it streams in. Failed banks are in ``summary.failures``; the others are written."""
    t0 = time.perf_counter()
    summary = ConsolidateSummary()
    progress = Progress("consolidate", len(banks))
    if banks:
        pool = cluster_pool(cfg.workers, use_gpu=False, rows=len(banks))
        summary.workers = pool.workers
        now = (cfg.now or datetime.now().astimezone()).isoformat()
        results = run_pool(
            [{"bank_id": b} for b, _ in banks],
            _Adapter,
            {
                "settings": worker_settings(cfg.settings, cfg.milvus_uri, cfg.data_dir),
                "now": now,
                "consolidator": cfg.consolidator,
            },
            pool,
            progress=cfg.progress,
            runtime_env=cfg.runtime_env,
            max_restarts=cfg.max_restarts,
        )
        for rec in results:
            summary.add(rec)
            progress.done(summary.banks)
            if on_result is not None:
                on_result(rec)
    return _rates(summary, t0)


def run_in_process(
    cfg: ConsolidateConfig,
    banks: list[tuple[str, int]],
    memory: Any,
    *,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> ConsolidateSummary:
    """Consolidate ``banks`` one after another on ``memory`` (a Memory of this process): the
    same rows and summary as :func:`run_consolidate`, without a Ray cluster to start, which
    costs more than a few banks' work (see ``memlane consolidate --runner``)."""
    from actors.consolidate import consolidate_row

    t0 = time.perf_counter()
    summary = ConsolidateSummary(workers=1)
    now = cfg.now or datetime.now().astimezone()
    for bank_id, _ in banks:
        rec = consolidate_row(memory, bank_id, now, cfg.consolidator)
        summary.add(rec)
        if on_result is not None:
            on_result(rec)
    return _rates(summary, t0)


def summarise(rows: list[dict[str, Any]], t0: float) -> ConsolidateSummary:
    """The summary of result rows gathered elsewhere (the service's answers), timed from ``t0``."""
    summary = ConsolidateSummary(workers=1)
    for rec in rows:
        summary.add(rec)
    return _rates(summary, t0)


def _rates(summary: ConsolidateSummary, t0: float) -> ConsolidateSummary:
    summary.wall_s = round(time.perf_counter() - t0, 3)
    if summary.wall_s:
        summary.nodes_per_s = round(summary.total_written / summary.wall_s, 2)
        summary.leaves_per_s = round(summary.leaves / summary.wall_s, 2)
    return summary


class _Adapter:
    """Unpacks a pyarrow batch for :class:`actors.consolidate.ConsolidateWorker`."""

    def __init__(self, settings: dict[str, Any], now: str | None, consolidator: str | None) -> None:
        from actors.consolidate import ConsolidateWorker

        self.worker = ConsolidateWorker(settings, now=now, consolidator=consolidator)

    def __call__(self, batch):
        return self.worker({"bank_id": batch.column("bank_id").to_pylist()})
