"""Re-embedding banks on Ray Data: every stored vector of a bank rewritten by another embedder
(``memlane reembed``), with the bank record switched at the end (memlane/reembed.py).

Stages::

    driver:  which banks (named, or every bank), largest first; banks already on the target
             embedder (and not left half done) are reported as such and not sent
    actors:  map_batches(ReembedWorker, batch_size=1, compute=ActorPoolStrategy(size=workers,
             max_tasks_in_flight_per_actor=1)); each actor's engine embeds with the target, each
             call re-embeds one bank (units, then tree nodes, then the switch)
    driver:  stream results (iter_batches) -> summary, progress

The unit of parallelism is the bank, as in the backfill and the consolidation: a bank's writes
hold its lease, banks do not share one. Idempotent and resumable: a bank done is skipped by
the next run; a bank cut short (a killed run, a failed actor) stays marked as being
re-embedded, refused by recall and retain, until a run finishes it.

GPUs: where the cluster has them, actors re-embedding to MiniLM take a GPU share and embed on
it (torch on CUDA, as the backfill's retain actors); bge-small runs on ONNX Runtime's CPU
provider only (memlane/models/bge_embedder.py), so its actors ask for CPUs alone.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from pipelines.consolidate import UnknownBanks
from pipelines.job import Progress, cluster_pool, run_pool, worker_settings


@dataclass
class ReembedConfig:
    """Inputs of :func:`run_reembed`. ``settings`` are :class:`memlane.settings.Settings`
    keyword overrides sent to every worker; ``milvus_uri`` must be reachable from all of them;
    ``embedder`` is the target (a ``models.embedder`` name)."""

    milvus_uri: str
    data_dir: Path
    embedder: str
    workers: int | None = None
    progress: bool = True  # Ray Data's own bars
    settings: dict[str, Any] = field(default_factory=dict)
    max_restarts: int = 3
    runtime_env: dict[str, Any] | None = None
    stop_after: int | None = None  # tests: end each bank after that many writes

    def worker_settings(self) -> dict[str, Any]:
        out = worker_settings(self.settings, self.milvus_uri, self.data_dir)
        out["models"] = {**out.get("models", {}), "embedder": self.embedder}
        return out


@dataclass
class BankPlan:
    """A bank to re-embed: its units, and the embedder its vectors are on."""

    bank_id: str
    units: int
    source: str
    pending: bool  # a re-embed of it stopped before it finished


@dataclass
class ReembedSummary:
    """What a re-embed job did, summed over its banks; ``rows_per_s`` is vectors rewritten
    (units and tree nodes) per second of wall time."""

    banks: int = 0
    done: int = 0
    unchanged: int = 0
    failed_banks: int = 0
    units: int = 0
    tree_nodes: int = 0
    wall_s: float = 0.0
    rows_per_s: float = 0.0
    workers: int = 0
    target: str = ""
    failures: list[dict[str, str]] = field(default_factory=list)

    def add(self, rec: dict[str, Any]) -> None:
        """Count one bank's result row (``actors.reembed.COLUMNS``)."""
        self.banks += 1
        status = rec["status"]
        if status == "done":
            self.done += 1
        elif status == "unchanged":
            self.unchanged += 1
        else:
            self.failed_banks += 1
            why = rec["error"] or "stopped before it finished"
            self.failures.append({"bank_id": str(rec["bank_id"]), "error": str(why)})
        self.units += int(rec["units"])
        self.tree_nodes += int(rec["tree_nodes"])

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_banks(cfg: ReembedConfig, wanted: list[str] | None) -> list[BankPlan]:
    """The banks to consider, largest first: ``wanted`` (each must exist: :class:`UnknownBanks`
    names the missing ones) or, when None, every bank."""
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    s = Settings(**cfg.worker_settings())
    store = MilvusStore(s, dim=s.models.embedding_dim)
    try:
        return plan_banks(store, wanted)
    finally:
        store.close()


def plan_banks(store: Any, wanted: list[str] | None) -> list[BankPlan]:
    """:func:`resolve_banks` on an open store."""
    from memlane.banks import bank_embedder

    banks = {b.bank_id: b for b in store.list_banks()}
    ids = list(banks) if wanted is None else list(dict.fromkeys(wanted))
    missing = [b for b in ids if b not in banks]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UnknownBanks(f"unknown bank{'s' if len(missing) > 1 else ''}: {shown}")
    plans = [
        BankPlan(b, store.count_units(b), bank_embedder(banks[b])[0], bool(banks[b].reembedding)) for b in ids
    ]
    return sorted(plans, key=lambda p: (-p.units, p.bank_id))


def run_reembed(
    cfg: ReembedConfig,
    banks: list[BankPlan],
    *,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    memory: Any = None,
) -> ReembedSummary:
    """Re-embed ``banks`` (from :func:`resolve_banks`) to ``cfg.embedder`` on the Ray cluster
    this process is connected to (``ray.init`` first), or with ``memory`` (a Memory of this
    process whose embedder is the target) bank after bank here, without a cluster to start.
    Banks already on the target count as ``unchanged`` without reaching either; failed ones
    are in ``summary.failures``."""
    t0 = time.perf_counter()
    summary = ReembedSummary(target=cfg.embedder)
    todo = [p for p in banks if p.pending or p.source != cfg.embedder]
    for p in banks:
        if p not in todo:
            rec = {"bank_id": p.bank_id, "status": "unchanged", "error": "", "units": 0, "tree_nodes": 0}
            summary.add(rec)
            if on_result is not None:
                on_result(rec)
    if todo and memory is not None:  # in this process, bank after bank
        from actors.reembed import reembed_row

        summary.workers = 1
        for p in todo:
            rec = reembed_row(memory, p.bank_id, memory.settings.retain, cfg.stop_after)
            summary.add(rec)
            if on_result is not None:
                on_result(rec)
    elif todo:
        progress = Progress("reembed", len(todo))
        # GPUs only help an embedder that runs on them (the module docstring).
        pool = cluster_pool(cfg.workers, use_gpu=None if cfg.embedder == "minilm" else False, rows=len(todo))
        summary.workers = pool.workers
        results = run_pool(
            [{"bank_id": p.bank_id} for p in todo],
            _Adapter,
            {"settings": cfg.worker_settings(), "use_gpu": pool.on_gpu, "stop_after": cfg.stop_after},
            pool,
            progress=cfg.progress,
            runtime_env=cfg.runtime_env,
            max_restarts=cfg.max_restarts,
        )
        finished = 0
        for rec in results:
            summary.add(rec)
            finished += 1
            progress.done(finished)
            if on_result is not None:
                on_result(rec)
    summary.wall_s = round(time.perf_counter() - t0, 3)
    if summary.wall_s:
        summary.rows_per_s = round((summary.units + summary.tree_nodes) / summary.wall_s, 2)
    return summary


class _Adapter:
    """Unpacks a pyarrow batch for :class:`actors.reembed.ReembedWorker`."""

    def __init__(self, settings: dict[str, Any], use_gpu: bool, stop_after: int | None) -> None:
        from actors.reembed import ReembedWorker

        self.worker = ReembedWorker(settings, use_gpu=use_gpu, stop_after=stop_after)

    def __call__(self, batch):
        return self.worker({"bank_id": batch.column("bank_id").to_pylist()})
