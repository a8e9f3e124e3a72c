"""The engine settings of a job's actor (:class:`actors.retain.RetainWorker`,
:class:`actors.consolidate.ConsolidateWorker`): the job's settings, completed from what Ray gave
the actor only where the user left a setting unset."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlane.settings import Settings
from memlane.settings.entry_points import Context, with_entry_point


def assigned_cpus() -> float:
    """The CPUs Ray gave this actor; 1 outside a Ray worker."""
    try:
        import ray

        return float(ray.get_runtime_context().get_assigned_resources().get("CPU", 1))
    except Exception:  # noqa: BLE001 - outside Ray (unit use)
        return 1.0


def engine_settings(
    settings: Mapping[str, Any], *, use_gpu: bool = False, cpus: float | None = None
) -> Settings:
    """:class:`Settings` from ``settings`` (keyword arguments; this process's ``MEMLANE_*``
    variables below them, as always), with the actor's changes to the defaults where the user
    left them (``ENTRY_POINT_DEFAULTS["engine"]`` in memlane/settings/entry_points.py):

    * ``models.torch_threads`` left at 0 ("all cores") becomes the actor's CPUs (``cpus``,
      default :func:`assigned_cpus`); a value the user set is kept.
    * ``models.embedder_device`` left at ``"cpu"`` becomes ``"cuda"`` for an actor given a
      GPU (``use_gpu``); a device the user named (``"cuda:1"``) is kept.
    """
    s = Settings(**settings)
    context = Context(cpus=assigned_cpus() if cpus is None else cpus, gpu=use_gpu)
    return with_entry_point("engine", s, context)


def open_engine(settings: Settings):
    """A job actor's engine: the process limits set (the actor is the entry point), the model
    loaded and the store opened now, so the first bank's time is its own, and the store's
    metrics installed. Returns the :class:`memlane.engine.Memory`."""
    from actors.store_metrics import install_store_metrics
    from memlane.engine import Memory
    from memlane.runtime import configure_process

    configure_process(settings)
    memory = Memory(settings)
    _ = memory.embedder, memory.store
    install_store_metrics()
    return memory
