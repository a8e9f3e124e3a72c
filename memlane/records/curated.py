"""Mental models and directives: what a user pins on a bank for recall and reflect
(memlane/curated/)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, field_validator

from memlane.records.memory import _Strict, not_blank, now_utc

CURATED_ID_PATTERN = r"^[a-z0-9][a-z0-9_\-]{0,63}$"


class ModelSource(_Strict):
    """A memory a mental model's answer cites: its id, its text when cited, its turns."""

    memory_id: str
    text: str
    turns: list[str] = Field(default_factory=list)


class MentalModel(_Strict):
    """A named question pinned on a bank, with its consolidated answer and sources
    (memlane/curated/). ``recalled`` counts the memories the answer was written from."""

    id: str = Field(pattern=CURATED_ID_PATTERN)
    bank_id: str
    question: str = Field(min_length=1, max_length=1000)
    answer: str = ""
    sources: list[ModelSource] = Field(default_factory=list)
    recalled: int = 0
    consolidator: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=now_utc)
    refreshed_at: datetime | None = None

    @field_validator("question")
    @classmethod
    def _question(cls, v: str) -> str:
        return not_blank(v, "question")


class Directive(_Strict):
    """A user rule for reflect, placed in its system message when the request's tags share
    one of ``tags`` (or always, when ``tags`` is empty)."""

    id: str = Field(pattern=CURATED_ID_PATTERN)
    bank_id: str
    text: str = Field(min_length=1, max_length=2000)
    tags: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list, max_length=32
    )
    created_at: datetime = Field(default_factory=now_utc)
    updated_at: datetime = Field(default_factory=now_utc)

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        return not_blank(v, "text")
