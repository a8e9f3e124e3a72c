"""The extractor the settings name: the LLM-free rules, or the LLM extractor of the retain role
with the rules as its fallback."""

from __future__ import annotations

from memlane.errors import ConfigError
from memlane.retain.facts import Extractor
from memlane.settings import Settings


def build_extractor(settings: Settings) -> Extractor:
    """``MEMLANE_RETAIN__EXTRACTOR``: "rules" or "llm" (which needs an LLM for the retain role)."""
    if settings.retain.extractor not in ("rules", "llm"):
        raise ConfigError(f"unknown extractor {settings.retain.extractor!r} (available: rules, llm)")
    from memlane.retain.extract_rules import RuleExtractor
    from memlane.retain.ner import SpacyNER

    rules = RuleExtractor(SpacyNER(settings.models.spacy_model), slots=settings.facts.slots)
    if settings.retain.extractor == "rules":
        return rules
    from memlane.llm import require_llm
    from memlane.retain.extract_llm import LLMExtractor

    llm = require_llm(settings, "retain", "MEMLANE_RETAIN__EXTRACTOR=llm")
    return LLMExtractor(
        llm, rules, concurrency=settings.llm.concurrency, max_tokens=settings.llm.extract_max_tokens
    )
