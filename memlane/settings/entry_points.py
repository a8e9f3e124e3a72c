"""What each entry point changes in the defaults, declared once (:data:`ENTRY_POINT_DEFAULTS`),
applied by the entry points through :func:`entry_point_changes` / :func:`with_entry_point`
(serve/deployments.py, pipelines/job.py, actors/engine_settings.py) and shown by
``memlane config show --for serve|backfill|engine``.

Everything else (the library's ``Memory(Settings())``, the CLI's commands, ``memlane mcp``)
takes the defaults of :mod:`memlane.settings.areas` as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from memlane.settings import Settings


@dataclass(frozen=True)
class Context:
    """What an entry point's changes may depend on: the CPUs and GPU a job's actor was given."""

    cpus: float = 1.0
    gpu: bool = False


@dataclass(frozen=True)
class Derived:
    """A value derived from the :class:`Context` (``of`` returns None: no change there)."""

    label: str
    of: Callable[[Context], Any]


@dataclass(frozen=True)
class Change:
    """One entry point's change to one default: the value (or a :class:`Derived` one), why, and
    when the user's own value is kept instead: ``"set"`` (the user named the setting: an
    environment variable, the secrets file, a keyword), ``"default"`` (it holds anything but its
    default: a job's settings reach its actors whole, every field named) or ``"never"``."""

    value: Any
    why: str
    keep_user: Literal["set", "default", "never"] = "set"


# Entry point -> what it is.
ENTRY_POINTS: dict[str, str] = {
    "serve": "the service's replicas (`memlane serve`; serve/deployments.py)",
    "backfill": "a batch job's workers: backfill, consolidate, reembed (pipelines/job.py)",
    "engine": "a batch job's actor engine (actors/engine_settings.py), after the job's changes",
}
# An entry point that starts from another's settings: an actor's engine from those its job sent.
STARTS_FROM: dict[str, str] = {"engine": "backfill"}

# Entry point -> {setting: its change}. Each `why` is the reason, with the measurement when
# there is one; it is what `memlane config show` and the docs' table say.
ENTRY_POINT_DEFAULTS: dict[str, dict[str, Change]] = {
    "serve": {
        # The engine's default is off: a library call leaves no tree writing behind it.
        "background.tree": Change(
            True,
            "the service keeps every bank's temporal tree current: consolidated after each "
            "write, on a background thread of the replica that wrote",
        ),
        # The engine waits: an evaluation or a CLI recall gets the full pipeline at once.
        "recall.cold_bank": Change(
            "store",
            "a replica's first recall of a bank answers from the store while the bank loads, "
            "instead of waiting for the load (27 s vs 0.85 s at 10k memories on the loaded dev "
            "machine, benchmarks/refresh_bench.py)",
        ),
    },
    "backfill": {
        # Forced: a user's MEMLANE_BACKGROUND__TREE=true would consolidate behind every write.
        "background.tree": Change(
            False,
            "the batch path builds trees in its own job (`memlane consolidate`), every bank cut "
            "at one time, not after each of the job's writes",
            keep_user="never",
        ),
    },
    "engine": {
        # 0 is "all cores": in every actor of a node, that oversubscribes it.
        "models.torch_threads": Change(
            Derived("the actor's CPUs", lambda c: max(1, round(c.cpus))),
            "Ray sets OMP_NUM_THREADS=1 in workers, and all cores in each of a node's actors "
            "would oversubscribe it (2 workers of 1 thread beat 1 of 2 on 2 cores, "
            "benchmarks/backfill_bench.py)",
            keep_user="default",
        ),
        "models.embedder_device": Change(
            Derived("cuda, on an actor given a GPU", lambda c: "cuda" if c.gpu else None),
            "an actor given a GPU embeds on it; a device the user named (cuda:1) is kept",
            keep_user="default",
        ),
    },
}


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _user_set(settings: Settings, path: str) -> bool:
    """Whether ``path`` was given (environment, secrets file, keyword) rather than defaulted."""
    *areas, field = path.split(".")
    obj: Any = settings
    for area in areas:
        if area not in obj.model_fields_set:
            return False
        obj = getattr(obj, area)
    return field in obj.model_fields_set


def default_of(path: str) -> Any:
    """The default of the setting at dotted ``path`` (what its field says)."""
    *areas, field = path.split(".")
    model: Any = Settings
    for area in areas:
        model = model.model_fields[area].annotation
    return model.model_fields[field].get_default(call_default_factory=True)


def entry_point_changes(
    entry: str, settings: Settings | None = None, context: Context | None = None
) -> dict[str, Any]:
    """Dotted path -> value of the changes ``entry`` makes to ``settings`` (None: a job's
    keyword overrides, nothing known set), given the actor's ``context``; a change the user's
    own value overrides (:attr:`Change.keep_user`) is left out."""
    if entry not in ENTRY_POINT_DEFAULTS:
        raise ValueError(f"unknown entry point {entry!r}: one of {', '.join(ENTRY_POINT_DEFAULTS)}")
    context = context or Context()
    out: dict[str, Any] = {}
    for path, change in ENTRY_POINT_DEFAULTS[entry].items():
        if settings is not None:
            if change.keep_user == "set" and _user_set(settings, path):
                continue
            if change.keep_user == "default" and _get(settings, path) != default_of(path):
                continue
        value = change.value.of(context) if isinstance(change.value, Derived) else change.value
        if value is not None:
            out[path] = value
    return out


def nest(changes: dict[str, Any]) -> dict[str, Any]:
    """{"background.tree": True} -> {"background": {"tree": True}} (a ``model_copy`` update)."""
    out: dict[str, Any] = {}
    for path, value in changes.items():
        *areas, field = path.split(".")
        node = out
        for area in areas:
            node = node.setdefault(area, {})
        node[field] = value
    return out


def with_entry_point(entry: str, settings: Settings, context: Context | None = None) -> Settings:
    """``settings`` with ``entry``'s changes applied (:func:`entry_point_changes`)."""
    changes = entry_point_changes(entry, settings, context)
    if not changes:
        return settings
    return settings.model_copy(update=nest(changes))
