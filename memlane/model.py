"""The memory model: banks, turns, chunks, entities, links and memory units.

Everything that crosses the engine's boundary is one of these pydantic models, so a bad value
is rejected with an error that names the field before anything is written.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import Enum, IntEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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

    @field_validator("bank_id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        return check_bank_id(v)


class Turn(_Strict):
    """One utterance of a conversation, as read from an input file."""

    document_id: str = Field(min_length=1)
    session_id: str = Field(min_length=1)
    turn_id: str = Field(min_length=1)
    index: int = Field(ge=0)  # position within the session
    speaker: str = Field(min_length=1)
    text: str
    timestamp: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("timestamp")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return utc(v)


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

    @field_validator("occurred_start", "occurred_end", "mentioned_at", "valid_from", "invalid_at")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else utc(v)

    def is_valid_at(self, when: datetime) -> bool:
        """True when the unit was known and not yet superseded at ``when`` (the ``as_of`` rule of
        :mod:`memlane.units`)."""
        from memlane.units import valid_at  # memlane.units builds on this module

        return valid_at(self.mentioned_at, self.valid_from, self.invalid_at, utc(when))


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

    def public(self) -> dict[str, Any]:
        """The node as the API and CLI show it (no vector; the level's name beside its number)."""
        out = self.model_dump(mode="json", exclude={"embedding", "signature"})
        out["level_name"] = LEVEL_NAMES[int(self.level)]
        return out


class RetainItem(_Strict):
    """One piece of content to retain through the API: a chat turn or any text.

    Items that share a ``document_id`` form one document; retaining a document again replaces
    what it held before (its memories, chunks and links), so a client can resend a growing
    conversation under one id, and a retried request leaves the same state. Items without a
    ``document_id`` get one derived from their content: the same items always land in the
    same document, different items never overwrite each other.
    """

    content: str = Field(min_length=1, max_length=60_000)
    timestamp: datetime | None = None  # when it was said; default: the time of the request
    speaker: str = Field("user", min_length=1, max_length=256)
    session_id: str | None = Field(None, min_length=1, max_length=256)
    document_id: str | None = Field(None, min_length=1, max_length=256)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        return not_blank(v, "content")

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        for tag in v:
            not_blank(tag, "tags")
        return v

    @field_validator("timestamp")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else utc(v)


Budget = Literal["low", "mid", "high"]


class RecallRequest(_Strict):
    """What recall takes. ``budget`` sets how deep each channel searches."""

    query: str
    max_tokens: int = Field(4096, gt=0, le=1_000_000)
    budget: Budget = "mid"
    types: list[FactType] | None = None
    tags: list[str] | None = None
    tags_match: Literal["any", "all"] = "any"
    # A validity filter: only what was known and still valid at that time.
    as_of: datetime | None = None
    # Superseded facts (Engram, memlane/facts): False hides them (recall "as of now"), True
    # returns them ranked below their successors, None decides from the query (a question
    # about the past: "before", "used to", "previously" ... includes them).
    include_history: bool | None = None
    # "Now" for relative expressions in the query ("last month") and for recency; filters
    # nothing. Default: as_of, else the current time. Separate from as_of because a question
    # asked at 09:14 may need a fact said at 19:37 the same day (a LongMemEval haystack that
    # runs past the question's time): as a cut-off that excluded the answer of 3 of 9 missed
    # questions on a held-out LongMemEval sample.
    reference_time: datetime | None = None
    include_chunks: bool = False
    max_chunk_tokens: int = Field(2048, gt=0, le=1_000_000)
    trace: bool = False
    channels: list[Literal["semantic", "lexical", "graph", "temporal"]] | None = None
    # The temporal tree (memlane/tree): which levels recall climbs to (1 = memory units only,
    # flat recall; 2-5 session, day, week, profile). None: the planner's choice for the
    # query's complexity when the bank has a tree.
    levels: list[Annotated[int, Field(ge=1, le=5)]] | None = Field(None, min_length=1)
    # Who plans: "auto", "rules", "llm" or "off" (flat recall); None: the settings'
    # tree.planner (memlane/settings.py TreeSettings).
    planner: Literal["auto", "rules", "llm", "off"] | None = None
    # Multi-hop decomposition into sub-queries: "auto", "rules", "llm" or "off"; None: the
    # settings' recall.decompose (memlane/recall/decompose.py).
    decompose: Literal["auto", "rules", "llm", "off"] | None = None

    @field_validator("query")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        return not_blank(v, "query")

    @field_validator("as_of", "reference_time")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else utc(v)


class ChannelHit(BaseModel):
    rank: int
    score: float


class RecalledMemory(BaseModel):
    """One recall result: the unit (without its vector), its final score and, on request, a trace."""

    unit: MemoryUnit
    score: float
    tokens: int
    trace: dict[str, Any] | None = None


class RecalledNode(BaseModel):
    """A tree node recall returned: the node (without its vector), its similarity to the query,
    its tokens and ``rank``, its place in the one ranking of memories and nodes (0 = first):
    a node is placed just before the best-ranked memory under it."""

    node: TreeNode
    score: float
    tokens: int
    rank: int


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


class RecalledModel(BaseModel):
    """A mental model recall returned first: its question's cosine to the query is ``score``."""

    model: MentalModel
    score: float


class RecallResult(BaseModel):
    # Mental models whose question is close to the query (memlane/curated/), best first: a
    # curated answer comes before the memories.
    mental_models: list[RecalledModel] = Field(default_factory=list)
    memories: list[RecalledMemory]
    # Tree nodes (levels 2-5), ordered by level then by distance in time to the query; empty
    # for flat recall or a bank without a tree.
    nodes: list[RecalledNode] = Field(default_factory=list)
    # The planner's decision and what the tree stage did, when it ran (see memlane/tree/recall).
    plan: dict[str, Any] | None = None
    # The sub-queries the question was split into and recalled with, a bridged one with the
    # name it was given (empty: not split). In a memory's trace, channel "lexical@2" is the
    # lexical channel of subqueries[1] (memlane/recall/decompose.py).
    subqueries: list[str] = Field(default_factory=list)
    chunks: list[Chunk] = Field(default_factory=list)
    tokens: int = 0
    chunk_tokens: int = 0
    query_interval: tuple[datetime, datetime] | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)
    # Abstention (memlane/recall/abstain.py): the evidence does not support an answer (the
    # memories are still returned); the reason, and the signals the decision read.
    abstain: bool = False
    abstain_reason: str | None = None
    abstain_signals: dict[str, Any] = Field(default_factory=dict)
    # Answered from the store's own searches while this process loaded the bank (a cold bank,
    # settings recall.cold_bank="store"): no graph spreading and no chunk prior in this answer.
    cold: bool = False

    def ranked(self) -> list[RecalledMemory | RecalledNode]:
        """Memories and nodes in one ranking, best first: each node at its ``rank``, the
        memories in their order around them (what an answerer reads, and what evals score)."""
        at = {n.rank: n for n in self.nodes}
        mems = iter(self.memories)
        out: list[RecalledMemory | RecalledNode] = []
        for r in range(len(self.memories) + len(self.nodes)):
            item = at.get(r)
            out.append(item if item is not None else next(mems))
        return out
