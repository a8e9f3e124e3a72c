"""The catalogue of Memlane's public operations: each declared once, with every surface's name.

An :class:`Operation` names the engine callable that does the work (a path on
:class:`~memlane.engine.Memory`, e.g. ``forget.delete_document``), how its result looks to
clients (a view of :mod:`memlane.views`), its parameters as the SDK and the engine name them
(and the HTTP name where HTTP's convention differs: the repeated query parameter ``tag``), its
HTTP route, its SDK method (both clients), its MCP tool and its CLI command, and the rules every
surface applies (whether a missing bank is created; the MCP tools' deliberate defaults).

:func:`call` runs an operation on an engine and answers the REST API's JSON: the Memory
deployment, the MCP tools' engine backend and the Serve backend all run operations through it,
so each rule is applied in one place. The REST routes (serve/ingress.py,
serve/curated_routes.py), the SDK (memlane_client) and the MCP tools (serve/mcp_server.py) are
written out for their frameworks and checked against this table by one test
(tests/serving/test_catalogue.py): a surface that lacks a declared operation, serves an
undeclared one, or names a parameter differently fails it. CONTRIBUTING.md shows how to add one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from memlane.errors import InvalidInput
from memlane.records import RecallRequest
from memlane.reflect.requests import ReflectRequest
from memlane.views import (
    documents_view,
    entity_detail_view,
    entity_view,
    memories_page_view,
    node_view,
    recall_view,
    record_view,
    reflect_view,
    timeline_view,
    unit_view,
)

if TYPE_CHECKING:
    from memlane.engine import Memory

View = Callable[[Any, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Param:
    """One parameter of an operation, named as the SDK and the engine name it."""

    name: str
    # the name on HTTP (and in the MCP tool) where HTTP's convention differs
    wire: str | None = None
    # False: the service's own (``wait``: answer at once with an operation), not the engine's
    engine: bool = True

    @property
    def http(self) -> str:
        return self.wire or self.name


@dataclass(frozen=True)
class Operation:
    """One public operation and its name on every surface (None: not on that surface)."""

    name: str
    summary: str
    # (method, path) of the REST route
    http: tuple[str, str] | None
    # the engine callable: an attribute path on Memory; None: the service's own (health)
    engine: str | None
    params: tuple[Param, ...] = ()
    # the request model whose fields are the parameters (recall, reflect)
    request: type[BaseModel] | None = None
    # the engine's answer as the REST API's JSON; None: the answer as it is
    view: View | None = None
    # the SDK method of both clients; "" (the default): the operation's name
    sdk: str | None = ""
    mcp: str | None = None
    cli: str | None = None
    # takes a bank id (first argument on every surface)
    bank: bool = True
    # engine keyword arguments every surface passes: the service's rules (retain needs a bank)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    # MCP parameter defaults that differ from the request model's, on purpose
    mcp_defaults: Mapping[str, Any] = field(default_factory=dict)
    # The Hindsight-compatible surface (serve/hindsight/, docs/hindsight.md): the routes under
    # /hindsight that run this operation, (method, path) as hindsight-client 1.1.0 calls them,
    # and the tools of its MCP server (/hindsight/mcp/). Their fields are translated at that
    # surface's edge (serve/hindsight/translate.py), its rules (a missing bank is created by
    # its writes) applied there.
    hindsight: tuple[tuple[str, str], ...] = ()
    hindsight_mcp: tuple[str, ...] = ()

    @property
    def sdk_method(self) -> str | None:
        return self.name if self.sdk == "" else self.sdk

    def param_names(self) -> set[str]:
        """Every parameter's SDK and engine name (the request model's fields for recall)."""
        if self.request is not None:
            return set(self.request.model_fields)
        return {p.name for p in self.params}


def _p(*names: str) -> tuple[Param, ...]:
    return tuple(Param(n) for n in names)


def _each(view: Callable[[Any], Any]) -> View:
    return lambda result, _: [view(r) for r in result]


def _one(view: Callable[[Any], Any]) -> View:
    return lambda result, _: view(result)


def _created(key: str) -> View:
    return lambda result, _: {key: record_view(result[0]), "created": result[1]}


def _report(result: Any, _: Mapping[str, Any]) -> Any:
    return result.as_dict()


RAW_BODY = "(body)"  # a parameter sent as the whole request body (an import's NDJSON)
WAIT = Param("wait", wire="async", engine=False)  # true on the SDK is "async": false on HTTP
BANK = "/v1/banks/{bank_id}"
HS_BANK = "/v1/default/banks/{bank_id}"  # a bank on the Hindsight-compatible surface

OPERATIONS: tuple[Operation, ...] = (
    # service
    Operation(
        "health",
        "Liveness and store reachability.",
        ("GET", "/v1/health"),
        None,
        bank=False,
        hindsight=(("GET", "/health"),),
    ),
    Operation(
        "version",
        "The API version and features of the Hindsight-compatible surface.",
        None,
        None,
        sdk=None,
        bank=False,
        hindsight=(("GET", "/version"),),
    ),
    Operation(
        "rerank",
        "The cross-encoder's scores of documents for a query.",
        ("POST", "/v1/rerank"),
        None,
        _p("query", "documents"),
        bank=False,
    ),
    # banks
    Operation(
        "list_banks",
        "The banks (a service key sees those it may use).",
        ("GET", "/v1/banks"),
        "banks.list_all",
        view=_each(record_view),
        mcp="list_banks",
        cli="banks",
        bank=False,
        hindsight=(("GET", "/v1/default/banks"),),
        hindsight_mcp=("list_banks",),
    ),
    Operation(
        "put_bank",
        "Create a bank, or update its name, background or disposition.",
        ("PUT", BANK),
        "banks.put",
        _p("name", "background", "disposition"),
        view=_created("bank"),
        mcp="create_bank",
        hindsight=(("PUT", HS_BANK), ("PATCH", f"{HS_BANK}/config")),
        hindsight_mcp=("create_bank",),
    ),
    Operation(
        "get_bank",
        "One bank.",
        ("GET", BANK),
        "banks.get",
        view=_one(record_view),
        hindsight=(("GET", HS_BANK), ("GET", f"{HS_BANK}/profile"), ("GET", f"{HS_BANK}/config")),
    ),
    Operation(
        "delete_bank",
        "Delete a bank with everything in it.",
        ("DELETE", BANK),
        "banks.delete",
        cli="delete",
        hindsight=(("DELETE", HS_BANK),),
    ),
    Operation(
        "bank_stats",
        "Counts of a bank's units, chunks, entities and graph.",
        ("GET", f"{BANK}/stats"),
        "banks.stats",
        sdk="stats",
        hindsight=(("GET", f"{HS_BANK}/stats"),),
    ),
    Operation("doctor", "Check every invariant of a bank.", None, "banks.doctor", sdk=None, cli="doctor"),
    Operation(
        "export_bank",
        "A bank as JSON Lines.",
        ("GET", f"{BANK}/export"),
        None,
        _p("vectors"),
        cli="export",
    ),
    Operation(
        "import_bank",
        "Import an export as a bank.",
        ("POST", f"{BANK}/import"),
        None,
        (Param("data", wire=RAW_BODY),),
        cli="import",
    ),
    # retain
    Operation(
        "retain",
        "Retain items; a document retained again replaces what it held.",
        ("POST", f"{BANK}/memories"),
        "retain_items",
        (*_p("items", "document_id", "tags"), WAIT),
        view=_report,
        mcp="retain",
        cli="retain",
        # A bank is created explicitly (put_bank), so a typo in a bank id is a 404, not a new bank.
        # The CLI's `memlane retain` creates it: a local tool on the user's own data directory.
        fixed={"create_bank": False},
        hindsight=(("POST", f"{HS_BANK}/memories"),),
        hindsight_mcp=("retain", "sync_retain"),
    ),
    Operation(
        "get_operation",
        "A background operation's state.",
        ("GET", f"{BANK}/operations/{{operation_id}}"),
        None,
        _p("operation_id"),
        sdk="operation",
        hindsight=(("GET", f"{HS_BANK}/operations/{{operation_id}}"),),
    ),
    # reading and deleting
    Operation(
        "list_memories",
        "A page of a bank's memories in id order, with the total that match.",
        ("GET", f"{BANK}/memories"),
        "browse.list_memories",
        (
            *_p("offset", "limit"),
            Param("types", wire="type"),
            Param("document_id"),
            Param("tags", wire="tag"),
            *_p("tags_match", "since", "until", "entity_id"),
        ),
        view=lambda page, p: memories_page_view(page, p.get("offset", 0), p.get("limit", 100)),
    ),
    Operation(
        "get_memory",
        "One memory.",
        ("GET", f"{BANK}/memories/{{memory_id}}"),
        "browse.get_memory",
        _p("memory_id"),
        view=_one(unit_view),
    ),
    Operation(
        "delete_memory",
        "Delete one memory.",
        ("DELETE", f"{BANK}/memories/{{memory_id}}"),
        "forget.delete_memory",
        _p("memory_id"),
    ),
    Operation(
        "invalidate",
        "Mark a memory no longer valid (kept for as-of recall).",
        None,
        "forget.invalidate",
        _p("unit_id", "superseded_by", "at"),
        sdk=None,
    ),
    Operation(
        "list_documents",
        "A bank's documents with their counts (``q``: those whose id or text holds it).",
        ("GET", f"{BANK}/documents"),
        "browse.list_documents",
        _p("q"),
        view=_one(documents_view),
        hindsight=(("GET", f"{HS_BANK}/documents"),),
        hindsight_mcp=("list_documents",),
    ),
    Operation(
        "get_document",
        "A document with its text as retained, its counts and tags.",
        ("GET", f"{BANK}/documents/{{document_id}}"),
        "browse.get_document",
        _p("document_id"),
        view=_one(record_view),
        hindsight=(("GET", f"{HS_BANK}/documents/{{document_id:path}}"),),
        hindsight_mcp=("get_document",),
    ),
    Operation(
        "delete_document",
        "Delete a document with its memories, chunks, links and the entities only it named.",
        ("DELETE", f"{BANK}/documents/{{document_id}}"),
        "forget.delete_document",
        _p("document_id"),
        mcp="delete_document",
        cli="delete",
        hindsight=(("DELETE", f"{HS_BANK}/documents/{{document_id:path}}"),),
        hindsight_mcp=("delete_document",),
    ),
    Operation(
        "list_entities",
        "A bank's entities, most mentioned first.",
        ("GET", f"{BANK}/entities"),
        "browse.list_entities",
        view=_each(entity_view),
    ),
    Operation(
        "get_entity",
        "An entity, the memories that name it and its neighbours.",
        ("GET", f"{BANK}/entities/{{entity_id}}"),
        "browse.entity",
        _p("entity_id", "limit"),
        view=_one(entity_detail_view),
    ),
    Operation(
        "timeline",
        "A bank's sessions over time.",
        ("GET", f"{BANK}/timeline"),
        "browse.timeline",
        view=_one(timeline_view),
    ),
    # the temporal tree
    Operation(
        "get_tree",
        "A bank's temporal tree nodes by level then start.",
        ("GET", f"{BANK}/tree"),
        "tree.nodes",
        (Param("level"), Param("since", wire="from"), Param("until", wire="to")),
        view=_each(node_view),
        sdk="tree",
        mcp="get_tree",
        cli="tree",
    ),
    Operation(
        "consolidate",
        "Consolidate a bank's temporal tree now.",
        ("POST", f"{BANK}/consolidate"),
        "consolidate",
        (Param("consolidator"), WAIT),
        view=_report,
        cli="consolidate",
    ),
    # recall and reflect
    Operation(
        "recall",
        "Recall the memories a question needs, best first, within a token budget.",
        ("POST", f"{BANK}/recall"),
        "recall",
        request=RecallRequest,
        view=_one(recall_view),
        mcp="recall",
        cli="recall",
        # A tool's answer lands in the agent's context: 1,024 tokens of memories by default, as
        # `memlane recall` prints (no measurement behind the figure yet).
        mcp_defaults={"max_tokens": 1024},
        hindsight=(("POST", f"{HS_BANK}/memories/recall"),),
        hindsight_mcp=("recall",),
    ),
    Operation(
        "reflect",
        "Answer in the bank's voice from its memories (needs an LLM).",
        ("POST", f"{BANK}/reflect"),
        "reflect",
        request=ReflectRequest,
        view=_one(reflect_view),
        mcp="reflect",
        cli="reflect",
        hindsight=(("POST", f"{HS_BANK}/reflect"),),
        hindsight_mcp=("reflect",),
    ),
    Operation(
        "merge_background",
        "Merge a biographical snippet into a bank's background.",
        None,
        "reflection.merge_background",
        _p("snippet"),
        sdk=None,
        cli="merge-background",
    ),
    Operation("resolve_facts", "Resolve a bank's conflicting facts.", None, "facts.resolve", sdk=None),
    # curated memory
    Operation(
        "put_mental_model",
        "Pin a question on a bank and answer it now.",
        ("PUT", f"{BANK}/models/{{model_id}}"),
        "curated.put_mental_model",
        _p("model_id", "question"),
        view=_created("model"),
        cli="model put",
        hindsight_mcp=("create_mental_model",),
    ),
    Operation(
        "list_mental_models",
        "A bank's mental models.",
        ("GET", f"{BANK}/models"),
        "curated.list_mental_models",
        view=_each(record_view),
        cli="model list",
        hindsight_mcp=("list_mental_models",),
    ),
    Operation(
        "get_mental_model",
        "One mental model with its answer and sources.",
        ("GET", f"{BANK}/models/{{model_id}}"),
        "curated.get_mental_model",
        _p("model_id"),
        view=_one(record_view),
        cli="model show",
        hindsight_mcp=("get_mental_model",),
    ),
    Operation(
        "refresh_mental_model",
        "Answer a mental model's question again.",
        ("POST", f"{BANK}/models/{{model_id}}/refresh"),
        "curated.refresh_mental_model",
        _p("model_id"),
        view=_one(record_view),
        cli="model refresh",
        hindsight_mcp=("refresh_mental_model",),
    ),
    Operation(
        "delete_mental_model",
        "Delete a mental model.",
        ("DELETE", f"{BANK}/models/{{model_id}}"),
        "curated.delete_mental_model",
        _p("model_id"),
        cli="model delete",
        hindsight_mcp=("delete_mental_model",),
    ),
    Operation(
        "put_directive",
        "Create or replace a rule for reflect.",
        ("PUT", f"{BANK}/directives/{{directive_id}}"),
        "curated.put_directive",
        _p("directive_id", "text", "tags"),
        view=_created("directive"),
        cli="directive put",
    ),
    Operation(
        "list_directives",
        "A bank's directives.",
        ("GET", f"{BANK}/directives"),
        "curated.list_directives",
        view=_each(record_view),
        cli="directive list",
    ),
    Operation(
        "delete_directive",
        "Delete a directive.",
        ("DELETE", f"{BANK}/directives/{{directive_id}}"),
        "curated.delete_directive",
        _p("directive_id"),
        cli="directive delete",
    ),
)

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}


def operation(name: str) -> Operation:
    """The operation called ``name``; KeyError naming it when there is none."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no operation {name!r} in memlane/catalogue.py") from None


def call(memory: Memory, name: str, bank_id: str | None = None, /, **params: Any) -> Any:
    """Run operation ``name`` on ``memory`` with the SDK's parameter names and answer the REST
    API's JSON; its fixed rules applied. InvalidInput names a parameter the operation lacks."""
    op = operation(name)
    if op.engine is None:
        raise ValueError(f"{name} is the service's own: no engine callable")
    unknown = sorted(set(params) - op.param_names())
    if unknown:
        raise InvalidInput(f"{unknown[0]}: not a parameter of {name}", unknown[0])
    service_only = {p.name for p in op.params if not p.engine}
    kwargs = {k: v for k, v in params.items() if k not in service_only and v is not None}
    fn: Any = memory
    for part in op.engine.split("."):
        fn = getattr(fn, part)
    args = () if not op.bank else (bank_id,)
    result = fn(*args, **kwargs, **op.fixed)
    return result if op.view is None else op.view(result, params)


def markdown() -> str:
    """The catalogue as a markdown table (docs/service.md holds it; a test keeps it current)."""

    def cell(value: str | None) -> str:
        return f"`{value}`" if value else ""

    lines = [
        "| operation | HTTP | SDK | MCP tool | CLI | engine | Hindsight (under `/hindsight`) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for op in OPERATIONS:
        http = f"{op.http[0]} {op.http[1]}" if op.http else None
        engine = f"memory.{op.engine}" if op.engine else None
        cli = f"memlane {op.cli}" if op.cli else None
        hindsight = [f"`{m} {p}`" for m, p in op.hindsight] + [f"MCP `{t}`" for t in op.hindsight_mcp]
        row = (op.summary, cell(http), cell(op.sdk_method), cell(op.mcp), cell(cli), cell(engine))
        cells = " | ".join((*row[1:], "<br>".join(hindsight)))
        lines.append(f"| `{op.name}`: {row[0]} | {cells} |")
    return "\n".join(lines) + "\n"
