"""HTTP request bodies. Unknown fields are rejected (a typo in an option must not silently
fall back to its default)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memlane.records import Disposition, RecallRequest, RetainItem
from memlane.reflect.service import ReflectRequest


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BankBody(_Body):
    """PUT /v1/banks/{bank_id}: create the bank, or update the fields given."""

    name: str | None = Field(None, max_length=256)
    background: str | None = Field(None, max_length=60_000)
    disposition: Disposition | None = None


class RetainBody(_Body):
    items: list[RetainItem] = Field(min_length=1, max_length=10_000)
    document_id: str | None = Field(None, min_length=1, max_length=256)
    tags: list[str] = Field(default_factory=list)
    # true: answer 202 with an operation id at once and retain in the background
    async_: bool = Field(False, alias="async")


class RecallBody(RecallRequest):
    """POST /v1/banks/{bank_id}/recall: the engine's RecallRequest (``levels`` and ``planner``
    choose how far up the temporal tree recall climbs; the answer's ``nodes`` and ``plan``)."""


class ConsolidateBody(_Body):
    """POST /v1/banks/{bank_id}/consolidate (the body is optional)."""

    # "auto", "rules" or "llm" ("llm" without a consolidation model is 503); None: the
    # service's MEMLANE_TREE__CONSOLIDATOR
    consolidator: Literal["auto", "rules", "llm"] | None = None
    # true: answer 202 with an operation id at once and consolidate in the background
    async_: bool = Field(False, alias="async")


class ReflectBody(ReflectRequest):
    """POST /v1/banks/{bank_id}/reflect: the engine's ReflectRequest."""


class RerankBody(_Body):
    query: str = Field(min_length=1, max_length=10_000)
    documents: list[str] = Field(min_length=1, max_length=1000)
