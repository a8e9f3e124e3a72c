"""The FastAPI app: auth, validation, the /v1 routes, metrics. Ray-free: it runs on the service
host of its process (serve/host.py), an Ingress replica of the Ray runtime (serve/app.py) or
the one process of the process runtime (serve/process.py). Recall and reflect run on the
host's engine (serve/bank_host.py); the rest on its writes (serve/backend.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from fastapi import Depends, FastAPI, Path, Query, Request, Response, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from memlane.records import BANK_ID_PATTERN, FactType, TagsMatch
from serve import api_docs, curated_routes, explorer
from serve.auth import Principal
from serve.errors import (
    APIError,
    api_error_handler,
    engine_error,
    error_response,
    http_error_handler,
    validation_handler,
)
from serve.hindsight import routes as hindsight_routes
from serve.hindsight.mcp import HindsightMCPEndpoint
from serve.host import ServiceHost, current
from serve.mcp_http import MCPEndpoint, run_replica_mcp
from serve.openapi import document_errors
from serve.ratelimit import admit
from serve.schemas import BankBody, ConsolidateBody, RecallBody, ReflectBody, RerankBody, RetainBody


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The MCP endpoint's session manager must run for the app's lifetime, and a routed ASGI
    # app's own lifespan is never run, so this one (which Serve runs on each replica, after
    # the Ingress constructor built the MCP server; the process runtime after it built its
    # host) runs it.
    async with run_replica_mcp():
        yield


api = FastAPI(
    title="Memlane",
    version="1",
    description="Agent memory: retain, recall and reflect over per-user memory banks. "
    "Authenticate with `Authorization: Bearer KEY`. MCP clients: Streamable HTTP at `/mcp`.",
    lifespan=_lifespan,
    # FastAPI's own pages load their assets from a CDN: serve/api_docs.py serves them itself
    docs_url=None,
    redoc_url=None,
)
api.add_exception_handler(APIError, api_error_handler)
document_errors(api)  # the error statuses of each operation, with the error body, in /openapi.json
api.include_router(explorer.router)  # the memory explorer's static pages at /ui
api.include_router(api_docs.router)  # /docs and /redoc, their assets from a package, no CDN

BankId = Path(..., pattern=BANK_ID_PATTERN, description="1-128 letters, digits, '_', '.', '-'")


def _ingress(request: Request) -> ServiceHost:
    # Serve ships the FastAPI app to the replica by value, so state set on the module's `api`
    # object is not the app that runs: the host of the process is found by serve/host.py.
    return current()


# Documents the key as the schema's bearer security scheme; the Authenticator reads the header
# itself (auto_error off), so a missing or malformed key gets its own 401 message.
_bearer = HTTPBearer(auto_error=False, description="an API key of MEMLANE_SERVE__API_KEYS")


# Both dependencies are async: they only read memory, and a sync one runs in a worker thread,
# two thread hops a request (0.56 -> 0.36 ms a request of a trivial route, in-process client).
async def principal(request: Request, _: Any = Security(_bearer)) -> Principal:
    ingress = _ingress(request)
    return admit(ingress.auth, ingress.limiter, request.headers.get("authorization"))


async def bank_access(bank_id: str = BankId, who: Principal = Depends(principal)) -> str:
    who.check(bank_id)
    return bank_id


def _refusal(request: Request) -> APIError | None:
    """The 401 or 403 a request gets for its key and bank, if any. FastAPI reads and parses a
    JSON body before any dependency runs, so a malformed body would answer 400 before the key
    is looked at; its handlers ask this first, so the key (and the bank's scope) are checked
    first as on every other request (found by tests/serving/test_fuzz.py)."""
    if request.url.path == "/v1/health":
        return None
    try:
        who = _ingress(request).auth.authenticate(request.headers.get("authorization"))
        if "bank_id" in request.path_params:
            who.check(request.path_params["bank_id"])
    except APIError as refused:
        return refused
    return None


async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    if any(e.get("type") == "json_invalid" for e in exc.errors()) and (refused := _refusal(request)):
        return await api_error_handler(request, refused)
    return await validation_handler(request, exc)


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    # 400: FastAPI could not read the body at all (e.g. not UTF-8)
    if exc.status_code == 400 and (refused := _refusal(request)):
        return await api_error_handler(request, refused)
    return await http_error_handler(request, exc)


api.add_exception_handler(RequestValidationError, _validation)
api.add_exception_handler(StarletteHTTPException, _http_error)  # unknown path, method; unreadable body


async def _call(response) -> Any:
    """Await a call of the host's writes or engine; engine errors become API errors."""
    try:
        return await response
    except Exception as exc:  # noqa: BLE001
        mapped = engine_error(exc)
        if mapped is None:
            raise
        raise mapped from None


async def _op(request: Request, name: str, bank_id: str | None = None, /, **params: Any) -> Any:
    """Run operation ``name`` of the catalogue (memlane/catalogue.py) on the host's writes."""
    return await _call(_ingress(request).writes.call(name, bank_id, params))


@api.middleware("http")
async def limits_and_metrics(request: Request, call_next):
    ingress = _ingress(request)
    start = time.perf_counter()
    length = request.headers.get("content-length")
    limit = ingress.max_body_bytes
    if length is not None:
        too_big = not length.isdigit() or int(length) > limit
    else:  # a chunked upload: measure what came
        too_big = request.method in ("POST", "PUT", "PATCH") and len(await request.body()) > limit
    if too_big:
        response = error_response(
            413,
            "payload_too_large",
            f"request body is larger than the limit of {limit} bytes (MEMLANE_SERVE__MAX_BODY_BYTES)",
            "body",
        )
    else:
        try:
            response = await call_next(request)
        except Exception:  # noqa: BLE001 - an unexpected failure is a JSON 500, and counted
            ingress.log_exception(request)
            response = error_response(500, "internal", "internal error; see the service logs")
    route = request.scope.get("route")
    ingress.metrics_record(
        getattr(route, "path", "unmatched"),
        request.method,
        response.status_code,
        (time.perf_counter() - start) * 1000,
    )
    return response


# MCP (serve/mcp_http.py): the same keys and banks, Streamable HTTP, stateless ------------------
api.add_route("/mcp", MCPEndpoint("/mcp"), include_in_schema=False)
# Hindsight's MCP tools (serve/hindsight/mcp.py): all banks, and one bank's; before the
# Hindsight routes' catch-all (included last)
for _path, _kind in (("/hindsight/mcp", "multi"), ("/hindsight/mcp/{bank_id}", "bank")):
    for _slash in ("", "/"):
        api.add_route(_path + _slash, HindsightMCPEndpoint(_kind), include_in_schema=False)


# health and discovery ---------------------------------------------------------------------
@api.get("/v1/health", tags=["service"])
async def health(request: Request) -> JSONResponse:
    """Liveness and store reachability; no API key needed."""
    try:
        store = await _ingress(request).writes.health()
    except Exception as exc:  # noqa: BLE001
        return error_response(503, "unhealthy", f"store unreachable: {type(exc).__name__}")
    return JSONResponse({"status": "ok", **store})


# banks --------------------------------------------------------------------------------------
@api.get("/v1/banks", tags=["banks"])
async def list_banks(request: Request, who: Principal = Depends(principal)) -> dict:
    banks = await _op(request, "list_banks")
    return {"banks": [b for b in banks if who.can_use(b["bank_id"])]}


@api.put("/v1/banks/{bank_id}", tags=["banks"])
async def put_bank(
    request: Request, response: Response, body: BankBody, bank_id: str = Depends(bank_access)
) -> dict:
    """Create a bank, or update its name, background or disposition."""
    out = await _op(request, "put_bank", bank_id, **body.model_dump(exclude_none=True))
    response.status_code = 201 if out["created"] else 200
    return out["bank"]


@api.get("/v1/banks/{bank_id}", tags=["banks"])
async def get_bank(request: Request, bank_id: str = Depends(bank_access)) -> dict:
    return await _op(request, "get_bank", bank_id)


@api.delete("/v1/banks/{bank_id}", tags=["banks"])
async def delete_bank(request: Request, bank_id: str = Depends(bank_access)) -> dict:
    """Delete the bank with every memory, chunk, entity and link in it."""
    await _op(request, "delete_bank", bank_id)
    return {"deleted": bank_id}


@api.get("/v1/banks/{bank_id}/stats", tags=["banks"])
async def bank_stats(request: Request, bank_id: str = Depends(bank_access)) -> dict:
    return await _op(request, "bank_stats", bank_id)


@api.get("/v1/banks/{bank_id}/export", tags=["banks"])
async def export_bank(
    request: Request, bank_id: str = Depends(bank_access), vectors: bool = Query(False)
) -> Response:
    """The bank as JSON Lines (header, chunks, entities, units; embeddings with ``vectors``),
    for ``POST .../import`` or ``memlane import``. Built whole on the replica, then sent."""
    data = await _call(_ingress(request).writes.export_bank(bank_id, vectors))
    return Response(content=data, media_type="application/x-ndjson")


@api.post("/v1/banks/{bank_id}/import", tags=["banks"])
async def import_bank(request: Request, bank_id: str = Depends(bank_access)) -> dict:
    """Import an export (NDJSON body, at most MEMLANE_SERVE__MAX_BODY_BYTES) as this bank:
    idempotent, validated whole before anything is written, re-embedding without vectors."""
    body = await request.body()
    return await _call(_ingress(request).writes.import_bank(bank_id, body))


# retain and operations ----------------------------------------------------------------------
@api.post("/v1/banks/{bank_id}/memories", tags=["memories"])
async def retain(
    request: Request, response: Response, body: RetainBody, bank_id: str = Depends(bank_access)
) -> dict:
    """Retain items. Items sharing a document_id form a document that replaces its previous
    version; ``"async": true`` answers 202 with an operation to poll."""
    payload = body.model_dump(mode="json", exclude={"async_"})
    writes = _ingress(request).writes
    if body.async_:
        op = await _call(writes.retain_async(bank_id, payload))
        response.status_code = 202
        response.headers["Location"] = f"/v1/banks/{bank_id}/operations/{op['operation_id']}"
        return op
    return await _op(request, "retain", bank_id, **payload)


@api.get("/v1/banks/{bank_id}/operations/{operation_id}", tags=["memories"])
async def get_operation(request: Request, operation_id: str, bank_id: str = Depends(bank_access)) -> dict:
    return await _call(_ingress(request).writes.operation(bank_id, operation_id))


@api.get("/v1/banks/{bank_id}/memories", tags=["memories"])
async def list_memories(
    request: Request,
    bank_id: str = Depends(bank_access),
    offset: int = Query(0, ge=0),
    limit: int = Query(100, ge=1, le=1000),
    type: list[FactType] | None = Query(None, description="memory networks (fact types); any of them"),  # noqa: A002
    document_id: str | None = Query(None, min_length=1),
    tag: list[str] | None = Query(None, description="tags (repeat the parameter); see tags_match"),
    tags_match: TagsMatch = Query(
        "any", description="any: shares a tag; all: has every tag; *_or_untagged: or has none; exact"
    ),
    since: datetime | None = Query(None, description="mentioned at or after this time (ISO 8601)"),
    until: datetime | None = Query(None, description="mentioned before this time (exclusive)"),
    entity_id: str | None = Query(None, min_length=1, description="memories that name this entity"),
) -> dict:
    """A page of memories in id order, invalidated ones included, with the total that match.
    The filters combine (and) and mean what they mean to recall; their rules, and the check of
    an empty since/until window, are memlane/units.py's."""
    if tag is not None and any(not t.strip() for t in tag):
        raise APIError(422, "invalid_request", "tag: must not be empty", "tag")
    filters = {
        "types": [t.value for t in type] if type else None,
        "document_id": document_id,
        "tags": tag,
        "tags_match": tags_match,
        "since": since,
        "until": until,
        "entity_id": entity_id,
    }
    return await _op(request, "list_memories", bank_id, offset=offset, limit=limit, **filters)


@api.get("/v1/banks/{bank_id}/memories/{memory_id}", tags=["memories"])
async def get_memory(request: Request, memory_id: str, bank_id: str = Depends(bank_access)) -> dict:
    return await _op(request, "get_memory", bank_id, memory_id=memory_id)


@api.delete("/v1/banks/{bank_id}/memories/{memory_id}", tags=["memories"])
async def delete_memory(request: Request, memory_id: str, bank_id: str = Depends(bank_access)) -> dict:
    return await _op(request, "delete_memory", bank_id, memory_id=memory_id)


@api.get("/v1/banks/{bank_id}/documents", tags=["documents"])
async def list_documents(
    request: Request,
    bank_id: str = Depends(bank_access),
    q: str | None = Query(
        None, min_length=1, max_length=1000, description="only documents whose id or text holds this"
    ),
) -> dict:
    """The bank's documents with their memory and chunk counts; ``q`` matches ids and text
    (case-insensitive), reading the bank's chunks."""
    return {"documents": await _op(request, "list_documents", bank_id, q=q)}


@api.get("/v1/banks/{bank_id}/documents/{document_id}", tags=["documents"])
async def get_document(
    request: Request,
    document_id: str = Path(..., min_length=1, max_length=256),
    bank_id: str = Depends(bank_access),
) -> dict:
    """A document with its text as retained (one ``speaker: text`` line per turn, session by
    session), its memory and chunk counts, tags, and when its first and last chunk start."""
    return await _op(request, "get_document", bank_id, document_id=document_id)


@api.delete("/v1/banks/{bank_id}/documents/{document_id}", tags=["documents"])
async def delete_document(
    request: Request,
    document_id: str = Path(..., min_length=1, max_length=256),
    bank_id: str = Depends(bank_access),
) -> dict:
    """Delete a document with its memories, chunks, links and the entities only it named."""
    return await _op(request, "delete_document", bank_id, document_id=document_id)


@api.get("/v1/banks/{bank_id}/entities", tags=["memories"])
async def list_entities(request: Request, bank_id: str = Depends(bank_access)) -> dict:
    return {"entities": await _op(request, "list_entities", bank_id)}


@api.get("/v1/banks/{bank_id}/entities/{entity_id}", tags=["memories"])
async def get_entity(
    request: Request,
    entity_id: str,
    bank_id: str = Depends(bank_access),
    limit: int = Query(50, ge=1, le=1000, description="memories returned (the earliest mentioned)"),
) -> dict:
    """An entity, the memories that name it (``total`` counts all of them) and its neighbours:
    the entities those memories also name, by how many memories they share."""
    return await _op(request, "get_entity", bank_id, entity_id=entity_id, limit=limit)


@api.get("/v1/banks/{bank_id}/timeline", tags=["documents"])
async def timeline(request: Request, bank_id: str = Depends(bank_access)) -> dict:
    """The bank's sessions over time: per document and session, the first and last chunk
    start, chunk and turn counts, ordered by start."""
    return {"sessions": await _op(request, "timeline", bank_id)}


# the temporal tree (memlane/tree) -------------------------------------------------------------
@api.get("/v1/banks/{bank_id}/tree", tags=["tree"])
async def get_tree(
    request: Request,
    bank_id: str = Depends(bank_access),
    level: str | None = Query(
        None, max_length=32, description="one level: 2-5 or session, day, week, profile (default: all)"
    ),
    since: datetime | None = Query(
        None, alias="from", description="nodes whose interval ends at or after this time (ISO 8601)"
    ),
    until: datetime | None = Query(
        None, alias="to", description="nodes whose interval starts before this time (exclusive)"
    ),
) -> dict:
    """The bank's temporal tree: its session, day, week and profile nodes (each with its
    interval ``start``-``end``, children, source turns and text), by level then start; empty
    before the first consolidation."""
    since, until = _aware(since, "from"), _aware(until, "to")
    if since is not None and until is not None and until <= since:
        raise APIError(422, "invalid_request", "to: must be after from", "to")
    nodes = await _op(request, "get_tree", bank_id, level=level, since=since, until=until)
    return {"nodes": nodes}


def _aware(when: datetime | None, field: str) -> datetime | None:
    """``when`` in UTC (a time without an offset is UTC, as everywhere in the engine); 422 for
    one that UTC cannot hold (year 1 at +01:00 is before datetime.min)."""
    from memlane.records import utc

    try:
        return None if when is None else utc(when)
    except OverflowError:
        raise APIError(422, "invalid_request", f"{field}: out of the range of UTC times", field) from None


@api.post("/v1/banks/{bank_id}/consolidate", tags=["tree"])
async def consolidate(
    request: Request,
    response: Response,
    body: ConsolidateBody | None = None,
    bank_id: str = Depends(bank_access),
) -> dict:
    """Consolidate the bank's temporal tree now: every closed session, day and week and the
    profile, rewritten only where their children changed (a repeat writes nothing). Answers
    the report; ``"async": true`` answers 202 with an operation to poll."""
    body = body or ConsolidateBody()
    writes = _ingress(request).writes
    if body.async_:
        op = await _call(writes.consolidate_async(bank_id, body.consolidator))
        response.status_code = 202
        response.headers["Location"] = f"/v1/banks/{bank_id}/operations/{op['operation_id']}"
        return op
    return await _op(request, "consolidate", bank_id, consolidator=body.consolidator)


# recall, reflect, rerank ----------------------------------------------------------------------
@api.post("/v1/banks/{bank_id}/recall", tags=["recall"])
async def recall(request: Request, body: RecallBody, bank_id: str = Depends(bank_access)) -> Response:
    """Recall. Headers: ``X-Memlane-Replica`` names the replica that answered,
    ``X-Memlane-Bank`` how it held the bank: ``warm``, ``cold`` (the store answered while the
    bank loads) or ``loaded`` (loaded first)."""
    ingress = _ingress(request)
    data, state = await _call(ingress.recall_json(bank_id, body))
    headers = {"X-Memlane-Replica": ingress.replica, "X-Memlane-Bank": state}
    return Response(content=data, media_type="application/json", headers=headers)


@api.post("/v1/banks/{bank_id}/reflect", tags=["reflect"])
async def reflect(request: Request, body: ReflectBody, bank_id: str = Depends(bank_access)) -> Response:
    """Answer in the bank's voice from its memories (needs an LLM: 503 until one is set)."""
    data = await _call(
        _ingress(request).reflect_json(bank_id, body.model_dump(mode="json", exclude_none=True))
    )
    return Response(content=data, media_type="application/json")


@api.post("/v1/rerank", tags=["recall"])
async def rerank(request: Request, body: RerankBody, who: Principal = Depends(principal)) -> dict:
    return {"scores": await _call(_ingress(request).rerank_scores(body.query, body.documents))}


api.include_router(curated_routes.router(bank_access, _op))  # mental models, directives
# The Hindsight-compatible surface (serve/hindsight/routes.py), its catch-all last of all
api.include_router(hindsight_routes.router)
