"""The engine's records: banks, turns, chunks, entities, links, memory units and tree nodes."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import Enum, IntEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memlane.records.limits import MAX_TEXT_BYTES, check_bytes

BANK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
_BANK_ID_RE = re.compile(BANK_ID_PATTERN)


def not_blank(value: str, what: str) -> str:
    """``value`` unchanged, or ValueError naming ``what`` when it holds only whitespace (the
    shared check of request validators)."""
    if not value.strip():
        raise ValueError(f"{what} must not be empty")
    return value


def utc(dt: datetime) -> datetime:
    """Return ``dt`` as an aware UTC datetime (naive values are taken to be UTC)."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def now_utc() -> datetime:
    return datetime.now(UTC)


def check_bank_id(bank_id: str) -> str:
    """Validate a bank id: 1-128 chars of letters, digits, '_', '.', '-', not starting with a symbol."""
    if not isinstance(bank_id, str) or not _BANK_ID_RE.match(bank_id):
        raise ValueError(
            f"invalid bank id {bank_id!r}: use 1-128 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return bank_id


class FactType(str, Enum):
    """The four memory networks of Hindsight."""

    world = "world"  # objective, third-person facts
    experience = "experience"  # the bank owner's own actions, first person
    opinion = "opinion"  # beliefs with a confidence that changes with evidence
    observation = "observation"  # preference-neutral entity summaries


class LinkType(str, Enum):
    entity = "entity"
    temporal = "temporal"
    semantic = "semantic"
    causes = "causes"
    caused_by = "caused_by"
    enables = "enables"
    prevents = "prevents"


CAUSAL_LINK_TYPES = frozenset({LinkType.causes, LinkType.caused_by, LinkType.enables, LinkType.prevents})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Disposition(_Strict):
    """CARA disposition: how skeptical, literal and empathetic the bank reasons, and how strongly."""

    skepticism: int = Field(3, ge=1, le=5)
    literalism: int = Field(3, ge=1, le=5)
    empathy: int = Field(3, ge=1, le=5)
    bias_strength: float = Field(0.5, ge=0.0, le=1.0)


class Bank(_Strict):
    """A named memory container plus the profile reflect speaks with."""

    bank_id: str
    name: str = ""
    background: str = ""
    disposition: Disposition = Field(default_factory=Disposition)
    created_at: datetime = Field(default_factory=now_utc)
    updated_at: datetime = Field(default_factory=now_utc)
    # The embedder (its stable name) and dimension the bank's vectors were written with,
    # recorded on creation or first retain (memlane/banks.py). "" and 0: a bank written before
    # banks recorded it, which only MiniLM (384-d) could have written.
    embedder: str = ""
    embedding_dim: int = Field(0, ge=0)
    # The embedder a re-embed (``memlane reembed``) is moving the bank to, until it finishes:
    # the bank's vectors are mixed meanwhile, so recall and retain refuse it.
    reembedding: str = ""

    @field_validator("bank_id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        return check_bank_id(v)


TurnKind = Literal["text", "image"]


class Turn(_Strict):
    """One utterance of a conversation, as read from an input file.

    A turn of ``kind`` "image" shares an image besides its text; ``caption`` describes it in
    words, which the engine indexes with the text. Input readers map their dataset's own fields
    to these (memlane/ingest/locomo.py), so the engine reads no dataset's field names."""

    document_id: str = Field(min_length=1)
    session_id: str = Field(min_length=1)
    turn_id: str = Field(min_length=1)
    index: int = Field(ge=0)  # position within the session
    speaker: str = Field(min_length=1)
    text: str
    timestamp: datetime
    kind: TurnKind = "text"
    caption: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("timestamp")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return utc(v)

    @model_validator(mode="after")
    def _caption_has_content(self) -> Turn:
        if self.caption and self.kind == "text":
            raise ValueError("a caption describes shared content: it needs kind 'image'")
        return self

    @model_validator(mode="after")
    def _fits_the_store(self) -> Turn:
        # The turn's line is a memory's text and a chunk's: refused here, where a reader or an
        # API item makes the turn, before a bank or a model is touched.
        check_bytes(f"turn {self.turn_id!r} (speaker and text)", self.line, MAX_TEXT_BYTES)
        return self

    @property
    def line(self) -> str:
        """The turn as one line of text (``Speaker: text`` plus the caption of the image it
        shared): the text of its episode memory and its line in its chunk."""
        line = f"{self.speaker}: {self.text}"
        if self.kind == "image" and self.caption:
            line += f" [shares an image: {self.caption}]"
        return line

    @property
    def has_content(self) -> bool:
        """True when the turn says something: non-blank text or a caption."""
        return bool(self.text.strip() or self.caption)


class Chunk(_Strict):
    """Raw source text kept losslessly; every memory unit names the chunk it came from."""

    chunk_id: str
    bank_id: str
    document_id: str
    session_id: str
    index: int = Field(ge=0)
    text: str
    turn_ids: list[str] = Field(default_factory=list)
    started_at: datetime
    tags: list[str] = Field(default_factory=list)


class StoredDocument(_Strict):
    """A document as retained: its turns' text (its chunks' text, session by session, each
    turn a ``speaker: text`` line), its counts, its tags and when its first and last chunk
    start."""

    document_id: str
    text: str
    units: int = Field(ge=0)
    chunks: int = Field(ge=0)
    tags: list[str] = Field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None


class Entity(_Strict):
    """A canonical entity of one bank; mentions resolve to it."""

    entity_id: str
    bank_id: str
    name: str = Field(min_length=1)
    type: str = "OTHER"
    aliases: list[str] = Field(default_factory=list)
    mention_count: int = Field(0, ge=0)
    first_seen: datetime | None = None
    last_seen: datetime | None = None


class Link(_Strict):
    """A directed edge of the memory graph, stored on its source unit."""

    target_id: str
    type: LinkType
    weight: float = Field(1.0, ge=0.0, le=1.0)


class OpinionChange(_Strict):
    at: datetime
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = ""
    evidence_id: str | None = None


#: The key under which a store keeps a unit's :class:`UnitSlots` in its metadata column (no new
#: column: every existing store would need migrating); no client's metadata may use it.
SLOTS_KEY = "_slots"


class UnitSlots(BaseModel):
    """What the slot classifier reads of a memory alone (memlane/facts/classifier.py), computed
    once when it is written: for each slot family (FAMILIES order) the best score of the
    family's candidate values in its text (-1: none), and its gate (it states its speaker's own
    current situation). ``weights`` names the weights they came from; recall recomputes them
    where another set is shipped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: str = Field(min_length=1)
    best: list[float]
    gate: float = Field(ge=0.0, le=1.0)


class MemoryUnit(_Strict):
    """A memory: one narrative fact of one network, with its time, provenance and links."""

    id: str
    bank_id: str
    text: str = Field(min_length=1)
    # Neighbouring conversation text, indexed for lexical search but not returned as the
    # memory: it stands in for the coreference resolution an LLM extractor would do.
    context: str = ""
    fact_type: FactType = FactType.world
    embedding: list[float] | None = None
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None
    mentioned_at: datetime
    confidence: float | None = Field(None, ge=0.0, le=1.0)
    document_id: str = ""
    chunk_id: str = ""
    source_turns: list[str] = Field(default_factory=list)
    entity_ids: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    links: list[Link] = Field(default_factory=list)
    proof_count: int = Field(1, ge=0)
    source_fact_ids: list[str] = Field(default_factory=list)
    history: list[OpinionChange] = Field(default_factory=list)
    # Engram bi-temporal validity: a superseded fact is invalidated, never deleted.
    valid_from: datetime | None = None
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Set by the write path (memlane/writes.py), hidden from clients (memlane/views.py).
    slots: UnitSlots | None = None

    @field_validator("metadata")
    @classmethod
    def _no_slots_key(cls, v: dict[str, Any]) -> dict[str, Any]:
        if SLOTS_KEY in v:
            raise ValueError(
                f"metadata key {SLOTS_KEY!r} is reserved (the store keeps the slot signals there)"
            )
        return v

    @field_validator("occurred_start", "occurred_end", "mentioned_at", "valid_from", "invalid_at")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else utc(v)

    @field_validator("tags")
    @classmethod
    def _unique_tags(cls, v: list[str]) -> list[str]:
        # A tag set: an "exact" tag filter compares sets, which Milvus does by the array's
        # length (memlane/units.py), so a stored unit never repeats a tag.
        return list(dict.fromkeys(v))


class Level(IntEnum):
    """The tree's levels, bottom up."""

    unit = 1
    session = 2
    day = 3
    week = 4
    profile = 5


LEVEL_NAMES = {lv.value: lv.name for lv in Level}


class TreeNode(BaseModel):
    """One consolidated node (levels 2-5).

    ``children`` are ids one level down (memory unit ids for a session). ``source_turns`` is the
    union of the turns under the node; ``cited`` the children whose words the text carries (all
    of them for an LLM summary, the chosen ones for the extractive consolidator) and
    ``cited_turns`` the turns those come from: what an evaluation may credit the node with.
    ``signature`` hashes what the node was written from, so an unchanged window is skipped."""

    model_config = ConfigDict(extra="forbid")

    id: str
    bank_id: str
    level: Level
    key: str  # the window: "doc|session", "2023-05-08", "2023-W19", "profile"
    start: datetime
    end: datetime
    text: str = Field(min_length=1)
    embedding: list[float] | None = None
    children: list[str] = Field(min_length=1)
    cited: list[str] = Field(default_factory=list)
    source_turns: list[str] = Field(default_factory=list)
    cited_turns: list[str] = Field(default_factory=list)
    entity_ids: list[str] = Field(default_factory=list)
    consolidator: str
    signature: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return utc(v)

    @field_validator("level")
    @classmethod
    def _node_level(cls, v: Level) -> Level:
        if v == Level.unit:
            raise ValueError("level 1 is the memory units; tree nodes are levels 2-5")
        return v
