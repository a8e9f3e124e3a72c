"""The extractor the settings name: the LLM-free rules, or the LLM extractor of the retain role
with the rules as its fallback."""

from __future__ import annotations

from memlane.errors import ConfigError
from memlane.retain.facts import Extractor
from memlane.settings import Settings


def build_extractor(settings: Settings) -> Extractor:
    """``MEMLANE_EXTRACTOR``: "rules" or "llm" (which needs an LLM for the retain role)."""
    if settings.extractor not in ("rules", "llm"):
        raise ConfigError(f"unknown extractor {settings.extractor!r} (available: rules, llm)")
    from memlane.retain.extract_rules import RuleExtractor
    from memlane.retain.ner import SpacyNER

    rules = RuleExtractor(SpacyNER(settings.spacy_model))
    if settings.extractor == "rules":
        return rules
    from memlane.llm import require_llm
    from memlane.retain.extract_llm import LLMExtractor

    llm = require_llm(settings, "retain", "MEMLANE_EXTRACTOR=llm")
    return LLMExtractor(llm, rules, concurrency=settings.llm_concurrency,
                        max_tokens=settings.llm_extract_max_tokens)
