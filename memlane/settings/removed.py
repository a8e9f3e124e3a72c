"""Setting names removed at 0.1.0, each with the one that replaced it. Given anywhere (an
environment variable, the ``MEMLANE_SECRETS_FILE``, a keyword of ``Settings`` or ``model_copy``)
such a name fails with an error naming the setting to use instead: a setting has one name.

* :data:`FLAT`: the first release's flat names (``MEMLANE_RRF_K``, ``Settings(rrf_k=...)``,
  ``MEMLANE_LLM_RETAIN_BASE_URL``) -> their place in the nested object (``recall.rrf_k``).
* :data:`MOVED`: settings whose meaning moved into the background area (``tree.online``,
  ``llm.background``) -> the background fields each of their values meant.

A name that was never a setting is reported as before: under an area, pydantic's
"Extra inputs are not permitted"; at the top level it is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlane.settings.areas import (
    ENV_PREFIX,
    LLM_ROLES,
    LLMRoleSettings,
    LLMSettings,
    ModelSettings,
    ReflectSettings,
    RetainSettings,
    ServeSettings,
    StoreSettings,
)
from memlane.settings.recall_area import RecallSettings


def _flat_names() -> dict[str, tuple[str, ...]]:
    """Every flat name of the first release -> its path in the nested object."""
    out: dict[str, tuple[str, ...]] = {}
    for area, model in (
        ("store", StoreSettings),
        ("models", ModelSettings),
        ("retain", RetainSettings),
        ("recall", RecallSettings),
        ("serve", ServeSettings),
        ("reflect", ReflectSettings),
    ):
        for name in model.model_fields:
            out[name] = (area, name)
    for name in LLMSettings.model_fields:
        if name not in LLM_ROLES:
            out[f"llm_{name}"] = ("llm", name)
    for role in LLM_ROLES:
        for name in LLMRoleSettings.model_fields:
            out[f"llm_{role}_{name}"] = ("llm", role, name)
    return out


# Flat name -> nested path, e.g. "rrf_k" -> ("recall", "rrf_k").
FLAT: dict[str, tuple[str, ...]] = _flat_names()

# Old path -> {old value: the background fields it meant} (memlane/background.py).
MOVED: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {
    ("tree", "online"): {
        "background": {"tree": True},
        "sync": {"tree": True, "mode": "sync"},
        "off": {"tree": False},
    },
    ("llm", "background"): {
        "thread": {"reflect": True},
        "sync": {"reflect": True, "mode": "sync"},
        "off": {"reflect": False},
    },
}
# The first release's flat names of those (MEMLANE_LLM_BACKGROUND, Settings(llm_background=...)).
FLAT_MOVED: dict[str, tuple[str, ...]] = {"llm_background": ("llm", "background")}


class RemovedSetting(ValueError):
    """A removed setting name was given; the message names the setting to use instead."""


def env_name(path: tuple[str, ...]) -> str:
    """The environment variable of a nested field, e.g. ('recall', 'rrf_k') -> MEMLANE_RECALL__RRF_K."""
    return ENV_PREFIX + "__".join(p.upper() for p in path)


def _use(path: tuple[str, ...], value: Any, *, env: bool) -> str:
    """What to set instead of the removed ``path`` (given ``value``)."""

    def name(p: tuple[str, ...]) -> str:
        return f"{env_name(p)} ({'.'.join(p)})" if env else ".".join(p)

    if path not in MOVED:
        return name(path)
    meaning = MOVED[path]
    value = value.lower() if isinstance(value, str) else value
    if value in meaning:
        if env:
            return " and ".join(
                f"{env_name(('background', k))}={str(v).lower()}" for k, v in meaning[value].items()
            )
        return " and ".join(f"background.{k}={v!r}" for k, v in meaning[value].items())
    fields = dict.fromkeys(k for new in meaning.values() for k in new)
    return " and ".join(name(("background", k)) for k in fields)


def check_variables(variables: Mapping[str, Any], where: str = "") -> None:
    """Raise :class:`RemovedSetting` for a removed name among ``variables`` (environment
    variables, or the lines of a dotenv file: ``where`` says which file)."""
    for raw, value in variables.items():
        key = raw.upper()
        if not key.startswith(ENV_PREFIX):
            continue
        rest = key[len(ENV_PREFIX) :].lower()
        nested = tuple(rest.split("__"))
        path = FLAT.get(rest) or FLAT_MOVED.get(rest) or (nested if nested in MOVED else None)
        if path is not None:
            raise RemovedSetting(f"{raw}{where} was renamed: use {_use(path, value, env=True)}")


def check_keywords(data: Mapping[str, Any], how: str) -> None:
    """Raise :class:`RemovedSetting` for a removed name among the keywords ``data`` of
    ``Settings(...)`` or the keys of ``model_copy(update=...)`` (``how`` says which)."""
    for key, value in data.items():
        path = FLAT.get(key) or FLAT_MOVED.get(key)
        if path is not None:
            raise RemovedSetting(f"{how} {key!r} was renamed: use {_use(path, value, env=False)}")
    for path in MOVED:
        area, name = path
        node = data.get(area)
        if isinstance(node, Mapping) and name in node:
            raise RemovedSetting(f"{area}.{name} was renamed: use {_use(path, node[name], env=False)}")
