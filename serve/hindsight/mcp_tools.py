"""The tools of the Hindsight-compatible MCP servers (serve/hindsight/mcp.py), as Hindsight's
server names them (``hindsight_api/mcp_tools.py``, 1.1.0): one definition each, with the
multi-bank signature; each runs the surface's operation (serve/hindsight/surface.py), so it
answers what the HTTP route answers. Errors are tool errors whose text starts with the code.
"""

# No ``from __future__ import annotations``: the tools' signatures are rebuilt for the two
# servers (serve/hindsight/mcp.py:_register) and the SDK reads their annotations as objects.
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any
from urllib.parse import unquote

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from serve.auth import Principal
from serve.errors import APIError
from serve.hindsight.requests import BankBody, HindsightTagsMatch, RecallBody, ReflectBody, RetainBody
from serve.hindsight.surface import Surface, memlane_bank

# Every tool of Hindsight 1.1.0's MCP server (mcp_tools.py's _ALL_TOOLS).
HINDSIGHT_TOOLS = frozenset(
    {
        "retain", "sync_retain", "recall", "reflect", "list_banks", "create_bank", "get_bank",
        "get_bank_stats", "update_bank", "delete_bank", "clear_memories", "list_memories",
        "get_memory", "update_memory", "invalidate_memory", "list_documents", "get_document",
        "delete_document", "list_operations", "get_operation", "cancel_operation", "list_tags",
        "list_mental_models", "get_mental_model", "create_mental_model", "update_mental_model",
        "delete_mental_model", "refresh_mental_model", "clear_mental_model", "list_directives",
        "create_directive", "delete_directive", "get_knowledge_base_tree", "search_knowledge_base",
        "get_knowledge_page", "create_knowledge_folder", "create_knowledge_page",
        "update_knowledge_node", "delete_knowledge_node",
    }
)  # fmt: skip
MULTI_BANK_ONLY = frozenset({"list_banks", "create_bank"})
PATH_BANK = "x-memlane-hindsight-path-bank"  # set by the endpoint from /hindsight/mcp/{bank_id}/
DEFAULT_BANK = "default"  # Hindsight's session bank when none is named

Resolver = Callable[[Mapping[str, str] | None], tuple[Surface, Principal]]
BankArg = Annotated[str | None, Field(description="The bank (default: the session's bank).")]
Tags = Annotated[list[str] | None, Field(description="Tags (see tags_match).")]


def _failure(exc: APIError) -> ToolError:
    return ToolError(f"{exc.code}: {exc.message}")


def _session(ctx: Context, bank_id: str | None) -> tuple[Surface, str]:
    """The surface for this call's key, and the bank it works on (checked against the key)."""
    resolve: Resolver = ctx.request_context.lifespan_context
    headers = ctx.headers or {}
    surface, who = resolve(headers)
    path_bank = headers.get(PATH_BANK)
    bank = unquote(path_bank) if path_bank else bank_id or headers.get("x-bank-id") or DEFAULT_BANK
    try:
        who.check(memlane_bank(bank))
    except APIError as exc:
        raise _failure(exc) from None
    return surface, bank


async def _run(coro: Any) -> Any:
    try:
        return await coro
    except APIError as exc:
        raise _failure(exc) from None


def _slug(name: str) -> str:
    """A mental model id (memlane.records.CURATED_ID_PATTERN) from a Hindsight model's name."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:64]
    return slug or "model"


# The tools: one definition each, with the multi-bank signature (serve as both servers' tool).
async def retain(
    ctx: Context,
    content: str,
    context: str = "general",
    timestamp: str | None = None,
    tags: Tags = None,
    metadata: dict[str, str] | None = None,
    document_id: str | None = None,
    bank_id: BankArg = None,
    strategy: str | None = None,
    update_mode: str | None = None,
) -> dict[str, Any]:
    """Store information in long-term memory, in the background: answers at once with the
    operation id (see sync_retain to wait)."""
    surface, bank = _session(ctx, bank_id)
    item = {"content": content, "timestamp": timestamp, "tags": tags, "document_id": document_id}
    out = await _run(surface.retain(bank, RetainBody.model_validate({"items": [item], "async": True})))
    return {"status": "accepted", "message": "Memory storage initiated", "operation_id": out["operation_id"]}


async def sync_retain(
    ctx: Context,
    content: str,
    context: str = "general",
    timestamp: str | None = None,
    tags: Tags = None,
    metadata: dict[str, str] | None = None,
    document_id: str | None = None,
    bank_id: BankArg = None,
    strategy: str | None = None,
) -> dict[str, Any]:
    """Store information in long-term memory and wait until it can be recalled."""
    surface, bank = _session(ctx, bank_id)
    item = {"content": content, "timestamp": timestamp, "tags": tags, "document_id": document_id}
    await _run(surface.retain(bank, RetainBody.model_validate({"items": [item]})))
    return {"status": "completed", "message": "Memory stored successfully"}


async def recall(
    ctx: Context,
    query: str,
    max_tokens: int = 4096,
    budget: str = "high",
    types: list[str] | None = None,
    prefer_observations: bool | None = None,
    tags: Tags = None,
    tags_match: HindsightTagsMatch = "any",
    tag_groups: list[dict[str, Any]] | None = None,
    query_timestamp: str | None = None,
    min_scores: dict[str, Any] | None = None,
    temporal_window: dict[str, Any] | None = None,
    include_chunks: bool = False,
    max_chunk_tokens: int = 8192,
    include_entities: bool = False,
    max_entity_tokens: int = 500,
    include_source_facts: bool = False,
    max_source_facts_tokens: int = 4096,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Search long-term memory for what a question needs, best first, within max_tokens."""
    surface, bank = _session(ctx, bank_id)
    body = RecallBody.model_validate(
        {
            "query": query,
            "max_tokens": max_tokens,
            "budget": budget if budget in ("low", "mid", "high") else "high",  # as Hindsight's MCP
            "types": types,
            "tags": tags,
            "tags_match": tags_match,
            "tag_groups": tag_groups,
            "query_timestamp": query_timestamp,
            "min_scores": min_scores,
            "include": {
                "entities": {"max_tokens": max_entity_tokens} if include_entities else None,
                "chunks": {"max_tokens": max_chunk_tokens} if include_chunks else None,
            },
        }
    )
    out = await _run(surface.recall(bank, body))
    for r in out["results"]:  # Hindsight's MCP answers its engine's facts: fact_type, not type
        r["fact_type"] = r.pop("type", None)
    return out


async def reflect(
    ctx: Context,
    query: str,
    context: str | None = None,
    budget: str = "low",
    max_tokens: int = 4096,
    response_schema: dict[str, Any] | None = None,
    tags: Tags = None,
    tags_match: HindsightTagsMatch = "any",
    apply_all_directives: bool = False,
    include_based_on: bool = False,
    include_trace: bool = False,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Answer a question from long-term memory in the bank's own voice (needs an LLM)."""
    surface, bank = _session(ctx, bank_id)
    body = ReflectBody.model_validate(
        {
            "query": query,
            "context": context,
            "budget": budget if budget in ("low", "mid", "high") else "low",  # as Hindsight's MCP
            "max_tokens": max_tokens,
            "response_schema": response_schema,
            "tags": tags,
            "tags_match": tags_match,
            "include": {
                "facts": {} if include_based_on else None,
                "tool_calls": {} if include_trace else None,
            },
        }
    )
    return await _run(surface.reflect(bank, body))


async def list_banks(
    ctx: Context,
    query: str | None = None,
    limit: Annotated[int, Field(ge=0)] = 100,
    offset: Annotated[int, Field(ge=0)] = 0,
) -> dict[str, Any]:
    """List the memory banks this key may use, most recently updated first."""
    resolve: Resolver = ctx.request_context.lifespan_context
    surface, who = resolve(ctx.headers)
    return await _run(surface.list_banks(who.can_use, query, limit, offset))


async def create_bank(
    ctx: Context, bank_id: str, name: str | None = None, mission: str | None = None
) -> dict[str, Any]:
    """Create a memory bank, or update the name or mission of an existing one."""
    surface, bank = _session(ctx, bank_id)
    return await _run(surface.put_bank(bank, BankBody(name=name, mission=mission)))


async def list_documents(
    ctx: Context,
    q: str | None = None,
    limit: Annotated[int, Field(ge=0)] = 100,
    offset: Annotated[int, Field(ge=0)] = 0,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """List the bank's documents (q: in the id or the text)."""
    surface, bank = _session(ctx, bank_id)
    return await _run(surface.documents(bank, q, limit, offset))


async def get_document(ctx: Context, document_id: str, bank_id: BankArg = None) -> dict[str, Any]:
    """A document with its text as retained."""
    surface, bank = _session(ctx, bank_id)
    return await _run(surface.document(bank, document_id))


async def delete_document(ctx: Context, document_id: str, bank_id: BankArg = None) -> dict[str, Any]:
    """Delete a document with the memories formed from it."""
    surface, bank = _session(ctx, bank_id)
    out = await _run(surface.delete_document(bank, document_id))
    return {
        "status": "deleted",
        "document_id": document_id,
        "memory_units_deleted": out["memory_units_deleted"],
    }


async def list_mental_models(
    ctx: Context,
    tags: Tags = None,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Annotated[int, Field(ge=0)] = 0,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """List the bank's mental models (pinned questions with a consolidated answer)."""
    surface, bank = _session(ctx, bank_id)
    out = await _run(surface.mental_model(bank, "list_mental_models"))
    return {"items": out["items"][offset : offset + limit]}


async def get_mental_model(
    ctx: Context, mental_model_id: str, detail: str = "full", bank_id: BankArg = None
) -> dict[str, Any]:
    """A mental model with its content."""
    surface, bank = _session(ctx, bank_id)
    return await _run(surface.mental_model(bank, "get_mental_model", mental_model_id))


async def create_mental_model(
    ctx: Context,
    name: str,
    source_query: str,
    mental_model_id: str | None = None,
    tags: Tags = None,
    max_tokens: Annotated[int, Field(ge=256, le=8192)] = 2048,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Pin a question on the bank and answer it from its memories now (the id: mental_model_id,
    else the name as a slug)."""
    surface, bank = _session(ctx, bank_id)
    model = await _run(surface.put_mental_model(bank, mental_model_id or _slug(name), source_query))
    return {"mental_model_id": model["id"], **model}


async def refresh_mental_model(ctx: Context, mental_model_id: str, bank_id: BankArg = None) -> dict[str, Any]:
    """Answer a mental model's question again from the bank's memories."""
    surface, bank = _session(ctx, bank_id)
    return await _run(surface.mental_model(bank, "refresh_mental_model", mental_model_id))


async def delete_mental_model(ctx: Context, mental_model_id: str, bank_id: BankArg = None) -> dict[str, Any]:
    """Delete a mental model."""
    surface, bank = _session(ctx, bank_id)
    return await _run(surface.mental_model(bank, "delete_mental_model", mental_model_id))


TOOLS: tuple[Callable[..., Any], ...] = (
    retain, sync_retain, recall, reflect, list_banks, create_bank, list_documents, get_document,
    delete_document, list_mental_models, get_mental_model, create_mental_model,
    refresh_mental_model, delete_mental_model,
)  # fmt: skip
READ_ONLY = frozenset({"recall", "reflect", "list_banks", "list_documents", "get_document"})
