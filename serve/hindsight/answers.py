"""The catalogue's answers (the REST API's JSON, memlane/views.py) as hindsight-client 1.1.0's
response models read them: the outbound half of the surface's one translation (the inbound
half is serve/hindsight/requests.py).

The client's models are strict (string ids, integer counts, string metadata values, ISO
strings for times, a dict keyed by name for entities); each function here answers one of them
with the fields Memlane has, and leaves out what it does not know rather than invent it.
"""

from __future__ import annotations

import uuid
from typing import Any

from serve.hindsight.bank_ids import to_hindsight

API_VERSION = "1.1.0"  # the Hindsight API whose paths and shapes this surface speaks
_OP_PREFIX = "op-"
# Memlane's operation states in Hindsight's names (OperationStatusResponse's enum).
OP_STATUS = {"queued": "pending", "running": "processing", "succeeded": "completed", "failed": "failed"}


# operation ids: Hindsight's are UUIDs, Memlane's "op-" and a UUID's hex -----------------------
def memlane_operation(operation_id: str) -> str | None:
    """Memlane's id of a Hindsight operation id (a UUID), or None when it is no UUID."""
    try:
        return _OP_PREFIX + uuid.UUID(operation_id).hex
    except ValueError:
        return None


def hindsight_operation(memlane_id: str) -> str:
    """The Hindsight id (a UUID) of a Memlane operation id."""
    return str(uuid.UUID(memlane_id.removeprefix(_OP_PREFIX)))


def operation(op: dict[str, Any] | None, operation_id: str) -> dict[str, Any]:
    """OperationStatusResponse; ``op`` None: status not_found (an unknown id is no error)."""
    if op is None:
        return {"operation_id": operation_id, "status": "not_found"}
    status = OP_STATUS.get(op["status"], "failed")
    return {
        "operation_id": operation_id,
        "id": operation_id,
        "status": status,
        "operation_type": op.get("kind"),
        "task_type": op.get("kind"),
        "created_at": op.get("created_at"),
        "updated_at": op.get("updated_at"),
        "completed_at": op.get("updated_at") if status in ("completed", "failed") else None,
        "error_message": op.get("error"),
        "result_metadata": op.get("result") if isinstance(op.get("result"), dict) else None,
    }


def retained(bank_id: str, items: int, op: dict[str, Any] | None = None) -> dict[str, Any]:
    """RetainResponse: sync, or async with the operation's Hindsight id."""
    out: dict[str, Any] = {"success": True, "bank_id": bank_id, "items_count": items, "async": op is not None}
    if op is not None:
        out["operation_id"] = hindsight_operation(op["operation_id"])
    return out


# banks ----------------------------------------------------------------------------------------
def _disposition(bank: dict[str, Any]) -> dict[str, int]:
    d = bank.get("disposition") or {}
    return {k: int(d.get(k, 3)) for k in ("skepticism", "literalism", "empathy")}


def profile(bank_id: str, bank: dict[str, Any]) -> dict[str, Any]:
    """BankProfileResponse: the name (the id when the bank has none, as Hindsight names a new
    bank), the mission (Memlane's background) and the disposition."""
    mission = bank.get("background") or ""
    return {
        "bank_id": bank_id,
        "name": bank.get("name") or bank_id,
        "disposition": _disposition(bank),
        "mission": mission,
        "background": mission,
    }


def bank_list(banks: list[dict[str, Any]], q: str | None, limit: int, offset: int) -> dict[str, Any]:
    """BankListResponse over Memlane's banks that have a Hindsight id (most recently updated
    first; ``q``: in the id or name, any case)."""
    rows = []
    for bank in banks:
        bank_id = to_hindsight(bank["bank_id"])
        if bank_id is None:
            continue
        if q and q.casefold() not in f"{bank_id}\x00{bank.get('name') or ''}".casefold():
            continue
        mission = bank.get("background") or ""
        rows.append(
            {
                "bank_id": bank_id,
                "name": bank.get("name") or bank_id,
                "disposition": _disposition(bank),
                "mission": mission,
                "created_at": bank.get("created_at"),
                "updated_at": bank.get("updated_at"),
            }
        )
    rows.sort(key=lambda r: r["updated_at"] or "", reverse=True)
    return {"banks": rows[offset : offset + limit], "total": len(rows), "limit": limit, "offset": offset}


def bank_config(bank_id: str, bank: dict[str, Any]) -> dict[str, Any]:
    """BankConfigResponse: the settings Memlane keeps per bank, in Hindsight's names."""
    d = _disposition(bank)
    overrides: dict[str, Any] = {f"disposition_{k}": v for k, v in d.items() if v != 3}
    if bank.get("background"):
        overrides["reflect_mission"] = bank["background"]
    config = {
        "reflect_mission": bank.get("background") or None,
        **{f"disposition_{k}": v for k, v in d.items()},
    }
    return {"bank_id": bank_id, "config": config, "overrides": overrides}


def stats(bank_id: str, counts: dict[str, Any], documents: int) -> dict[str, Any]:
    """BankStatsResponse from the bank's counts. A synchronous retain is searchable when it is
    answered and Memlane's background work is no operation, so nothing is pending here."""
    graph = counts.get("graph") or {}
    return {
        "bank_id": bank_id,
        "total_nodes": int(counts.get("units", 0)),
        "total_links": int(graph.get("edges", 0)),
        "total_documents": documents,
        "nodes_by_fact_type": {},
        "links_by_link_type": {
            k: int(v) for k, v in graph.items() if k not in ("units", "entities", "edges")
        },
        "links_by_fact_type": {},
        "links_breakdown": {},
        "pending_operations": 0,
        "failed_operations": 0,
        "pending_consolidation": 0,
    }


# recall ---------------------------------------------------------------------------------------
def _result(unit: dict[str, Any], score: float, names: dict[str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": unit["id"],
        "text": unit["text"],
        "type": unit.get("fact_type"),
        "occurred_start": unit.get("occurred_start"),
        "occurred_end": unit.get("occurred_end"),
        "mentioned_at": unit.get("mentioned_at"),
        "document_id": unit.get("document_id") or None,
        "chunk_id": unit.get("chunk_id") or None,
        "tags": list(unit.get("tags") or ()),
        "scores": {"final": float(score)},
    }
    if names is not None:
        out["entities"] = [names[e] for e in unit.get("entity_ids") or () if e in names]
    return out


def _node_result(node: dict[str, Any], score: float) -> dict[str, Any]:
    """A temporal-tree summary (memlane/tree) as an observation: consolidated knowledge."""
    return {
        "id": node["id"],
        "text": node["text"],
        "type": "observation",
        "occurred_start": node.get("start"),
        "occurred_end": node.get("end"),
        "scores": {"final": float(score)},
    }


def recall(
    view: dict[str, Any],
    *,
    names: dict[str, str] | None = None,
    entity_tokens: int = 0,
    with_nodes: bool = True,
    trace: bool = False,
) -> dict[str, Any]:
    """RecallResponse from a recall's REST answer: memories and (``with_nodes``) the tree's
    summaries in recall's one ranking; with entity ``names`` (``{entity_id: name}``), each
    result's entity names and the entities map, whose observations are the recalled memories
    that name the entity, best first, within ``entity_tokens``."""
    memories = view.get("memories") or []
    nodes = {n["rank"]: n for n in (view.get("nodes") or []) if with_nodes}
    results: list[dict[str, Any]] = []
    mems = iter(memories)
    for rank in range(len(memories) + len(nodes)):
        node = nodes.get(rank)
        if node is not None:
            results.append(_node_result(node["node"], node.get("score", 0.0)))
        else:
            m = next(mems)
            results.append(_result(m["unit"], m.get("score", 0.0), names))
    out: dict[str, Any] = {"results": results}
    if names is not None:
        out["entities"] = _entities(memories, names, entity_tokens)
    if view.get("chunks"):
        out["chunks"] = {
            c["chunk_id"]: {
                "id": c["chunk_id"],
                "text": c["text"],
                "chunk_index": int(c["index"]),
                "truncated": False,
            }
            for c in view["chunks"]
        }
    if trace:
        out["trace"] = {
            "timings_ms": view.get("timings_ms") or {},
            "plan": view.get("plan"),
            "subqueries": view.get("subqueries") or [],
            "memories": {m["unit"]["id"]: m.get("trace") for m in memories if m.get("trace")},
        }
    return out


def _entities(memories: list[dict[str, Any]], names: dict[str, str], budget: int) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    spent = 0
    for m in memories:
        unit = m["unit"]
        for eid in unit.get("entity_ids") or ():
            if eid not in names:
                continue
            entry = out.setdefault(
                names[eid], {"entity_id": eid, "canonical_name": names[eid], "observations": []}
            )
            cost = int(m.get("tokens", 0))
            if spent + cost <= budget:
                entry["observations"].append({"text": unit["text"], "mentioned_at": unit.get("mentioned_at")})
                spent += cost
    return out


# reflect --------------------------------------------------------------------------------------
def reflect(view: dict[str, Any], *, facts: bool = False, tool_calls: bool = False) -> dict[str, Any]:
    """ReflectResponse from a reflect's REST answer: the answer as ``text``, the structured
    output; with ``facts`` the memories it was shown (``based_on``), with ``tool_calls`` its
    recall and model call as a trace."""
    out: dict[str, Any] = {
        "text": view["answer"],
        "structured_output": view.get("structured_output"),
        "structured_output_error": view.get("structured_output_error"),
    }
    if facts:
        out["based_on"] = {
            "memories": [
                {
                    "id": m["unit"]["id"],
                    "text": m["unit"]["text"],
                    "type": m["unit"].get("fact_type"),
                    "occurred_start": m["unit"].get("occurred_start"),
                    "occurred_end": m["unit"].get("occurred_end"),
                    "mentioned_at": m["unit"].get("mentioned_at"),
                    "document_id": m["unit"].get("document_id") or None,
                    "chunk_id": m["unit"].get("chunk_id") or None,
                    "tags": list(m["unit"].get("tags") or ()),
                }
                for m in view.get("memories") or []
            ],
            "mental_models": [],
            "directives": [],
        }
    if tool_calls:
        t = view.get("timings_ms") or {}
        out["trace"] = {
            "tool_calls": [
                {
                    "tool": "recall",
                    "input": {},
                    "output": None,
                    "duration_ms": int(t.get("recall", 0)),
                    "iteration": 1,
                }
            ],
            "llm_calls": [{"scope": "reflect", "duration_ms": int(t.get("llm", 0))}],
        }
    return out


# documents ------------------------------------------------------------------------------------
def document_list(
    bank_id: str, total: int, page: list[dict[str, Any]], q: str | None, limit: int, offset: int
) -> dict[str, Any]:
    """ListDocumentsResponse: ``page`` holds the listed documents as the store gives one
    (get_document), ``total`` how many the listing found (``q`` was applied by the listing,
    which matches ids and text)."""
    items = [_document_fields(bank_id, d) for d in page]
    if q:
        for item in items:
            item["matched_fields"] = ["id"] if q.casefold() in item["id"].casefold() else ["original_text"]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


def _document_fields(bank_id: str, doc: dict[str, Any]) -> dict[str, Any]:
    """What a document's listing row and the document itself both say of it: created_at and
    updated_at are when its first and last chunk start (Memlane keeps when things were said,
    not when they were sent); text_length is its text's length in characters, the text the
    document itself answers (its chunks' text, as retained)."""
    return {
        "id": doc["document_id"],
        "bank_id": bank_id,
        "content_hash": None,
        "created_at": doc.get("start") or "",
        "updated_at": doc.get("end") or "",
        "text_length": len(doc.get("text") or ""),
        "memory_unit_count": int(doc.get("units", 0)),
        "tags": list(doc.get("tags") or ()),
    }


def document(bank_id: str, doc: dict[str, Any]) -> dict[str, Any]:
    """DocumentResponse: the text as retained, with the fields of its listing row."""
    fields = _document_fields(bank_id, doc)
    del fields["text_length"]  # not a field of DocumentResponse
    return {**fields, "original_text": doc["text"]}


def document_deleted(document_id: str, counts: dict[str, Any]) -> dict[str, Any]:
    units = int(counts.get("units", 0))
    return {
        "success": True,
        "message": f"Document '{document_id}' deleted",
        "document_id": document_id,
        "memory_units_deleted": units,
    }


# mental models (the MCP tools) ----------------------------------------------------------------
def mental_model(bank_id: str, model: dict[str, Any]) -> dict[str, Any]:
    """A curated mental model (memlane/curated) in Hindsight's names: its question is the
    ``source_query``, its answer the ``content``."""
    return {
        "id": model["id"],
        "bank_id": bank_id,
        "name": model["id"],
        "source_query": model["question"],
        "content": model.get("answer", ""),
        "created_at": model.get("created_at"),
        "last_refreshed_at": model.get("refreshed_at"),
    }


def version(features: dict[str, bool]) -> dict[str, Any]:
    """VersionResponse: the API version spoken, and the features as Memlane offers them."""
    names = (
        "observations",
        "mcp",
        "worker",
        "bank_config_api",
        "bank_llm_health",
        "file_upload_api",
        "document_export_api",
        "document_import_api",
        "audit_log",
        "llm_trace",
        "store_document_text",
    )
    return {"api_version": API_VERSION, "features": {n: bool(features.get(n, False)) for n in names}}
