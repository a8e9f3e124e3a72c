"""The MCP tools' backends for ``memlane mcp`` (stdio): the embedded engine over a data
directory, and a running service through the HTTP SDK. Neither imports Ray, so the stdio
server starts without it. The Serve backend of the ``/mcp`` endpoint is ``serve/mcp_http.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from memlane import catalogue
from serve.mcp_server import BackendResolver, ToolFailure

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from memlane.engine import Memory
    from memlane_client import AsyncMemlaneClient


class EngineBackend:
    """The engine in this process (:class:`memlane.engine.Memory`). Its calls block, so they
    run on a worker thread, one at a time: the engine is used as the CLI uses it, by one
    caller, and concurrent tool calls from one desktop agent are rare enough to queue."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self._one_at_a_time = anyio.CapacityLimiter(1)

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=self._one_at_a_time)

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        return await self._run(catalogue.call, self.memory, name, bank_id, **params)


class ClientBackend:
    """A running Memlane service through :class:`memlane_client.AsyncMemlaneClient`; the
    service enforces its key's bank permissions (403 becomes a ``forbidden`` tool error), and
    a service that cannot be reached is a ``service_unreachable`` tool error naming the URL."""

    def __init__(self, client: AsyncMemlaneClient, url: str) -> None:
        self.client, self.url = client, url

    async def _do(self, method: str, *args: Any, **kwargs: Any) -> Any:
        import httpx

        try:
            return await getattr(self.client, method)(*args, **kwargs)
        except httpx.HTTPError as exc:
            raise ToolFailure(
                "service_unreachable", f"cannot reach {self.url}: {type(exc).__name__}: {exc}"
            ) from None

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        if name == "put_bank":  # the SDK answers the bank; the tool also says if it was new
            return await self._put_bank(bank_id or "", params)
        op = catalogue.operation(name)
        args = (bank_id,) if op.bank else ()
        return await self._do(op.sdk_method or name, *args, **params)

    async def _put_bank(self, bank_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        from memlane_client import MemlaneAPIError

        try:
            await self._do("get_bank", bank_id)
            created = False
        except MemlaneAPIError as exc:
            if exc.status != 404:
                raise
            created = True
        bank = await self._do("put_bank", bank_id, **fields)
        return {"bank": bank, "created": created}


def engine_lifespan(
    open_memory: Callable[[], Memory],
) -> Callable[[MCPServer], AbstractAsyncContextManager[BackendResolver]]:
    """The MCP server's lifespan over the embedded engine: opened when the server starts
    (over stdio that is after the SDK has moved fd 1 off the wire, so nothing the engine or
    Milvus Lite prints can reach the protocol stream) and closed when it stops."""

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[BackendResolver]:
        memory = await anyio.to_thread.run_sync(open_memory)
        try:
            # Open the store now (the engine opens it on first use): a data directory that
            # cannot be used stops the server at start, not at the agent's first call.
            await anyio.to_thread.run_sync(memory.banks.list_all)
        except BaseException:
            await anyio.to_thread.run_sync(memory.close)
            raise
        backend = EngineBackend(memory)
        try:
            yield lambda _headers: backend
        finally:
            await anyio.to_thread.run_sync(memory.close)

    return lifespan


def client_lifespan(
    url: str, api_key: str | None
) -> Callable[[MCPServer], AbstractAsyncContextManager[BackendResolver]]:
    """The MCP server's lifespan over a running service at ``url``."""

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[BackendResolver]:
        from memlane_client import AsyncMemlaneClient

        async with AsyncMemlaneClient(url, api_key, timeout=120.0) as client:
            backend = ClientBackend(client, url)
            yield lambda _headers: backend

    return lifespan
