"""The MCP server: Memlane's tools for agents, defined once over a narrow backend interface.

Three backends answer the same tools (``serve/mcp_backends.py``: the embedded engine and the
HTTP SDK client, for ``memlane mcp`` over stdio; ``serve/mcp_http.py``: the Serve deployments,
for the Streamable HTTP endpoint ``/mcp`` of the ingress). A backend speaks the REST API's JSON
shapes, so the tools format one shape whatever answers.

Tools: ``retain``, ``recall``, ``reflect``, ``list_banks``, ``create_bank``,
``delete_document``, ``get_tree``. Their parameters carry the REST API's bounds (``serve/schemas.py``,
``memlane/records/``), so a bad argument is refused by the SDK's schema validation before any
backend is called. Failures the model can act on (unknown bank, forbidden bank, bad argument,
no LLM for reflect) are tool errors: an ``isError`` result whose text starts with a code,
e.g. ``bank_not_found: unknown bank 'alice'``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from memlane.records import BANK_ID_PATTERN, LEVEL_NAMES, FactType, TagsMatch, utc

# Non-blank: at least one non-space character (JSON Schema patterns are unanchored searches).
_NOT_BLANK = r"\S"


class ToolFailure(ToolError):
    """A failure the model can read and act on; the tool call returns ``isError`` with
    ``code: message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class MemoryBackend(Protocol):
    """What the tools need: one call per operation of the catalogue (memlane/catalogue.py).
    Each backend raises :class:`ToolFailure` for an error the caller caused (see
    :func:`failure_for`)."""

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        """Run operation ``name`` with the SDK's parameter names; its answer in the REST API's
        JSON (``put_bank``: ``{"bank": {...}, "created": bool}``)."""
        ...


# Resolves the backend serving one tool call from the request's headers (None on stdio): the
# HTTP endpoint authenticates the caller's key here, stdio returns its one backend.
BackendResolver = Callable[[Mapping[str, str] | None], MemoryBackend]


def failure_for(exc: BaseException) -> ToolFailure | None:
    """The tool error for an engine error (raised here, or in a Serve replica and re-raised
    by Ray) or an HTTP API error of the SDK client; None for anything else (a crash, which
    the SDK reports without its text)."""
    from memlane.errors import ConfigError, InvalidInput, LLMNotConfigured, NotFound
    from memlane.llm.errors import LLMError, LLMOutputError

    cause = getattr(exc, "cause", None)  # a RayTaskError carries the replica's exception
    if isinstance(cause, BaseException):
        exc = cause
    if isinstance(exc, ToolFailure):
        return exc
    if isinstance(exc, NotFound):
        return ToolFailure("bank_not_found" if exc.field == "bank_id" else "not_found", _first_line(exc))
    if isinstance(exc, LLMNotConfigured):
        return ToolFailure("llm_not_configured", _first_line(exc))
    if isinstance(exc, LLMOutputError):
        return ToolFailure("llm_bad_output", _first_line(exc))
    if isinstance(exc, LLMError):
        return ToolFailure("llm_unavailable", _first_line(exc))
    if isinstance(exc, ConfigError):
        return ToolFailure("not_configured", _first_line(exc))
    if isinstance(exc, InvalidInput):
        return ToolFailure("invalid_argument", _first_line(exc))
    status, code = getattr(exc, "status", None), getattr(exc, "code", None)
    if isinstance(status, int) and isinstance(code, str):  # memlane_client.MemlaneAPIError
        mapped = {422: "invalid_argument", 400: "invalid_argument", 403: "forbidden"}.get(status, code)
        return ToolFailure(mapped, getattr(exc, "message", "") or str(exc))
    return None


def _first_line(exc: BaseException) -> str:
    # A re-raised Ray error carries the remote traceback in str(); args[0] is the message.
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


# Parameters: one definition each, with the REST API's bounds. -------------------------------
BankArg = Annotated[
    str | None,
    Field(
        pattern=BANK_ID_PATTERN,
        description="Bank id (1-128 letters, digits, '_', '.', '-'). Omit to use the server's "
        "default bank (`memlane mcp --bank`).",
    ),
]
Query = Annotated[str, Field(min_length=1, pattern=_NOT_BLANK, description="The question.")]
MaxTokens = Annotated[
    int, Field(gt=0, le=1_000_000, description="Token budget of the memories returned (or shown to the LLM).")
]
BudgetArg = Annotated[
    Literal["low", "mid", "high"],
    Field(description="How deep each recall channel searches: 100, 300 or 1000 candidates."),
]
TagList = Annotated[
    list[Annotated[str, Field(min_length=1, pattern=_NOT_BLANK)]] | None,
    Field(description="Only memories with these tags (see tags_match)."),
]
DocumentId = Annotated[str, Field(min_length=1, max_length=256, description="Document id.")]


def _bank(ctx_bank: str | None, default_bank: str | None) -> str:
    if ctx_bank:
        return ctx_bank
    if default_bank:
        return default_bank
    raise ToolFailure(
        "invalid_argument",
        "bank: no bank given and this server has no default bank (start it with --bank, or pass bank)",
    )


async def _call(coro) -> Any:
    """Await a backend call; errors the caller caused become tool errors."""
    try:
        return await coro
    except ToolError:
        raise
    except Exception as exc:  # noqa: BLE001 - mapped, or re-raised as a crash
        failure = failure_for(exc)
        if failure is None:
            raise
        raise failure from None


def _memory_row(m: dict[str, Any]) -> dict[str, Any]:
    unit = m["unit"]
    return {
        "id": unit["id"],
        "text": unit["text"],
        "type": unit.get("fact_type"),
        "score": round(float(m.get("score", 0.0)), 4),
        "when": unit.get("occurred_start") or unit.get("mentioned_at"),
        "document_id": unit.get("document_id"),
        # Engram: a fact a newer one replaced, and the one it replaced (memlane/facts)
        **{
            k: v
            for k, v in (
                ("superseded_by", unit.get("superseded_by")),
                ("invalid_at", unit.get("invalid_at")),
                ("supersedes", ((unit.get("metadata") or {}).get("engram") or {}).get("supersedes")),
            )
            if v
        },
    }


def _node_row(n: dict[str, Any]) -> dict[str, Any]:
    node = n["node"]
    return {
        "id": node["id"],
        "level": LEVEL_NAMES.get(node["level"], node["level"]),
        "start": node["start"],
        "end": node["end"],
        "text": node["text"],
        "score": round(float(n.get("score", 0.0)), 4),
    }


class _StrictServer(MCPServer):
    """The SDK's server, refusing an argument a tool does not take instead of dropping it: a
    client that called ``recall`` with ``bank_id`` for ``bank`` was answered from the default
    bank. The refusal names the argument and the tool's parameters."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            takes = set(tool.parameters.get("properties", {}))
            unknown = sorted(set(arguments or {}) - takes)
            if unknown:
                raise ToolFailure(
                    "invalid_argument",
                    f"{unknown[0]}: not a parameter of {name} (it takes {', '.join(sorted(takes))})",
                )
        return await super().call_tool(name, arguments, context)


def strict_parameters(server: MCPServer) -> None:
    """Each tool's schema says what :class:`_StrictServer` enforces: no other argument."""
    for tool in server._tool_manager.list_tools():
        tool.parameters["additionalProperties"] = False


def build_mcp_server(
    lifespan: Callable[[MCPServer], AbstractAsyncContextManager[BackendResolver]],
    *,
    default_bank: str | None = None,
) -> MCPServer:
    """The MCP server with Memlane's tools. ``lifespan`` opens whatever the backends need when
    the server starts (the engine, an HTTP client) and yields the resolver of each call's
    backend; ``default_bank`` answers tools whose ``bank`` is omitted."""
    # The SDK's constructor calls logging.basicConfig with a Rich handler: where the root logger
    # has no handler yet (a Serve replica) that would take over the process's log format.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server: MCPServer = _StrictServer(
        "memlane",
        title="Memlane",
        instructions=(
            "Long-term memory in banks (one per user or agent). `retain` stores what was said, "
            "`recall` finds what a question needs within a token budget, `reflect` answers in the "
            "bank's own voice (needs an LLM on the server). Create a bank with `create_bank` "
            "before retaining into it."
        ),
        lifespan=lifespan,
    )
    root.handlers[:], root.level = handlers, level

    def backend(ctx: Context) -> MemoryBackend:
        resolve: BackendResolver = ctx.request_context.lifespan_context
        return resolve(ctx.headers)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def list_banks(ctx: Context) -> dict[str, Any]:
        """List the memory banks this caller may use, with their names."""
        banks = await _call(backend(ctx).call("list_banks", None, {}))
        return {
            "banks": [{"bank_id": b["bank_id"], "name": b.get("name", "")} for b in banks],
            "default_bank": default_bank,
        }

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    async def create_bank(
        ctx: Context,
        bank: Annotated[
            str, Field(pattern=BANK_ID_PATTERN, description="Bank id (1-128 letters, digits, '_', '.', '-').")
        ],
        name: Annotated[
            str | None,
            Field(
                max_length=256,
                description="The bank owner's name: turns spoken by this name become the bank's own "
                "experiences. Omit to leave it as it is.",
            ),
        ] = None,
        background: Annotated[
            str | None,
            Field(max_length=60_000, description="First-person background reflect speaks from."),
        ] = None,
    ) -> dict[str, Any]:
        """Create a memory bank, or update the name or background of an existing one."""
        fields = {k: v for k, v in {"name": name, "background": background}.items() if v is not None}
        out = await _call(backend(ctx).call("put_bank", bank, fields))
        bank_row = out["bank"]
        return {
            "bank_id": bank_row["bank_id"],
            "name": bank_row.get("name", ""),
            "created": out["created"],
        }

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    async def retain(
        ctx: Context,
        content: Annotated[
            str,
            Field(
                min_length=1,
                max_length=60_000,
                pattern=_NOT_BLANK,
                description="What was said or learnt: one chat turn or any text.",
            ),
        ],
        bank: BankArg = None,
        speaker: Annotated[
            str, Field(min_length=1, max_length=256, description="Who said it (default: user).")
        ] = "user",
        timestamp: Annotated[
            datetime | None, Field(description="When it was said (ISO 8601; default: now).")
        ] = None,
        document_id: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=256,
                description="Document (conversation) id. Retaining a document again replaces what it "
                "held; omit to derive one from the content (retrying changes nothing).",
            ),
        ] = None,
        session_id: Annotated[
            str | None, Field(min_length=1, max_length=256, description="Session within the document.")
        ] = None,
        tags: Annotated[
            list[Annotated[str, Field(min_length=1, pattern=_NOT_BLANK)]],
            Field(description="Tags on every memory formed."),
        ] = [],  # noqa: B006 - pydantic copies defaults; the schema shows []
    ) -> dict[str, Any]:
        """Store something in a bank's memory (the bank must exist: see create_bank)."""
        bank_id = _bank(bank, default_bank)
        item: dict[str, Any] = {"content": content, "speaker": speaker}
        if timestamp is not None:
            item["timestamp"] = timestamp.isoformat()
        if session_id is not None:
            item["session_id"] = session_id
        body = {"items": [item], "document_id": document_id, "tags": list(tags)}
        try:
            report = await _call(backend(ctx).call("retain", bank_id, body))
        except ToolFailure as exc:
            if exc.code != "bank_not_found":
                raise
            raise ToolFailure(exc.code, f"{exc.message}; create it with the create_bank tool") from None
        keep = ("bank_id", "turns", "units", "chunks", "entities", "links")
        return {k: report[k] for k in keep if k in report}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def recall(
        ctx: Context,
        query: Query,
        bank: BankArg = None,
        max_tokens: MaxTokens = 1024,
        budget: BudgetArg = "mid",
        types: Annotated[
            list[FactType] | None,
            Field(description="Only these memory types: world, experience, opinion, observation."),
        ] = None,
        tags: TagList = None,
        tags_match: Annotated[
            TagsMatch,
            Field(
                description="A memory needs any or all of the tags; '..._or_untagged' also takes "
                "memories without tags, 'exact' exactly these tags."
            ),
        ] = "any",
        as_of: Annotated[
            datetime | None, Field(description="Only what was known and still valid at this time.")
        ] = None,
        reference_time: Annotated[
            datetime | None,
            Field(description="'Now' for relative times in the query ('last week'); filters nothing."),
        ] = None,
        include_chunks: Annotated[
            bool, Field(description="Also return the conversation chunks the memories came from.")
        ] = False,
        include_history: Annotated[
            bool | None,
            Field(
                description="Superseded facts (a value that changed): true returns them after their "
                "successors, false hides them, unset decides from the question ('before', 'used to')."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Recall the memories a question needs from a bank, best first, within a token budget."""
        bank_id = _bank(bank, default_bank)
        request: dict[str, Any] = {
            "query": query,
            "max_tokens": max_tokens,
            "budget": budget,
            "tags_match": tags_match,
            "include_chunks": include_chunks,
        }
        if types:
            request["types"] = [t.value for t in types]
        if tags:
            request["tags"] = list(tags)
        if include_history is not None:
            request["include_history"] = include_history
        for key, value in (("as_of", as_of), ("reference_time", reference_time)):
            if value is not None:
                request[key] = value.isoformat()
        result = await _call(backend(ctx).call("recall", bank_id, request))
        out: dict[str, Any] = {
            "memories": [_memory_row(m) for m in result.get("memories", [])],
            "tokens": result.get("tokens", 0),
            # The evidence does not support an answer (memlane/recall/abstain.py); the
            # memories are still listed.
            "abstain": result.get("abstain", False),
            "abstain_reason": result.get("abstain_reason"),
        }
        # The temporal tree's summaries recall chose (a node can stand in for the memories it
        # quotes, so without them an answer could come back empty)
        out["nodes"] = [_node_row(n) for n in result.get("nodes", [])]
        if include_chunks:
            out["chunks"] = [
                {"document_id": c.get("document_id"), "session_id": c.get("session_id"), "text": c["text"]}
                for c in result.get("chunks", [])
            ]
        return out

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def reflect(
        ctx: Context,
        query: Query,
        bank: BankArg = None,
        max_tokens: MaxTokens = 4096,
        budget: BudgetArg = "mid",
        answer_max_tokens: Annotated[
            int, Field(gt=0, le=32_768, description="Upper bound of the answer's length in tokens.")
        ] = 1024,
        form_opinions: Annotated[
            bool, Field(description="Store the opinions the answer forms in the bank.")
        ] = True,
    ) -> dict[str, Any]:
        """Answer a question in the bank's own voice from its memories, citing the memories used
        (needs an LLM configured on the server: MEMLANE_LLM__BASE_URL)."""
        bank_id = _bank(bank, default_bank)
        request = {
            "query": query,
            "max_tokens": max_tokens,
            "budget": budget,
            "answer_max_tokens": answer_max_tokens,
            "form_opinions": form_opinions,
        }
        result = await _call(backend(ctx).call("reflect", bank_id, request))
        return {
            "answer": result["answer"],
            "memory_ids": result.get("memory_ids", []),
            "opinions": [o["text"] for o in result.get("opinions", [])],
            "abstain": result.get("abstain", False),  # recall abstained: the bank does not know
        }

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def delete_document(ctx: Context, document_id: DocumentId, bank: BankArg = None) -> dict[str, Any]:
        """Delete one document of a bank with its memories, chunks and links, and the entities
        only it named."""
        bank_id = _bank(bank, default_bank)
        counts = await _call(backend(ctx).call("delete_document", bank_id, {"document_id": document_id}))
        return {"bank_id": bank_id, "document_id": document_id, "deleted": counts}

    async def get_tree(
        ctx: Context,
        bank: BankArg = None,
        level: Annotated[
            Literal["session", "day", "week", "profile"] | None,
            Field(description="Only this level of the tree (default: every level)."),
        ] = None,
        from_: Annotated[
            datetime | None,
            Field(
                alias="from", description="Only nodes whose interval ends at or after this time (ISO 8601)."
            ),
        ] = None,
        to: Annotated[
            datetime | None,
            Field(description="Only nodes whose interval starts before this time (ISO 8601, exclusive)."),
        ] = None,
    ) -> dict[str, Any]:
        """Read a bank's temporal memory tree: its consolidated session, day and week summaries
        and its profile, each with the interval it covers, by level then start (empty until
        the bank was consolidated)."""
        bank_id = _bank(bank, default_bank)
        try:
            from_, to = (None if t is None else utc(t) for t in (from_, to))
        except OverflowError:
            raise ToolFailure("invalid_argument", "from, to: out of the range of UTC times") from None
        if from_ is not None and to is not None and to <= from_:
            raise ToolFailure("invalid_argument", "to: must be after from")
        nodes = await _call(
            backend(ctx).call("get_tree", bank_id, {"level": level, "since": from_, "until": to})
        )
        return {
            "bank_id": bank_id,
            "nodes": [
                {
                    "id": n["id"],
                    "level": n.get("level_name", n.get("level")),
                    "start": n["start"],
                    "end": n["end"],
                    "text": n["text"],
                    "children": len(n.get("children", [])),
                }
                for n in nodes
            ],
        }

    # The window's parameters are named as the REST API's query (`from`, `to`). `from` is a
    # Python keyword, so the function's parameter is `from_` with the alias `from` in the
    # schema; the SDK then calls with `from=` (by alias), which this wrapper renames.
    @functools.wraps(get_tree)
    async def get_tree_call(**kwargs: Any) -> dict[str, Any]:
        if "from" in kwargs:
            kwargs["from_"] = kwargs.pop("from")
        return await get_tree(**kwargs)

    server.tool(name="get_tree", annotations=ToolAnnotations(read_only_hint=True))(get_tree_call)
    strict_parameters(server)
    return server
