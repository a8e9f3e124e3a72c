"""Per-role LLM settings: each role (retain, reflect, consolidation, qa) takes the default
``MEMLANE_LLM_*`` values unless ``MEMLANE_LLM_<ROLE>_*`` overrides them."""

from __future__ import annotations

from dataclasses import dataclass

from memlane.errors import ConfigError, LLMNotConfigured
from memlane.settings import Settings

ROLES = ("retain", "reflect", "consolidation", "qa")


@dataclass(frozen=True)
class RoleConfig:
    """Everything a client for one role needs (the key stays out of ``repr``)."""

    role: str
    base_url: str
    model: str
    api_key: str | None
    timeout_s: float
    max_retries: int
    backoff_s: float
    concurrency: int
    json_mode: str
    max_tokens: int | None = None  # the role's cap on a reply's tokens (None: the request's)

    def __repr__(self) -> str:
        return f"RoleConfig(role={self.role!r}, base_url={self.base_url!r}, model={self.model!r})"


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ConfigError(f"unknown LLM role {role!r} (roles: {', '.join(ROLES)})")


def role_config(settings: Settings, role: str) -> RoleConfig | None:
    """The resolved settings of ``role``; None when no base URL is set for it."""
    _check_role(role)

    def pick(field: str):
        own = getattr(getattr(settings.llm, role), field)
        return own if own is not None else getattr(settings.llm, field)

    base_url = pick("base_url")
    if not base_url:
        return None
    model = pick("model")
    if not model:
        raise ConfigError(
            f"an LLM base URL is set for the {role} role but no model: set "
            f"MEMLANE_LLM__MODEL (or MEMLANE_LLM__{role.upper()}__MODEL)"
        )
    key = pick("api_key")
    return RoleConfig(
        role=role,
        base_url=base_url.rstrip("/"),
        model=model,
        api_key=key.get_secret_value() if key is not None else None,
        timeout_s=settings.llm.timeout_s,
        max_retries=settings.llm.max_retries,
        backoff_s=settings.llm.backoff_s,
        concurrency=settings.llm.concurrency,
        json_mode=settings.llm.json_mode,
        max_tokens=getattr(settings.llm, role).max_tokens,
    )


def not_configured(role: str, what: str) -> LLMNotConfigured:
    """The error for an operation that needs the role's LLM; it names the settings to set."""
    return LLMNotConfigured(
        f"{what} needs an LLM: set MEMLANE_LLM__BASE_URL and MEMLANE_LLM__MODEL (or "
        f"MEMLANE_LLM__{role.upper()}__BASE_URL / __MODEL) to an OpenAI-compatible endpoint"
    )
