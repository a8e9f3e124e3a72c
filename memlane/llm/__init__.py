"""The LLM layer: one :class:`~memlane.interfaces.LLM` interface, built per role from Settings.

Backends: :class:`~memlane.llm.openai_compat.OpenAICompatLLM` for any OpenAI-compatible chat
endpoint (OpenAI, vLLM's server, a Ray Serve LLM app, llama.cpp, ...). vLLM on GPUs is reached
either through such an endpoint (``serve/llm.py`` builds the Ray Serve LLM app that online
reflect points at) or, for bulk extraction, through ``ray.data.llm`` (``pipelines/llm_extract.py``).
"""

from __future__ import annotations

from memlane.llm.config import ROLES, RoleConfig, not_configured, role_config
from memlane.llm.errors import LLMError, LLMOutputError
from memlane.settings import Settings

__all__ = ["ROLES", "RoleConfig", "LLMError", "LLMOutputError", "build_llm", "require_llm", "role_config"]


def build_llm(settings: Settings, role: str):
    """The LLM for ``role`` ("retain", "reflect", "consolidation", "qa"), or None when no LLM is
    configured for it. Raises ConfigError for an unknown role or a base URL without a model."""
    cfg = role_config(settings, role)
    if cfg is None:
        return None
    from memlane.llm.openai_compat import OpenAICompatLLM

    return OpenAICompatLLM(cfg)


def require_llm(settings: Settings, role: str, what: str):
    """Like :func:`build_llm` but raises LLMNotConfigured (naming the setting) instead of None."""
    llm = build_llm(settings, role)
    if llm is None:
        raise not_configured(role, what)
    return llm
