"""The service's error body: ``{"error": {"code", "message", "field"}}``, with the engine's
errors mapped to HTTP status codes."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException


class APIError(Exception):
    """An error answered as JSON with ``status``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field
        self.headers = headers


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def error_response(
    status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(code, message, field), status_code=status, headers=headers)


def _field(loc: tuple | list) -> str:
    # FastAPI locations start with where the value came from: body, query, path, header.
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


async def api_error_handler(_: Request, exc: APIError) -> JSONResponse:
    return error_response(exc.status, exc.code, exc.message, exc.field, exc.headers)


# Starlette's own answers (no route for the path, a method the path does not take) by code.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


async def http_error_handler(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """Starlette's and FastAPI's own HTTP errors (404 for an unknown path, 405 with ``Allow``,
    400 for a body FastAPI cannot read) in the service's error shape, not ``{"detail": ...}``."""
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    if exc.status_code == 404:
        message, field = f"no route {request.url.path!r}", "path"
    elif exc.status_code == 400:  # FastAPI could not read the body (e.g. not UTF-8)
        code, message, field = "malformed_json", f"request body is not valid JSON: {exc.detail}", "body"
    elif exc.status_code == 405:
        message, field = f"method {request.method} is not allowed on {request.url.path!r}", "method"
    else:
        message, field = str(exc.detail), None
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # every method the path takes (Starlette names one route's only)
        headers["Allow"] = ", ".join(_allowed(request))
    return error_response(exc.status_code, code, message, field, headers or None)


def _allowed(request: Request) -> list[str]:
    from starlette.routing import Match

    methods: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


async def validation_handler(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx") or {}
        detail = ctx.get("error") or first.get("msg")
        return error_response(400, "malformed_json", f"request body is not valid JSON: {detail}", "body")
    details = [{"field": _field(e.get("loc", ())), "message": e.get("msg", "")} for e in errors]
    message = "; ".join(f"{d['field']}: {d['message']}" for d in details)
    body = error_body("invalid_request", message, details[0]["field"])
    body["error"]["details"] = details
    return JSONResponse(body, status_code=422)


def engine_error(exc: BaseException) -> APIError | None:
    """The API error for an engine error raised here or in another replica (Ray re-raises it
    as a subclass of the original), or None for anything else."""
    from memlane.errors import (
        ConfigError,
        Conflict,
        EmbedderMismatch,
        InvalidInput,
        LLMNotConfigured,
        NotFound,
        StoreUnavailable,
    )
    from memlane.llm.errors import LLMError, LLMOutputError

    cause = getattr(exc, "cause", None)  # a RayTaskError carries the replica's exception
    if isinstance(cause, BaseException):
        exc = cause
    if isinstance(exc, NotFound):
        code = "bank_not_found" if exc.field == "bank_id" else "not_found"
        return APIError(404, code, _text(exc), exc.field or None)
    if isinstance(exc, Conflict):
        return APIError(409, "conflict", _text(exc), exc.field or None)
    if isinstance(exc, EmbedderMismatch):  # the bank's state conflicts with this service's
        return APIError(409, "embedder_mismatch", _text(exc), exc.field)
    if isinstance(exc, LLMNotConfigured):
        return APIError(503, "llm_not_configured", _text(exc))
    if isinstance(exc, LLMOutputError):  # the model answered, but nothing valid after a repair
        return APIError(503, "llm_bad_output", _text(exc))
    if isinstance(exc, LLMError):  # the model server is down, refused, or timed out
        return APIError(503, "llm_unavailable", _text(exc))
    if isinstance(exc, InvalidInput):
        return APIError(422, "invalid_request", _text(exc), exc.field)
    if isinstance(exc, StoreUnavailable):  # the Milvus server does not answer
        return APIError(503, "store_unavailable", _text(exc))
    if isinstance(exc, ConfigError):
        return APIError(503, "not_configured", _text(exc))
    return None


def _text(exc: BaseException) -> str:
    # A re-raised Ray error carries the remote traceback in str(); args[0] is the message.
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__


class ErrorDetail(BaseModel):
    code: str = Field(description="machine-readable: e.g. unauthorized, forbidden, bank_not_found")
    message: str
    field: str | None = Field(description="the request field at fault, when there is one")
    details: list[dict[str, Any]] | None = Field(None, description="422: every invalid field")


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer of the API."""

    error: ErrorDetail
