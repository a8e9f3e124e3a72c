"""The memory model: banks, turns, chunks, entities, links, memory units, tree nodes, and the
requests and results of the engine's API.

Everything that crosses the engine's boundary is one of these pydantic models, so a bad value
is rejected with an error that names the field before anything is written. The package sits at
the bottom of the engine: it imports no other ``memlane`` module. Import from here
(``from memlane.records import Turn``); the modules below are how it is laid out.
"""

from memlane.records.curated import CURATED_ID_PATTERN, Directive, MentalModel, ModelSource
from memlane.records.memory import (
    BANK_ID_PATTERN,
    CAUSAL_LINK_TYPES,
    LEVEL_NAMES,
    SLOTS_KEY,
    Bank,
    Chunk,
    Disposition,
    Entity,
    FactType,
    Level,
    Link,
    LinkType,
    MemoryUnit,
    OpinionChange,
    StoredDocument,
    TreeNode,
    Turn,
    TurnKind,
    UnitSlots,
    check_bank_id,
    not_blank,
    now_utc,
    utc,
)
from memlane.records.requests import (
    TAG_MODES,
    Budget,
    RecalledMemory,
    RecalledModel,
    RecalledNode,
    RecallRequest,
    RecallResult,
    RetainItem,
    TagsMatch,
)

__all__ = [
    "BANK_ID_PATTERN",
    "CAUSAL_LINK_TYPES",
    "CURATED_ID_PATTERN",
    "LEVEL_NAMES",
    "Bank",
    "Budget",
    "TAG_MODES",
    "TagsMatch",
    "Chunk",
    "Directive",
    "Disposition",
    "Entity",
    "FactType",
    "Level",
    "Link",
    "LinkType",
    "MemoryUnit",
    "SLOTS_KEY",
    "UnitSlots",
    "MentalModel",
    "ModelSource",
    "OpinionChange",
    "RecallRequest",
    "RecallResult",
    "RecalledMemory",
    "RecalledModel",
    "RecalledNode",
    "RetainItem",
    "StoredDocument",
    "TreeNode",
    "Turn",
    "TurnKind",
    "check_bank_id",
    "not_blank",
    "now_utc",
    "utc",
]
