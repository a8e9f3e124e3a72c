"""The skeleton every batch job shares (the backfill, the consolidation, a future re-embed):
the settings its workers build their engine from, the pool's size, the driver's progress
gauges, and one pool of actors over Ray Data that takes one row at a time.

A job is: the driver plans its rows (whole banks, largest first), :func:`run_pool` streams them
through a pool of actor instances of one callable class (one engine per actor) and yields each
result row as it comes back, and the driver sums them and sets :class:`Progress`. The job
connects to Ray first (``ray.init``; ``memlane backfill`` / ``memlane consolidate`` do it).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.settings import Settings, is_secret
from memlane.settings.entry_points import entry_point_changes, nest

# Default pool: one worker per this many CPUs (see plan_resources).
DEFAULT_CPUS_PER_WORKER = 1


def worker_settings(
    settings: Settings | Mapping[str, Any],
    milvus_uri: str | None = None,
    data_dir: str | Path | None = None,
) -> dict[str, Any]:
    """The settings a job's workers build their engine from: ``settings`` (the driver's
    :class:`Settings`, or keyword overrides) with the job's Milvus URI and data directory when
    given (the driver's own are left out: they are not the job's), and the batch jobs' changes
    to the defaults (no tree consolidation after writes: ``ENTRY_POINT_DEFAULTS["backfill"]``
    in memlane/settings/entry_points.py).

    Secrets are never sent: the Milvus token and the LLM API keys would land in Ray's object
    store (and a SecretStr dumps as asterisks); workers read MEMLANE_STORE__MILVUS_TOKEN and
    MEMLANE_LLM__*API_KEY from their own environment (a local Ray inherits the driver's)."""
    tree = settings.model_dump(mode="json") if isinstance(settings, Settings) else dict(settings)

    def public(node: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: public(v) if isinstance(v, Mapping) else v
            for k, v in node.items()
            if k not in ("data_dir", "milvus_uri") and not is_secret(k)
        }

    out = public(tree)
    base = settings if isinstance(settings, Settings) else None
    for area, fields in nest(entry_point_changes("backfill", base)).items():
        out[area] = {**out.get(area, {}), **fields}
    if milvus_uri is not None:
        out["store"] = {**out.get("store", {}), "milvus_uri": milvus_uri}
    if data_dir is not None:
        out["data_dir"] = str(data_dir)
    return out


@dataclass(frozen=True)
class Pool:
    """An actor pool's size: ``workers`` actors of ``cpus`` CPUs and ``gpus`` GPUs each."""

    workers: int
    cpus: float
    gpus: float = 0.0

    @property
    def on_gpu(self) -> bool:
        return self.gpus > 0


def plan_resources(
    cpus: float, gpus: float, workers: int | None, use_gpu: bool | None
) -> tuple[int, float, float, bool]:
    """(workers, CPUs per worker, GPUs per worker, on GPU) for a cluster's resources.

    GPUs are used when the cluster has any (``use_gpu=None``) or when asked and present; a
    CPU-only cluster never asks for GPUs, so the GPU path costs nothing where there are none.
    Default pool: one worker per GPU, else one per CPU (on 2 cores, 2 workers with one torch
    thread each measured faster than 1 worker with 2: see benchmarks/backfill_bench.py). The
    pool shares the CPUs; each worker's torch threads follow its share."""
    gpu = gpus > 0 if use_gpu is None else bool(use_gpu and gpus > 0)
    if workers is None:
        workers = max(1, int(gpus)) if gpu else max(1, int(cpus // DEFAULT_CPUS_PER_WORKER))
    workers = max(1, int(workers))
    cpu_each = cpus / workers
    gpu_each = (min(1.0, gpus / workers)) if gpu else 0.0
    return workers, cpu_each, gpu_each, gpu


def cluster_pool(workers: int | None, use_gpu: bool | None = False, rows: int | None = None) -> Pool:
    """The pool for the connected Ray cluster (:func:`plan_resources`); with ``rows``, no more
    actors than rows (an idle actor would still load its models)."""
    import ray

    res = ray.cluster_resources()
    cpus, gpus = float(res.get("CPU", 1)), float(res.get("GPU", 0))
    n, _, _, _ = plan_resources(cpus, gpus, workers, use_gpu)
    if rows is not None:
        n = min(n, max(1, rows))
    n, cpu_each, gpu_each, _ = plan_resources(cpus, gpus, n, use_gpu)
    return Pool(n, cpu_each, gpu_each)


class Progress:
    """The driver's gauges ``memlane_<job>_banks_planned`` (banks this run takes) and
    ``memlane_<job>_progress`` (the share of them finished, 0 to 1). Worker counters say how
    fast; only the driver knows how much is left. Kept (re-set every few seconds) while the
    driver lives: a gauge set once is dropped by Ray's agent after two export intervals
    (actors/gauges.py). Without Ray it only counts."""

    def __init__(self, job: str, total: int) -> None:
        self.total = total
        self.share = 0.0 if total else 1.0
        try:
            from ray.util.metrics import Gauge

            from actors.gauges import keep

            planned = f"memlane_{job}_banks_planned"
            progress = f"memlane_{job}_progress"
            keep(planned, Gauge(planned, f"Banks this {job} run takes."), lambda: self.total)
            keep(
                progress,
                Gauge(progress, f"Share of this {job} run's banks finished (0-1)."),
                lambda: self.share,
            )
        except Exception:  # noqa: BLE001 - not connected to Ray
            pass

    def done(self, finished: int) -> None:
        if self.total:
            self.share = min(1.0, finished / self.total)


def run_pool(
    rows: list[dict[str, Any]],
    actor: type,
    constructor_kwargs: dict[str, Any],
    pool: Pool,
    *,
    progress: bool = True,
    runtime_env: dict[str, Any] | None = None,
    max_restarts: int = 3,
) -> Iterator[dict[str, Any]]:
    """Map ``rows`` (one Ray Data row each, in this order) through a pool of ``actor`` instances
    (``actor(**constructor_kwargs)``, called with a one-row pyarrow batch, returning columns);
    yield each result row as it streams in. ``progress``: Ray Data's own bars.

    A worker that dies (OOM, a lost node) is restarted and its row retried up to
    ``max_restarts`` times: a job's writes are upserts of deterministic ids, so a retry
    converges to the same state."""
    import ray

    from actors.driver_code import driver_code

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    ds = ray.data.from_items(rows, override_num_blocks=len(rows))
    del rows  # the dataset holds them now: a corpus's payloads need not stay in memory twice
    with warnings.catch_warnings():
        # Ray 2.60 deprecates **ray_remote_args but names no parameter for max_restarts /
        # max_task_retries; its own default is unbounded (-1), which would retry a bank that
        # kills its worker (OOM) forever. A bound is worth the warning.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        out = ds.map_batches(
            # the actor's code is the driver's, even where Ray's path would give the workers
            # another copy (actors/driver_code.py)
            driver_code(actor),
            batch_size=1,
            batch_format="pyarrow",
            # One row in flight per actor: a free actor takes the next row, so the
            # largest-first order balances the pool. Ray's default queues several rows per
            # actor up front; on LoCoMo that left one of 2 workers idle for the last 8 of 54 s.
            compute=ray.data.ActorPoolStrategy(size=pool.workers, max_tasks_in_flight_per_actor=1),
            fn_constructor_kwargs=constructor_kwargs,
            num_cpus=pool.cpus,
            num_gpus=pool.gpus or None,
            runtime_env=runtime_env or None,
            max_restarts=max_restarts,
            max_task_retries=max_restarts,
        )
    for batch in out.iter_batches(batch_size=None, batch_format="pyarrow"):
        yield from batch.to_pylist()
