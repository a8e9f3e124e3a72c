"""What clients see of the engine's records: the one projection that the REST API, the three MCP
backends, the CLI's ``--json`` output (and so the SDK and the memory explorer, which read the
REST API) turn units, tree nodes, entities and recall and reflect answers into.

Hidden from every client:

- ``embedding`` (units and nodes): the vector, 384 floats a client has no use for, several
  times the size of the rest of the record (``export --vectors`` is the one way to get it);
- a unit's ``context``: the neighbouring turns stored beside the fact only so that lexical
  search finds it (a stand-in for coreference resolution, memlane/retain/). It is not the
  memory: a client reads those turns as the neighbouring memories, or with ``include_chunks``;
- a unit's ``slots``: what the slot classifier read of it when it was written, kept for the
  learned ranker (memlane/facts/classifier.py);
- a node's ``signature``: the hash the consolidator compares to skip an unchanged window.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from memlane.records import LEVEL_NAMES, Entity, MemoryUnit, RecalledMemory, RecallResult, TreeNode

if TYPE_CHECKING:  # memlane.reflect's package imports the reflect service; a view needs none
    from memlane.reflect.requests import ReflectResult

UNIT_HIDDEN = frozenset({"embedding", "context", "slots"})
NODE_HIDDEN = frozenset({"embedding", "signature"})

# The same rules as pydantic exclude specs over the answers that nest units and nodes, so a
# recall is serialised straight to JSON bytes by pydantic-core (serve/bank_host.py: re-encoding
# a 100-memory dict cost more than the recall's search).
RECALL_EXCLUDE: dict[str, Any] = {
    "memories": {"__all__": {"unit": set(UNIT_HIDDEN)}},
    "nodes": {"__all__": {"node": set(NODE_HIDDEN)}},
}
REFLECT_EXCLUDE: dict[str, Any] = {
    "memories": {"__all__": {"unit": set(UNIT_HIDDEN)}},
    "opinions": {"__all__": set(UNIT_HIDDEN)},
}


def _to_the_second(unit: MemoryUnit) -> MemoryUnit:
    """The unit with its times to the whole second. Recall builds its units from search hits,
    which keep times to the second (memlane.units: the floor of the epoch second), while a
    listing or a get reads the exact record: without this one memory's ``occurred_end`` was
    ``23:59:59.999999`` in a listing and ``23:59:59`` in a recall. Clients see the second."""
    exact = {k: v.replace(microsecond=0) for k, v in unit if isinstance(v, datetime) and v.microsecond}
    return unit.model_copy(update=exact) if exact else unit  # recall's units: nothing to copy


def _recalled(memories: list[RecalledMemory]) -> list[RecalledMemory]:
    return [
        m if (u := _to_the_second(m.unit)) is m.unit else m.model_copy(update={"unit": u}) for m in memories
    ]


def memory_dates(unit: MemoryUnit) -> str:
    """A memory's dates as one line shows them: when it was said, then the events it dates.

    "2026-03-02" (dates no event), "2026-03-02, event 2026-04-06", "2025-05-22, event
    2025-05-24..2025-05-25" (a weekend), "2026-03-02, events 2026-03-02, 2026-04-06" (a turn
    about two days: memlane/temporal/events.py). The said date leads because it is the one every
    memory has; an occurrence is an event only where the text dates one. The REST API and the
    explorer show the same fields: ``mentioned_at``, ``occurred_start``/``occurred_end`` and
    ``metadata.events``."""
    from memlane.temporal import EVENTS

    said = unit.mentioned_at.date().isoformat()
    listed = unit.metadata.get(EVENTS)
    if isinstance(listed, list) and listed:
        spans = [(str(a), str(b)) for a, b in listed]
        label = "events" if len(spans) > 1 else "event"
    elif unit.occurred_start is not None or unit.occurred_end is not None:
        known = sorted(t for t in (unit.occurred_start, unit.occurred_end) if t is not None)
        start, end = known[0], known[-1]
        if start == end == unit.mentioned_at:  # the said time copied, as retain once stored it
            return said
        spans, label = [(start.date().isoformat(), end.date().isoformat())], "event"
    else:
        return said
    return f"{said}, {label} " + ", ".join(a if a == b else f"{a}..{b}" for a, b in spans)


def unit_view(unit: MemoryUnit) -> dict[str, Any]:
    """A memory as clients see it (listing, get, an entity's memories)."""
    return _to_the_second(unit).model_dump(mode="json", exclude=set(UNIT_HIDDEN))


def node_view(node: TreeNode) -> dict[str, Any]:
    """A tree node as clients see it, with its level's name beside its number."""
    out = node.model_dump(mode="json", exclude=set(NODE_HIDDEN))
    out["level_name"] = LEVEL_NAMES[int(node.level)]
    return out


def entity_view(entity: Entity) -> dict[str, Any]:
    """An entity as clients see it (all its fields)."""
    return entity.model_dump(mode="json")


def _recall(result: RecallResult) -> RecallResult:
    memories = _recalled(result.memories)
    same = all(a is b for a, b in zip(memories, result.memories, strict=True))
    return result if same else result.model_copy(update={"memories": memories})


def recall_view(result: RecallResult) -> dict[str, Any]:
    """A recall answer as clients see it (its memories and nodes projected)."""
    return _recall(result).model_dump(mode="json", exclude=RECALL_EXCLUDE)


def recall_json(result: RecallResult) -> str:
    """:func:`recall_view` as JSON text, serialised by pydantic-core in one pass."""
    return _recall(result).model_dump_json(exclude=RECALL_EXCLUDE)


def _reflect(result: ReflectResult) -> ReflectResult:
    return result.model_copy(
        update={
            "memories": _recalled(result.memories),
            "opinions": [_to_the_second(o) for o in result.opinions],
        }
    )


def reflect_view(result: ReflectResult) -> dict[str, Any]:
    """A reflect answer as clients see it (the memories it was shown and its opinions projected)."""
    return _reflect(result).model_dump(mode="json", exclude=REFLECT_EXCLUDE)


def reflect_json(result: ReflectResult) -> str:
    """:func:`reflect_view` as JSON text."""
    return _reflect(result).model_dump_json(exclude=REFLECT_EXCLUDE)


def record_view(record: BaseModel) -> dict[str, Any]:
    """A bank, mental model or directive as clients see it (all its fields)."""
    return record.model_dump(mode="json")


def memories_page_view(page: tuple[list[MemoryUnit], int], offset: int, limit: int) -> dict[str, Any]:
    """A page of a bank's memories with the total that match its filters."""
    units, total = page
    return {"items": [unit_view(u) for u in units], "total": total, "offset": offset, "limit": limit}


def documents_view(counts: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """A bank's documents with their unit and chunk counts."""
    return [{"document_id": d, **c} for d, c in counts.items()]


def entity_detail_view(out: dict[str, Any]) -> dict[str, Any]:
    """An entity, the memories that name it (``total`` counts all) and its neighbours."""
    return {
        "entity": entity_view(out["entity"]),
        "memories": [unit_view(u) for u in out["memories"]],
        "total": out["total"],
        "neighbours": [
            {"entity": entity_view(n["entity"]), "shared": n["shared"]} for n in out["neighbours"]
        ],
    }


def timeline_view(sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A bank's sessions over time, their bounds as ISO 8601 text."""
    return [{**s, "start": s["start"].isoformat(), "end": s["end"].isoformat()} for s in sessions]
