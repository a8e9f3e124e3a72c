"""What the engine needs of the process it runs in, set by the entry points (the CLI, the Serve
deployments, the Ray actors) and never by a constructor: building a Memory must not change
the process that builds it."""

from __future__ import annotations

from memlane.settings import Settings


def configure_process(settings: Settings | None = None) -> None:
    """Set the process-wide limits the engine's figures were measured with, for ``settings``
    (None: the environment's; a configuration error there is left for the command that reads
    the settings to report).

    One OpenBLAS thread for NumPy when recall searches in process (``store.search_backend``
    "memory"): the index's one-query matrix products are memory-bound; with OpenBLAS's default
    of a thread per core its spinning threads fought torch's OpenMP threads for the 2 cores,
    and query embedding inside recall went from 8 ms to 16 ms p50 / 96 ms p95 at 10k memories
    (torch uses its own OpenMP pool, which this does not touch)."""
    if settings is None:
        try:
            settings = Settings()
        except ValueError:  # a ValidationError, or a removed setting name (RemovedSetting)
            return
    if settings.store.search_backend == "memory":
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
