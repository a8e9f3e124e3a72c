"""One typed settings object for the whole engine, nested by area, overridable from the environment.

Each field reads ``MEMLANE_<AREA>__<FIELD>`` (for example ``MEMLANE_STORE__MILVUS_URI``,
``MEMLANE_RECALL__RRF_K``, ``MEMLANE_LLM__RETAIN__BASE_URL``); ``MEMLANE_DATA_DIR`` is the one
top-level field. The areas are in :mod:`memlane.settings.areas`. The flat names of the first
release (``MEMLANE_MILVUS_URI``, ``Settings(rrf_k=...)``, ``settings.rrf_k``) still work for
construction and ``model_copy``: :data:`LEGACY` maps each to its new place, and a warning names
the new one; so do the settings that moved into the background area (:data:`RENAMED`:
``tree.online``, ``llm.background``). Reading an old attribute name fails with an
AttributeError that names the new one.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Mapping

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memlane.settings.areas import (
    BUDGET_DEPTH,
    DEFAULT_CHANNEL_WEIGHTS,
    ENV_PREFIX,
    LLM_ROLES,
    BackgroundSettings,
    FactsSettings,
    KeyPolicy,
    LLMRoleSettings,
    LLMSettings,
    ModelSettings,
    RecallSettings,
    ReflectSettings,
    RetainSettings,
    ServeSettings,
    StoreSettings,
    TreeSettings,
)
from memlane.settings.sources import (
    FLAT_RENAMED,
    LEGACY,
    RENAMED,
    SECRETS_FILE_VAR,
    _LegacyEnv,
    _plain,
    _put,
    _secrets_file_source,
    env_name,
    is_secret,
    move_renamed,
    split_secrets,
)

__all__ = [
    "BUDGET_DEPTH",
    "DEFAULT_CHANNEL_WEIGHTS",
    "ENV_PREFIX",
    "FLAT_RENAMED",
    "LEGACY",
    "LLM_ROLES",
    "RENAMED",
    "SECRETS_FILE_VAR",
    "BackgroundSettings",
    "FactsSettings",
    "KeyPolicy",
    "LLMRoleSettings",
    "LLMSettings",
    "ModelSettings",
    "RecallSettings",
    "ReflectSettings",
    "RetainSettings",
    "ServeSettings",
    "Settings",
    "StoreSettings",
    "TreeSettings",
    "env_name",
    "is_secret",
    "split_secrets",
]


class Settings(BaseSettings):
    """Engine configuration, one object nested by area. Defaults give the embedded,
    model-server-free setup."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore", validate_assignment=True
    )

    # Milvus Lite file, logs and run directories of the service live under it.
    data_dir: Path = Path(".memlane")
    store: StoreSettings = Field(default_factory=StoreSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    retain: RetainSettings = Field(default_factory=RetainSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    reflect: ReflectSettings = Field(default_factory=ReflectSettings)
    tree: TreeSettings = Field(default_factory=TreeSettings)
    facts: FactsSettings = Field(default_factory=FactsSettings)
    background: BackgroundSettings = Field(default_factory=BackgroundSettings)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        # Complex values of legacy variables (JSON objects) are parsed by the field validators.
        from_file = _secrets_file_source(settings_cls)
        return tuple(
            source
            for source in (
                init_settings,
                env_settings,
                _LegacyEnv(settings_cls),
                from_file,
                dotenv_settings,
                file_secret_settings,
            )
            if source is not None
        )

    @model_validator(mode="before")
    @classmethod
    def _nest_legacy(cls, data: Any) -> Any:
        """``Settings(rrf_k=5)`` -> ``Settings(recall={"rrf_k": 5})``, and the renamed settings
        into the background area, each with a DeprecationWarning."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in [n for n in data if n in LEGACY or n in FLAT_RENAMED]:
            path = LEGACY.get(name) or FLAT_RENAMED[name]
            if name in LEGACY:  # a renamed one is named with its new place by move_renamed
                warnings.warn(
                    f"Settings({name}=...) is deprecated: use {'.'.join(path)}",
                    DeprecationWarning,
                    stacklevel=4,
                )
            _put(data, path, _plain(data.pop(name)))
        move_renamed(data)
        return data

    def __getattr__(self, name: str) -> Any:
        if name in LEGACY:
            raise AttributeError(f"Settings.{name} moved to Settings.{'.'.join(LEGACY[name])}")
        return super().__getattr__(name)  # type: ignore[misc]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """A copy with ``update`` applied and validated; keys may be nested dicts for an area
        (``{"recall": {"rrf_k": 5}}``), an area object, or first-release flat names."""
        if not update:
            return super().model_copy(deep=deep)
        data = self.model_dump()
        for key, value in update.items():
            path = LEGACY.get(key) or FLAT_RENAMED.get(key)
            if path:
                if key in LEGACY:  # a renamed one is named with its new place by move_renamed
                    warnings.warn(
                        f"model_copy(update={{{key!r}: ...}}) is deprecated: use {'.'.join(path)}",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                _put(data, path, _plain(value))
            elif isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = _plain(value)
        return type(self).model_validate(data)

    def milvus_target(self) -> str:
        """The URI a MilvusClient opens: the server when configured, else the Lite file."""
        if self.store.milvus_uri:
            return self.store.milvus_uri
        return str(self.data_dir / "milvus.db")

    @property
    def graph_dir(self) -> Path:
        return self.data_dir / "graphs"
