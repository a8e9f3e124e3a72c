"""What the engine's API takes and returns: retain items, the recall request and its result."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from memlane.records.curated import MentalModel
from memlane.records.memory import Chunk, FactType, MemoryUnit, TreeNode, _Strict, not_blank, utc


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
# How a request's tags select memories (the rule: memlane/units.py). "any": shares a tag; "all":
# has every tag; "any_or_untagged" / "all_or_untagged": the same, or has no tag; "exact": has
# exactly these tags (none given: the untagged memories). Hindsight's five modes map onto these
# (serve/hindsight/).
TagsMatch = Literal["any", "all", "any_or_untagged", "all_or_untagged", "exact"]
TAG_MODES: tuple[str, ...] = TagsMatch.__args__  # type: ignore[attr-defined]


class RecallRequest(_Strict):
    """What recall takes. ``budget`` sets how deep each channel searches."""

    query: str = Field(min_length=1)  # not blank either: the validator below
    max_tokens: int = Field(4096, gt=0, le=1_000_000)
    budget: Budget = "mid"
    types: list[FactType] | None = None
    tags: list[str] | None = None
    tags_match: TagsMatch = "any"
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
    # tree.planner (memlane/settings/areas.py TreeSettings).
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
    # Channels asked for that the search backend could not run (a cold bank answered by a
    # Milvus without BM25, Milvus 2.3: ["lexical"]); the others' ranking stands without them.
    channels_missing: list[str] = Field(default_factory=list)

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
