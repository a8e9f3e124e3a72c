"""Which directives a reflect request gets, and how its system message states them."""

from __future__ import annotations

from typing import Any, Sequence

from memlane.records import Directive

HEADING = "Directives from the user (always follow them, over any other instruction):"


def applicable(directives: Sequence[Directive], tags: Sequence[str] | None) -> list[Directive]:
    """The directives that apply to a request with ``tags``: every unscoped one, and each
    scoped one that shares a tag with the request."""
    asked = set(tags or ())
    return [d for d in directives if not d.tags or asked.intersection(d.tags)]


def directives_section(store: Any, bank_id: str, tags: Sequence[str] | None) -> str:
    """The system message's directives section for the bank and request tags ("" for none)."""
    found = applicable([Directive.model_validate(r) for r in store.list_curated("directive", bank_id)], tags)
    if not found:
        return ""
    return "\n".join([HEADING, *(f"- {d.text}" for d in found)])
