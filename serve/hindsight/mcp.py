"""Hindsight's MCP tool set on the Hindsight-compatible surface, beside Memlane's own ``/mcp``:

* ``/hindsight/mcp/``: every tool, each bank-scoped one with an optional ``bank_id``
  (default: the ``X-Bank-Id`` header, else the bank ``default``); answers are JSON text;
* ``/hindsight/mcp/{bank_id}/``: the bank's tools (no ``list_banks``, ``create_bank`` or
  ``bank_id`` argument); answers are JSON objects.

As Hindsight's server names them (``hindsight_api/mcp_tools.py``, 1.1.0): ``retain`` (queued,
with an operation id), ``sync_retain``, ``recall``, ``reflect``, ``list_banks``,
``create_bank``, the documents' and the mental models' tools that Memlane has a counterpart for
(serve/hindsight/mcp_tools.py). The other Hindsight tools are refused by name
(``HindsightMCP.refused``). Each tool runs the surface's operation (serve/hindsight/surface.py),
so it answers what the HTTP route answers. Transport,
keys and bank permissions as on ``/mcp`` (serve/mcp_http.py): stateless Streamable HTTP with
JSON responses, the key checked before the SDK sees the request. Errors are tool errors
(``isError``) whose text starts with the error's code.
"""

# No ``from __future__ import annotations``: see serve/hindsight/mcp_tools.py.
import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from serve.auth import Principal
from serve.errors import APIError, error_response
from serve.hindsight.mcp_tools import (
    HINDSIGHT_TOOLS,
    MULTI_BANK_ONLY,
    PATH_BANK,
    READ_ONLY,
    TOOLS,
    Resolver,
    _failure,
)
from serve.hindsight.surface import Surface
from serve.ratelimit import admit

__all__ = ["HINDSIGHT_TOOLS", "MULTI_BANK_ONLY", "TOOLS", "HindsightMCP", "HindsightMCPEndpoint"]


class HindsightMCP(MCPServer):
    """The SDK's server, refusing Hindsight's tools that Memlane does not offer by name."""

    refused: frozenset[str] = frozenset()

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name in self.refused:
            raise ToolError(
                f"not_offered: {name} is a Hindsight tool Memlane's compatible MCP server does not "
                "offer (docs/hindsight.md)"
            )
        return await super().call_tool(name, arguments, context)


def _register(server: MCPServer, fn: Callable[..., Any], *, single: bool) -> None:
    """Register ``fn`` on ``server``: on the bank's server without its ``bank_id`` argument
    and answering the object, on the multi-bank server answering it as JSON text (as
    Hindsight's two servers do)."""
    from mcp.types import ToolAnnotations

    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if not (single and p.name == "bank_id")]

    @functools.wraps(fn)
    async def tool(**kwargs: Any) -> Any:
        out = await fn(**kwargs)
        return out if single else json.dumps(out, indent=2, default=str)

    returns = dict[str, Any] if single else str
    tool.__signature__ = sig.replace(parameters=params, return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {
        **{p.name: p.annotation for p in params},
        "return": returns,
    }
    hints = ToolAnnotations(read_only_hint=fn.__name__ in READ_ONLY, open_world_hint=False)
    server.tool(name=fn.__name__, annotations=hints)(tool)


def build_hindsight_mcp(resolve: Resolver, *, single: bool) -> HindsightMCP:
    """The multi-bank server (``single`` False) or the bank's server (True); ``resolve`` gives
    the surface and the key's principal of a call from its headers."""
    root = logging.getLogger()  # the SDK's constructor would install its log handler: see mcp_server
    handlers, level = list(root.handlers), root.level

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Resolver]:
        yield resolve

    server = HindsightMCP(
        "hindsight",
        title="Memlane (Hindsight-compatible)",
        instructions="Long-term memory: retain stores, recall searches, reflect answers from it.",
        lifespan=lifespan,
    )
    root.handlers[:], root.level = handlers, level
    offered = [fn for fn in TOOLS if not (single and fn.__name__ in MULTI_BANK_ONLY)]
    for fn in offered:
        _register(server, fn, single=single)
    server.refused = HINDSIGHT_TOOLS - {fn.__name__ for fn in offered}
    return server


def build_replica_servers(ingress: Any, max_body_bytes: int) -> dict[str, HindsightMCP]:
    """Both servers of one Ingress replica (stateless Streamable HTTP, JSON responses, as
    serve/mcp_http.py's), by kind: ``multi`` and ``bank``."""
    from serve.hindsight.backend import IngressBackend

    def resolve(headers: Mapping[str, str] | None) -> tuple[Surface, Principal]:
        try:
            principal = ingress.auth.authenticate((headers or {}).get("authorization"))
        except APIError as exc:  # the endpoint refused these already
            raise _failure(exc) from None
        return Surface(IngressBackend(ingress)), principal

    servers = {}
    for kind in ("multi", "bank"):
        server = build_hindsight_mcp(resolve, single=kind == "bank")
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        servers[kind] = server
    return servers


class HindsightMCPEndpoint:
    """The ASGI app routed at ``/hindsight/mcp/`` (``kind`` multi) and
    ``/hindsight/mcp/{bank_id}/`` (``kind`` bank): the key check, then the replica's server of
    that kind, told the path's bank in a header only the endpoint sets."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from serve.host import current

        scope["route"] = self  # the ingress's metrics label requests by their route
        ingress = current()
        try:
            admit(ingress.auth, ingress.limiter, Headers(scope=scope).get("authorization"))
        except APIError as exc:
            response = error_response(exc.status, exc.code, exc.message, exc.field, exc.headers)
            await response(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != PATH_BANK.encode()]
        bank = (scope.get("path_params") or {}).get("bank_id")
        if self.kind == "bank" and bank:
            headers.append((PATH_BANK.encode(), quote(bank, safe="").encode()))
        scope = {**scope, "headers": headers}
        await ingress.hindsight_mcp[self.kind].session_manager.handle_request(scope, receive, send)
