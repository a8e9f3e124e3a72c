"""Where settings come from besides the fields: the first release's flat names and the renamed
ones (kept working with a warning), and the secrets file."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import DotEnvSettingsSource, PydanticBaseSettingsSource

from memlane.settings.areas import (
    ENV_PREFIX,
    LLM_ROLES,
    LLMRoleSettings,
    LLMSettings,
    ModelSettings,
    RecallSettings,
    ReflectSettings,
    RetainSettings,
    ServeSettings,
    StoreSettings,
)

log = logging.getLogger("memlane.settings")


def _legacy_map() -> dict[str, tuple[str, ...]]:
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
LEGACY: dict[str, tuple[str, ...]] = _legacy_map()

# Settings whose meaning moved to the background area (memlane/background.py): old path ->
# {old value: the background fields it means}. Read with a DeprecationWarning.
RENAMED: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
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
# The first release's flat names of those.
FLAT_RENAMED: dict[str, tuple[str, ...]] = {"llm_background": ("llm", "background")}


def move_renamed(data: dict[str, Any]) -> None:
    """Rewrite the RENAMED settings in ``data`` (the input of Settings) into the background
    area, in place. An old name given wins over the background area's value, since a
    ``model_copy`` carries the whole current area beside it."""
    for (area, name), meaning in RENAMED.items():
        node = data.get(area)
        if not isinstance(node, dict) or name not in node:
            continue
        node = dict(node)
        value = node.pop(name)
        data[area] = node
        if value not in meaning:
            raise ValueError(f"{area}.{name} must be one of {', '.join(meaning)}, got {value!r}")
        new = meaning[value]
        warnings.warn(
            f"{area}.{name} ({env_name((area, name))}) is deprecated: use "
            + ", ".join(f"background.{k}={v}" for k, v in new.items()),
            DeprecationWarning,
            stacklevel=5,
        )
        background = data.get("background")
        background = background.model_dump() if isinstance(background, BaseModel) else dict(background or {})
        data["background"] = {**background, **new}


# Legacy variables holding JSON (dicts and lists), decoded like the nested source decodes them.
_COMPLEX = {("recall", "channel_weights"), ("serve", "api_keys"), ("serve", "recall_warm_banks")}


def env_name(path: tuple[str, ...]) -> str:
    """The environment variable of a nested field, e.g. ('recall', 'rrf_k') -> MEMLANE_RECALL__RRF_K."""
    return ENV_PREFIX + "__".join(p.upper() for p in path)


def _put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        node = tree.get(part)
        if isinstance(node, BaseModel):
            node = node.model_dump()
        if not isinstance(node, dict):
            node = {}
        tree[part] = node
        tree = node
    tree[path[-1]] = value


class _LegacyEnv(PydanticBaseSettingsSource):
    """Reads the first release's flat variables (MEMLANE_RRF_K, MEMLANE_LLM_BASE_URL, ...) into
    their nested places, below the new names in priority, warning once per name."""

    _warned: set[str] = set()

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the environment whole

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, path in {**LEGACY, **FLAT_RENAMED}.items():
            raw = os.environ.get(ENV_PREFIX + name.upper())
            if raw is None or env_name(path) in os.environ:
                continue
            if name not in self._warned:
                self._warned.add(name)
                log.warning("%s%s is deprecated: set %s", ENV_PREFIX, name.upper(), env_name(path))
            _put(out, path, json.loads(raw) if path in _COMPLEX else raw)
        return out


SECRETS_FILE_VAR = ENV_PREFIX + "SECRETS_FILE"


def is_secret(name: str) -> bool:
    """True for a setting that is a credential, by environment variable or field name: API
    keys (the service's and the LLMs') and the Milvus token. Such values never travel in a Ray
    runtime_env: Ray logs its env vars (runtime_env_agent.log, at INFO) and shows them on the
    dashboard, seen here with a canary key."""
    return name.lower().endswith(("api_key", "api_keys", "milvus_token"))


def split_secrets(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The ``MEMLANE_*`` variables of ``environ`` as (public, secret); secret ones under their
    current names (a first-release flat name such as MEMLANE_API_KEYS becomes
    MEMLANE_SERVE__API_KEYS), ready for a secrets file."""
    public: dict[str, str] = {}
    secret: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        if not is_secret(name):
            public[name] = value
            continue
        legacy = LEGACY.get(name[len(ENV_PREFIX) :].lower())
        current = env_name(legacy) if legacy else name
        if legacy is None or current not in environ:  # the current name wins, as in Settings
            secret[current] = value
    return public, secret


def _secrets_file_source(settings_cls) -> PydanticBaseSettingsSource | None:
    """MEMLANE_SECRETS_FILE: a dotenv file of MEMLANE_* variables (e.g. the service's API keys,
    LLM keys, the Milvus token), read below the environment in priority. A path that is not a
    file is an error naming the variable, not silently no keys."""
    path = os.environ.get(SECRETS_FILE_VAR)
    if not path:
        return None
    if not Path(path).is_file():
        raise ValueError(f"{SECRETS_FILE_VAR}={path}: no such file")
    return DotEnvSettingsSource(settings_cls, env_file=path)


def _plain(value: Any) -> Any:
    return value.model_dump() if isinstance(value, BaseModel) else value
