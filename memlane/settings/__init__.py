"""One typed settings object for the whole engine, nested by area, overridable from the environment.

Each field reads ``MEMLANE_<AREA>__<FIELD>`` (for example ``MEMLANE_STORE__MILVUS_URI``,
``MEMLANE_RECALL__RRF_K``, ``MEMLANE_LLM__RETAIN__BASE_URL``); ``MEMLANE_DATA_DIR`` is the one
top-level field. The areas are in :mod:`memlane.settings.areas` (recall's in
:mod:`memlane.settings.recall_area`). A setting has one name: the names removed at 0.1.0 (the
first release's flat ``MEMLANE_RRF_K`` or ``Settings(rrf_k=...)``, and ``tree.online`` and
``llm.background``, now in the background area) fail wherever they are given with an error
naming the setting to use (:mod:`memlane.settings.removed`); reading ``settings.rrf_k`` fails
with an AttributeError naming ``settings.recall.rrf_k``. What each entry point (the service,
the batch jobs, their actors) changes in the defaults is declared in
:mod:`memlane.settings.entry_points` and shown by ``memlane config show --for ...``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memlane.settings.areas import (
    ENV_PREFIX,
    LLM_ROLES,
    BackgroundSettings,
    FactsSettings,
    JobSettings,
    KeyPolicy,
    LLMRoleSettings,
    LLMSettings,
    ModelSettings,
    ReflectSettings,
    RetainSettings,
    ServeSettings,
    StoreSettings,
    TreeSettings,
)
from memlane.settings.recall_area import BUDGET_DEPTH, DEFAULT_CHANNEL_WEIGHTS, RecallSettings
from memlane.settings.removed import FLAT, RemovedSetting, check_keywords, env_name
from memlane.settings.sources import (
    SECRETS_FILE_VAR,
    _plain,
    _RemovedNames,
    _secrets_file_source,
    is_secret,
    split_secrets,
)

__all__ = [
    "BUDGET_DEPTH",
    "DEFAULT_CHANNEL_WEIGHTS",
    "ENV_PREFIX",
    "LLM_ROLES",
    "SECRETS_FILE_VAR",
    "BackgroundSettings",
    "FactsSettings",
    "JobSettings",
    "KeyPolicy",
    "LLMRoleSettings",
    "LLMSettings",
    "ModelSettings",
    "RecallSettings",
    "ReflectSettings",
    "RemovedSetting",
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
    jobs: JobSettings = Field(default_factory=JobSettings)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        # _RemovedNames first: a removed name fails before any source is read.
        from_file = _secrets_file_source(settings_cls)
        return tuple(
            source
            for source in (
                _RemovedNames(settings_cls),
                init_settings,
                env_settings,
                from_file,
                dotenv_settings,
                file_secret_settings,
            )
            if source is not None
        )

    @model_validator(mode="before")
    @classmethod
    def _no_removed_names(cls, data: Any) -> Any:
        """``Settings(rrf_k=5)`` or ``Settings(tree={"online": "off"})``: an error naming the
        setting to use (``recall.rrf_k``, ``background.tree``), not a silently ignored keyword."""
        if isinstance(data, dict):
            check_keywords(data, "Settings keyword")
        return data

    def __getattr__(self, name: str) -> Any:
        if name in FLAT:
            raise AttributeError(f"Settings.{name} was renamed: use Settings.{'.'.join(FLAT[name])}")
        return super().__getattr__(name)  # type: ignore[misc]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """A copy with ``update`` applied and validated; keys are areas, each a nested dict of
        the fields to change (``{"recall": {"rrf_k": 5}}``) or an area object. A removed name
        fails with :class:`RemovedSetting` naming the one to use."""
        if not update:
            return super().model_copy(deep=deep)
        check_keywords(update, "model_copy key")
        data = self.model_dump()
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
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
