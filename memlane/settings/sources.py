"""Where settings come from besides the fields and the environment: the secrets file; and the
check, before any source is read, that no removed setting name is given (memlane/settings/removed.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from dotenv import dotenv_values
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import DotEnvSettingsSource, PydanticBaseSettingsSource

from memlane.settings.areas import ENV_PREFIX
from memlane.settings.removed import check_variables

SECRETS_FILE_VAR = ENV_PREFIX + "SECRETS_FILE"


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


class _RemovedNames(PydanticBaseSettingsSource):
    """Reads nothing: fails, first of the sources, on a removed setting name in the environment
    or the secrets file, naming the one that replaced it (memlane/settings/removed.py)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the environment whole

    def __call__(self) -> dict[str, Any]:
        check_variables(os.environ)
        path = os.environ.get(SECRETS_FILE_VAR)
        if path and Path(path).is_file():
            check_variables(dotenv_values(path), f" in {SECRETS_FILE_VAR} ({path})")
        return {}


def is_secret(name: str) -> bool:
    """True for a setting that is a credential, by environment variable or field name: API
    keys (the service's and the LLMs') and the Milvus token. Such values never travel in a Ray
    runtime_env: Ray logs its env vars (runtime_env_agent.log, at INFO) and shows them on the
    dashboard, seen here with a canary key."""
    return name.lower().endswith(("api_key", "api_keys", "milvus_token"))


def split_secrets(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The ``MEMLANE_*`` variables of ``environ`` as (public, secret), the secret ones ready for
    a secrets file."""
    public: dict[str, str] = {}
    secret: dict[str, str] = {}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX):
            (secret if is_secret(name) else public)[name] = value
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
