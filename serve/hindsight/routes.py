"""The HTTP routes of the Hindsight-compatible surface, under ``/hindsight``: the paths and
methods hindsight-client 1.1.0 calls (``base_url="http://HOST:PORT/hindsight"``), each one a
surface of a catalogue operation (memlane/catalogue.py declares which; the parity test checks
it). Everything else under ``/hindsight`` answers 501 naming the route: never a 404 that reads
like a missing bank.

The same API keys and bank permissions as ``/v1`` (a key's banks are Memlane ids: see
serve/hindsight/bank_ids.py). Every answer here is 200, as the client's models declare: it
reads any other 2xx as "no answer". Not in the OpenAPI document: these are Hindsight's shapes.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from serve.auth import Principal
from serve.errors import error_response
from serve.hindsight.backend import IngressBackend
from serve.hindsight.requests import BankBody, ConfigUpdateBody, RecallBody, ReflectBody, RetainBody
from serve.hindsight.surface import Surface, memlane_bank
from serve.ratelimit import admit

PREFIX = "/hindsight"
BANK = "/v1/default/banks/{bank_id}"
router = APIRouter(prefix=PREFIX, include_in_schema=False)


def _ingress() -> Any:
    # The service host of this process (serve/host.py: the app travels by value under Ray).
    from serve.host import current

    return current()


async def caller(request: Request) -> Principal:
    """The key's principal, checked and rate-limited as on ``/v1`` (async, as there: no worker
    thread for what only reads memory)."""
    ingress = _ingress()
    return admit(ingress.auth, ingress.limiter, request.headers.get("authorization"))


async def bank_access(bank_id: str, who: Principal = Depends(caller)) -> str:
    """Hindsight's bank id of the path, once the key may use its Memlane bank."""
    who.check(memlane_bank(bank_id))
    return bank_id


async def surface() -> Surface:
    return Surface(IngressBackend(_ingress()))


def answer(content: Any, ignored: list[str] | None = None, status: int = 200) -> JSONResponse:
    """A JSON answer; the fields sent that had no effect in ``X-Ignored-Params`` (Hindsight's
    header for them)."""
    headers = {"X-Ignored-Params": ", ".join(ignored)} if ignored else None
    return JSONResponse(content, status_code=status, headers=headers)


# service --------------------------------------------------------------------------------------
@router.get("/health")
async def health(s: Surface = Depends(surface)) -> JSONResponse:
    """Healthy when the store answers; no key needed (as ``/v1/health``)."""
    status, body = await s.health()
    return answer(body, status=status)


@router.get("/version")
async def version(s: Surface = Depends(surface)) -> JSONResponse:
    return answer(s.version())


# banks ----------------------------------------------------------------------------------------
@router.get("/v1/default/banks")
async def list_banks(
    who: Principal = Depends(caller),
    s: Surface = Depends(surface),
    q: str | None = Query(None),
    limit: int = Query(100, ge=0),
    offset: int = Query(0, ge=0),
) -> JSONResponse:
    return answer(await s.list_banks(who.can_use, q, limit, offset))


@router.put(BANK)
async def put_bank(
    body: BankBody | None = None, bank_id: str = Depends(bank_access), s: Surface = Depends(surface)
) -> JSONResponse:
    body = body or BankBody()
    return answer(await s.put_bank(bank_id, body), body.ignored())


@router.get(BANK)
async def get_bank(bank_id: str = Depends(bank_access), s: Surface = Depends(surface)) -> JSONResponse:
    return answer(await s.get_bank(bank_id))


@router.get(f"{BANK}/profile")
async def get_profile(bank_id: str = Depends(bank_access), s: Surface = Depends(surface)) -> JSONResponse:
    """The profile (Hindsight 1.1.0 retired this path with a 410; its client still calls it)."""
    return answer(await s.get_bank(bank_id))


@router.delete(BANK)
async def delete_bank(bank_id: str = Depends(bank_access), s: Surface = Depends(surface)) -> JSONResponse:
    return answer(await s.delete_bank(bank_id))


@router.get(f"{BANK}/config")
async def get_config(bank_id: str = Depends(bank_access), s: Surface = Depends(surface)) -> JSONResponse:
    return answer(await s.config(bank_id))


@router.patch(f"{BANK}/config")
async def update_config(
    body: ConfigUpdateBody, bank_id: str = Depends(bank_access), s: Surface = Depends(surface)
) -> JSONResponse:
    config, ignored = await s.update_config(bank_id, body)
    return answer(config, [f"updates.{k}" for k in ignored])


@router.get(f"{BANK}/stats")
async def bank_stats(bank_id: str = Depends(bank_access), s: Surface = Depends(surface)) -> JSONResponse:
    return answer(await s.stats(bank_id))


# retain, operations ---------------------------------------------------------------------------
@router.post(f"{BANK}/memories")
async def retain(
    body: RetainBody, bank_id: str = Depends(bank_access), s: Surface = Depends(surface)
) -> JSONResponse:
    return answer(await s.retain(bank_id, body), body.ignored_fields())


@router.get(f"{BANK}/operations/{{operation_id}}")
async def get_operation(
    operation_id: str, bank_id: str = Depends(bank_access), s: Surface = Depends(surface)
) -> JSONResponse:
    return answer(await s.operation(bank_id, operation_id))


# recall, reflect ------------------------------------------------------------------------------
@router.post(f"{BANK}/memories/recall")
async def recall(
    body: RecallBody, bank_id: str = Depends(bank_access), s: Surface = Depends(surface)
) -> JSONResponse:
    return answer(await s.recall(bank_id, body), body.ignored("prefer_observations", "temporal_window"))


@router.post(f"{BANK}/reflect")
async def reflect(
    body: ReflectBody, bank_id: str = Depends(bank_access), s: Surface = Depends(surface)
) -> JSONResponse:
    unused = ("apply_all_directives", "exclude_mental_models", "exclude_mental_model_ids")
    return answer(await s.reflect(bank_id, body), body.ignored(*unused))


# documents ------------------------------------------------------------------------------------
@router.get(f"{BANK}/documents")
async def list_documents(
    request: Request,
    bank_id: str = Depends(bank_access),
    s: Surface = Depends(surface),
    q: str | None = Query(None),
    limit: int = Query(100, ge=0),
    offset: int = Query(0, ge=0),
) -> JSONResponse:
    ignored = sorted(set(request.query_params) - {"q", "limit", "offset"})
    return answer(await s.documents(bank_id, q, limit, offset), ignored)


@router.get(f"{BANK}/documents/{{document_id:path}}")
async def get_document(
    document_id: str, bank_id: str = Depends(bank_access), s: Surface = Depends(surface)
) -> JSONResponse:
    return answer(await s.document(bank_id, document_id))


@router.delete(f"{BANK}/documents/{{document_id:path}}")
async def delete_document(
    document_id: str, bank_id: str = Depends(bank_access), s: Surface = Depends(surface)
) -> JSONResponse:
    return answer(await s.delete_document(bank_id, document_id))


# everything else ------------------------------------------------------------------------------
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def route_name(method: str, path: str) -> str:
    """``METHOD /path`` of a request under the prefix, its bank segment as ``{bank_id}``."""
    rest = path.removeprefix(PREFIX) or "/"
    parts = rest.split("/")
    if parts[1:4] == ["v1", "default", "banks"] and len(parts) > 4 and parts[4]:
        parts[4] = "{bank_id}"
    return f"{method} {'/'.join(parts)}"


@router.api_route("/{rest:path}", methods=METHODS)
async def not_offered(request: Request) -> JSONResponse:
    """501 naming the route: a Hindsight route this surface does not offer."""
    name = route_name(request.method, request.url.path)
    return error_response(
        501,
        "not_implemented",
        f"{name}: this Hindsight route is not offered by Memlane's compatible surface (docs/hindsight.md)",
        "path",
    )
