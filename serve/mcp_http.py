"""The MCP endpoint of the service: Streamable HTTP at ``/mcp`` on the ingress, with the same
API keys and bank permissions as the REST API, calling the service host's writes and engine
(serve/host.py).

- **Stateless.** Requests may land on any Ingress replica, and nothing an MCP call needs lives
  in one: the tools are single request/response calls over Milvus-backed deployments. So the
  session manager runs in stateless mode with JSON responses: a client of the 2026-07-28
  protocol is sessionless anyway, and an older client gets no ``Mcp-Session-Id`` that a
  second replica would not know (the cost: no server-to-client requests, which no tool uses).
- **Auth.** :class:`MCPEndpoint` checks ``Authorization: Bearer KEY`` with the Ingress's
  :class:`~serve.auth.Authenticator` before the SDK sees the request: a missing or unknown key
  is the REST API's 401. Each tool call then resolves the key again to its
  :class:`~serve.auth.Principal` (the key is verified, the header is never trusted as an
  identity), and a bank outside its list is a ``forbidden`` tool error.
- **Lifespan.** A mounted ASGI app's lifespan is never run, so the ingress's own FastAPI
  lifespan enters the session manager's ``run()`` (serve/ingress.py); Serve runs that lifespan
  on each replica after the Ingress constructor, which built the MCP server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from memlane.errors import InvalidInput
from memlane.records import RecallRequest
from memlane.reflect.requests import ReflectRequest
from serve.auth import Principal
from serve.errors import APIError, error_response
from serve.mcp_server import BackendResolver, ToolFailure, build_mcp_server
from serve.ratelimit import admit

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


def _authorization(headers: Mapping[str, str] | None) -> str | None:
    if headers is None:
        return None
    value = headers.get("authorization")  # Starlette headers ignore case
    if value is None:  # a plain mapping
        value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    return value


class ServeBackend:
    """The tools' backend on the service host (an Ingress replica, or the one process), for one
    caller."""

    def __init__(self, ingress: Any, principal: Principal) -> None:
        self.ingress, self.principal = ingress, principal

    def _check(self, bank_id: str) -> None:
        if not self.principal.can_use(bank_id):
            raise ToolFailure("forbidden", f"this API key may not use bank {bank_id!r}")

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        if name == "list_banks":  # the banks this key may use
            banks = await self.ingress.writes.call(name, None, params)
            return [b for b in banks if self.principal.can_use(b["bank_id"])]
        self._check(bank_id)
        if name == "recall":  # recall and reflect run on this replica, as the REST routes do
            data, _state = await self.ingress.recall_json(bank_id, _validate(RecallRequest, params))
            return json.loads(data)
        if name == "reflect":
            _validate(ReflectRequest, params)
            return json.loads(await self.ingress.reflect_json(bank_id, params))
        return await self.ingress.writes.call(name, bank_id, params)


def _validate(model: Any, request: dict[str, Any]) -> Any:
    from pydantic import ValidationError

    try:
        return model.model_validate(request)
    except ValidationError as exc:
        raise InvalidInput.from_validation(exc) from None


# The MCP server of this process's Ingress (a Serve replica is one process with one Ingress),
# for the app's lifespan: Serve runs the lifespan after the Ingress constructor, but sets the
# replica context's servable_object only once start-up, lifespan included, is over. It lives in
# this module because the Ingress class travels to the replica by value (serve.ingress.Ingress
# names the Serve deployment, not the class), so a global its constructor set in serve/ingress.py
# lands in cloudpickle's copy of that module's globals, where the lifespan never looks (tried).
_replica: dict[str, MCPServer] = {}


def keep_running(name: str, server: MCPServer) -> None:
    """Run ``server``'s session manager for the app's lifetime too (the Hindsight-compatible
    surface's MCP servers, serve/hindsight/mcp.py)."""
    _replica[name] = server


def run_replica_mcp() -> AbstractAsyncContextManager[Any]:
    """The session managers' ``run()`` of this replica's MCP servers, for the app's lifespan
    (nothing to run where no Ingress was built, e.g. the app imported outside Serve)."""
    servers = list(_replica.values())
    if not servers:
        return nullcontext()

    @asynccontextmanager
    async def run_all() -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for server in servers:
                await stack.enter_async_context(server.session_manager.run())
            yield

    return run_all()


def build_http_mcp(ingress: Any, max_body_bytes: int) -> MCPServer:
    """The MCP server of one Ingress replica (stateless Streamable HTTP, JSON responses)."""

    def resolve(headers: Mapping[str, str] | None) -> ServeBackend:
        try:
            principal = ingress.auth.authenticate(_authorization(headers))
        except APIError as exc:  # MCPEndpoint refused these already; kept for direct calls
            raise ToolFailure(exc.code, exc.message) from None
        return ServeBackend(ingress, principal)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[BackendResolver]:
        yield resolve

    server = build_mcp_server(lifespan)
    # Builds the session manager (the Starlette app it returns is not used: MCPEndpoint routes
    # to the manager itself, at /mcp exactly, with the key checked first). DNS-rebinding
    # protection is off: every request needs an API key, which a rebinding page cannot send,
    # and the Host a deployment is served behind is not known here.
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        max_request_body_size=max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    _replica["server"] = server
    return server


class MCPEndpoint:
    """The ASGI app routed at ``path`` (``/mcp``): the key check, then the SDK's session
    manager of the replica's Ingress. Holds only its path, so it travels with the FastAPI app
    Serve ships."""

    def __init__(self, path: str = "/mcp") -> None:
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from serve.host import current

        # The ingress's metrics label a request by scope["route"].path, which FastAPI sets for
        # its own routes only: without this, MCP requests would count as "unmatched".
        scope["route"] = self
        ingress = current()
        try:  # the key and its rate limit, as on /v1
            admit(ingress.auth, ingress.limiter, Headers(scope=scope).get("authorization"))
        except APIError as exc:
            response = error_response(exc.status, exc.code, exc.message, exc.field, exc.headers)
            await response(scope, receive, send)
            return
        await ingress.mcp.session_manager.handle_request(scope, receive, send)
