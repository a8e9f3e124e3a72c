"""What the HTTP app calls for everything but recall and reflect (which run on the host's own
engine, serve/bank_host.py): the catalogue's operations that write or list, retain and
consolidation in the background, export and import, health. One interface, two
implementations, so the routes never ask which runtime they run on:

* :class:`DeploymentWrites`: the Memory deployment through its Serve DeploymentHandle (the
  Ray runtime: writes scaled apart from recall, replicas on other machines);
* :class:`LocalWrites`: :class:`serve.engine_host.MemoryWrites` on the engine of this process
  (the one-process runtime, serve/process.py), each call on a worker thread.

Errors are the engine's own in both (the routes map them to HTTP, serve/errors.py).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from serve.engine_host import MemoryWrites


class Writes(Protocol):
    """The operations the app runs on the writes' side."""

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any: ...

    async def retain_async(
        self, bank_id: str, body: dict[str, Any], operation_id: str | None = None
    ) -> dict[str, Any]: ...

    async def consolidate_async(self, bank_id: str, consolidator: str | None) -> dict[str, Any]: ...

    async def operation(self, bank_id: str, operation_id: str) -> dict[str, Any]: ...

    async def export_bank(self, bank_id: str, vectors: bool) -> bytes: ...

    async def import_bank(self, bank_id: str, body: bytes) -> dict[str, Any]: ...

    async def health(self) -> dict[str, Any]: ...


class DeploymentWrites:
    """The Memory deployment's replicas, through a DeploymentHandle."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        return await self.handle.call.remote(name, bank_id, params)

    async def retain_async(
        self, bank_id: str, body: dict[str, Any], operation_id: str | None = None
    ) -> dict[str, Any]:
        return await self.handle.retain_async.remote(bank_id, body, operation_id)

    async def consolidate_async(self, bank_id: str, consolidator: str | None) -> dict[str, Any]:
        return await self.handle.consolidate_async.remote(bank_id, consolidator)

    async def operation(self, bank_id: str, operation_id: str) -> dict[str, Any]:
        return await self.handle.operation.remote(bank_id, operation_id)

    async def export_bank(self, bank_id: str, vectors: bool) -> bytes:
        return await self.handle.export_bank.remote(bank_id, vectors)

    async def import_bank(self, bank_id: str, body: bytes) -> dict[str, Any]:
        return await self.handle.import_bank.remote(bank_id, body)

    async def health(self) -> dict[str, Any]:
        return await self.handle.health.remote()


class LocalWrites:
    """:class:`MemoryWrites` in this process: the engine's calls block, so each runs on a
    worker thread (asyncio's default pool), as a Serve replica runs a sync method."""

    def __init__(self, writes: MemoryWrites) -> None:
        self.writes = writes

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        return await asyncio.to_thread(self.writes.call, name, bank_id, params)

    async def retain_async(
        self, bank_id: str, body: dict[str, Any], operation_id: str | None = None
    ) -> dict[str, Any]:
        return await asyncio.to_thread(self.writes.retain_async, bank_id, body, operation_id)

    async def consolidate_async(self, bank_id: str, consolidator: str | None) -> dict[str, Any]:
        return await asyncio.to_thread(self.writes.consolidate_async, bank_id, consolidator)

    async def operation(self, bank_id: str, operation_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.writes.operation, bank_id, operation_id)

    async def export_bank(self, bank_id: str, vectors: bool) -> bytes:
        return await asyncio.to_thread(self.writes.export_bank, bank_id, vectors)

    async def import_bank(self, bank_id: str, body: bytes) -> dict[str, Any]:
        return await asyncio.to_thread(self.writes.import_bank, bank_id, body)

    async def health(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.writes.health)
