"""Reflect's request and result (the HTTP schema of reflect extends the request)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlane.llm.structured import check_schema
from memlane.records import Budget, MemoryUnit, RecalledMemory, TagsMatch, not_blank


class ReflectRequest(BaseModel):
    """Options of reflect. ``max_tokens`` is the recall budget for the memories the model sees;
    ``answer_max_tokens`` bounds the model's reply."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)  # not blank either: the validator below
    max_tokens: int = Field(4096, gt=0, le=1_000_000)
    budget: Budget = "mid"
    as_of: datetime | None = None  # validity filter (see RecallRequest)
    reference_time: datetime | None = None  # "now" for relative times and recency
    tags: list[str] | None = None
    tags_match: TagsMatch = "any"
    answer_max_tokens: int = Field(1024, gt=0, le=32_768)
    form_opinions: bool = True
    # A JSON Schema: the answer is also given as a JSON object that follows it
    # (``structured_output``), from one more call of the model (memlane/llm/structured.py).
    response_schema: dict[str, Any] | None = None

    @field_validator("query")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        return not_blank(v, "query")

    @field_validator("response_schema")
    @classmethod
    def _schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else check_schema(v)


class ReflectResult(BaseModel):
    """Reflect's answer: the text, the memories it cites, the opinions it formed or updated."""

    answer: str
    memory_ids: list[str] = Field(default_factory=list)
    opinions: list[MemoryUnit] = Field(default_factory=list)
    memories: list[RecalledMemory] = Field(default_factory=list)  # what the model was shown
    timings_ms: dict[str, float] = Field(default_factory=dict)
    # Recall abstained (memlane/recall/abstain.py): the answer says the bank does not know,
    # and no model was asked for one.
    abstain: bool = False
    abstain_reason: str | None = None
    # With a response_schema: the answer as a JSON object following it, or why there is none
    # (the model's reply did not follow it after a repair; recall abstained).
    structured_output: dict[str, Any] | None = None
    structured_output_error: str | None = None
