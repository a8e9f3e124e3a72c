"""What an extractor produces: narrative facts with their time, source turns and mentions.

The rule-based extractor and the LLM extractors (a later backend) return the same shape, so the
rest of retain (entity resolution, embedding, links, writes) does not care which one ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, Sequence

from memlane.records import Bank, FactType, LinkType
from memlane.retain.chunking import ChunkInput


@dataclass(slots=True)
class Mention:
    surface: str
    label: str  # spaCy label (PERSON, ORG, GPE, ...), SPEAKER, or ASSISTANT or ANIMAL
    # The turn's own words say what it is (a speaker, a cue: memlane/retain/entity_types.py):
    # entity resolution lets it correct the type of an entity a model's guess created.
    certain: bool = False


@dataclass(slots=True)
class CausalRelation:
    target: int  # index of an earlier fact of the same chunk
    type: LinkType
    strength: float


@dataclass(slots=True)
class Fact:
    text: str
    fact_type: FactType
    mentioned_at: datetime
    occurred_start: datetime | None
    occurred_end: datetime | None
    source_turns: list[str]
    context: str = ""  # neighbouring text, indexed lexically only (see MemoryUnit.context)
    mentions: list[Mention] = field(default_factory=list)
    causal: list[CausalRelation] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


class Extractor(Protocol):
    """Turns chunks (with their turns) into facts; one list of facts per chunk."""

    name: str

    def extract(self, bank: Bank, chunks: Sequence[ChunkInput]) -> list[list[Fact]]: ...
