"""The Hindsight-compatible surface's operations: each takes Hindsight's ids and bodies, runs
the catalogue's operations on a backend (serve/hindsight/backend.py) and answers Hindsight's
shapes. The HTTP routes (serve/hindsight/routes.py) and the MCP tools (serve/hindsight/mcp.py)
both call these, so each of this surface's rules is applied once:

* a missing bank is created by a write (create_bank, retain sync and async, reflect, a config
  update), as Hindsight does, on this surface only (the ``/v1`` API keeps refusing); its id
  checked by Hindsight's rules when it is created;
* Hindsight's ids are Memlane's through serve/hindsight/bank_ids.py;
* what a field means is serve/hindsight/requests.py's and answers.py's.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol

from serve.errors import APIError
from serve.hindsight import answers
from serve.hindsight.bank_ids import BankIdError, check_new, to_memlane
from serve.hindsight.requests import (
    BankBody,
    ConfigUpdateBody,
    RecallBody,
    ReflectBody,
    RetainBody,
    bank_params,
    config_params,
    recall_params,
    reflect_params,
    retain_params,
)

# How many of a listing page's documents are read at once: a row's times and text length are
# the document's own (get_document), and a page is 100 documents by default, which would all
# queue on the Memory deployment at once otherwise.
DOCUMENT_READS = 8


class Backend(Protocol):
    """The operations the surface runs (serve/hindsight/backend.py's IngressBackend)."""

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any: ...
    async def recall(self, bank_id: str, params: dict[str, Any]) -> dict[str, Any]: ...
    async def reflect(self, bank_id: str, params: dict[str, Any]) -> dict[str, Any]: ...
    async def retain_async(self, bank_id: str, body: dict[str, Any], operation_id: str) -> dict[str, Any]: ...
    async def operation(self, bank_id: str, operation_id: str) -> dict[str, Any]: ...
    async def health(self) -> dict[str, Any]: ...
    def features(self) -> dict[str, bool]: ...


def memlane_bank(bank_id: str, *, new: bool = False) -> str:
    """Memlane's id of Hindsight's ``bank_id`` (``new``: also Hindsight's rules for a bank
    about to be created); 400 naming the rule otherwise."""
    try:
        return to_memlane(check_new(bank_id) if new else bank_id)
    except BankIdError as exc:
        raise APIError(400, "invalid_bank_id", str(exc), "bank_id") from None


def _missing_bank(exc: APIError) -> bool:
    return exc.status == 404 and exc.code == "bank_not_found"


class Surface:
    """The operations of the Hindsight-compatible surface over one backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def _bank_view(self, bank: str) -> dict[str, Any] | None:
        try:
            return await self.backend.call("get_bank", bank, {})
        except APIError as exc:
            if _missing_bank(exc):
                return None
            raise

    async def _create(self, bank_id: str, bank: str) -> None:
        """Create the missing bank ``bank`` (Hindsight's ``bank_id``): unnamed, so no speaker
        is taken for its owner (memlane/retain: a bank's name types its owner's turns)."""
        memlane_bank(bank_id, new=True)
        await self.backend.call("put_bank", bank, {"name": ""})

    async def _creating(self, bank_id: str, bank: str, run: Callable[[], Any]) -> Any:
        """``run()``, creating the bank first when it answers that the bank is missing."""
        try:
            return await run()
        except APIError as exc:
            if not _missing_bank(exc):
                raise
        await self._create(bank_id, bank)
        return await run()

    # service ----------------------------------------------------------------------------------
    async def health(self) -> tuple[int, dict[str, Any]]:
        try:
            await self.backend.health()
        except Exception as exc:  # noqa: BLE001 - the store's state is the answer
            return 503, {"status": "unhealthy", "database": f"unreachable: {type(exc).__name__}"}
        return 200, {"status": "healthy", "database": "connected"}

    def version(self) -> dict[str, Any]:
        return answers.version(self.backend.features())

    # banks ------------------------------------------------------------------------------------
    async def put_bank(self, bank_id: str, body: BankBody) -> dict[str, Any]:
        """Create the bank or update the fields given; its profile."""
        current = await self._bank_view(memlane_bank(bank_id))
        bank = memlane_bank(bank_id, new=current is None)
        out = await self.backend.call("put_bank", bank, bank_params(body, current))
        return answers.profile(bank_id, out["bank"])

    async def get_bank(self, bank_id: str) -> dict[str, Any]:
        return answers.profile(bank_id, await self.backend.call("get_bank", memlane_bank(bank_id), {}))

    async def config(self, bank_id: str) -> dict[str, Any]:
        return answers.bank_config(bank_id, await self.backend.call("get_bank", memlane_bank(bank_id), {}))

    async def update_config(self, bank_id: str, body: ConfigUpdateBody) -> tuple[dict[str, Any], list[str]]:
        """Apply the updates Memlane keeps per bank (creating the bank); the config, and the
        keys ignored."""
        fields, ignored = config_params(body)
        await self.put_bank(bank_id, fields)
        return await self.config(bank_id), ignored

    async def delete_bank(self, bank_id: str) -> dict[str, Any]:
        """Delete the bank; a missing one is deleted already (Hindsight answers it alike)."""
        try:
            await self.backend.call("delete_bank", memlane_bank(bank_id), {})
        except APIError as exc:
            if not _missing_bank(exc):
                raise
            return {"success": True, "message": f"Bank '{bank_id}' does not exist", "deleted_count": 0}
        return {"success": True, "message": f"Bank '{bank_id}' deleted", "deleted_count": None}

    async def list_banks(
        self, can_use: Callable[[str], bool], q: str | None, limit: int, offset: int
    ) -> dict[str, Any]:
        banks = [b for b in await self.backend.call("list_banks", None, {}) if can_use(b["bank_id"])]
        return answers.bank_list(banks, q, limit, offset)

    async def stats(self, bank_id: str) -> dict[str, Any]:
        bank = memlane_bank(bank_id)
        counts = await self.backend.call("bank_stats", bank, {})
        documents = await self.backend.call("list_documents", bank, {})
        return answers.stats(bank_id, counts, len(documents))

    # retain -----------------------------------------------------------------------------------
    async def retain(self, bank_id: str, body: RetainBody) -> dict[str, Any]:
        """Retain the items (creating the bank), or with ``async`` queue them as an operation
        whose Hindsight id is the request's ``operation_id`` (a UUID) or a new one."""
        bank = memlane_bank(bank_id)
        params = retain_params(body)
        if not body.async_:
            await self._creating(bank_id, bank, lambda: self.backend.call("retain", bank, params))
            return answers.retained(bank_id, len(body.items))
        op_id = answers.memlane_operation(body.operation_id) if body.operation_id else None
        if body.operation_id and op_id is None:
            raise APIError(422, "invalid_request", "operation_id: must be a UUID", "operation_id")
        if op_id is None:
            import uuid

            op_id = answers.memlane_operation(str(uuid.uuid4()))
        if await self._bank_view(bank) is None:
            await self._create(bank_id, bank)
        op = await self.backend.retain_async(bank, {"items": params["items"], "tags": []}, op_id or "")
        return answers.retained(bank_id, len(body.items), op)

    async def operation(self, bank_id: str, operation_id: str) -> dict[str, Any]:
        """An operation's status; an unknown id is status not_found, a non-UUID a 400."""
        op_id = answers.memlane_operation(operation_id)
        if op_id is None:
            raise APIError(
                400, "invalid_request", f"operation_id: not a UUID: {operation_id!r}", "operation_id"
            )
        try:
            op = await self.backend.operation(memlane_bank(bank_id), op_id)
        except APIError as exc:
            if exc.status != 404 or _missing_bank(exc):
                raise
            op = None
        return answers.operation(op, operation_id)

    # recall and reflect -----------------------------------------------------------------------
    async def recall(self, bank_id: str, body: RecallBody) -> dict[str, Any]:
        params = recall_params(body)
        if not params["types"]:  # only "opinion" asked: Hindsight answers nothing
            return {"results": []}
        bank = memlane_bank(bank_id)
        view = await self.backend.recall(bank, params)
        entities = body.include.entities if body.include else None
        names = None
        if entities is not None:
            rows = await self.backend.call("list_entities", bank, {})
            names = {e["entity_id"]: e["name"] for e in rows}
        # The tree's summaries are the bank's as a whole: given only when no tag narrows recall.
        whole = params["tags"] is None and params["tags_match"] != "exact"
        return answers.recall(
            view,
            names=names,
            entity_tokens=entities.max_tokens if entities is not None else 0,
            with_nodes=whole and "observation" in params["types"],
            trace=body.trace,
        )

    async def reflect(self, bank_id: str, body: ReflectBody) -> dict[str, Any]:
        """Reflect (creating the bank). No LLM is a 400 here, as on Hindsight (the client
        retries a 503)."""
        bank = memlane_bank(bank_id)
        params = reflect_params(body)
        try:
            view = await self._creating(bank_id, bank, lambda: self.backend.reflect(bank, params))
        except APIError as exc:
            if exc.code == "llm_not_configured":
                raise APIError(400, exc.code, exc.message) from None
            raise
        include = body.include
        return answers.reflect(
            view,
            facts=include is not None and include.facts is not None,
            tool_calls=include is not None and include.tool_calls is not None,
        )

    # documents --------------------------------------------------------------------------------
    async def documents(self, bank_id: str, q: str | None, limit: int, offset: int) -> dict[str, Any]:
        """The listing's page, each document read as the store holds it (its times, text
        length, tags: the listing itself only counts), a few at a time."""
        bank = memlane_bank(bank_id)
        rows = await self.backend.call("list_documents", bank, {"q": q} if q else {})
        ids = sorted(r["document_id"] for r in rows)
        gate = asyncio.Semaphore(DOCUMENT_READS)

        async def read(document_id: str) -> dict[str, Any] | None:
            async with gate:
                try:
                    return await self.backend.call("get_document", bank, {"document_id": document_id})
                except APIError as exc:
                    if exc.status == 404:  # deleted since it was listed
                        return None
                    raise

        page = await asyncio.gather(*(read(d) for d in ids[offset : offset + limit]))
        return answers.document_list(bank_id, len(ids), [d for d in page if d], q, limit, offset)

    async def document(self, bank_id: str, document_id: str) -> dict[str, Any]:
        doc = await self.backend.call("get_document", memlane_bank(bank_id), {"document_id": document_id})
        return answers.document(bank_id, doc)

    async def delete_document(self, bank_id: str, document_id: str) -> dict[str, Any]:
        counts = await self.backend.call(
            "delete_document", memlane_bank(bank_id), {"document_id": document_id}
        )
        return answers.document_deleted(document_id, counts)

    # mental models (MCP) ----------------------------------------------------------------------
    async def put_mental_model(self, bank_id: str, model_id: str, question: str) -> dict[str, Any]:
        out = await self.backend.call(
            "put_mental_model", memlane_bank(bank_id), {"model_id": model_id, "question": question}
        )
        return answers.mental_model(bank_id, out["model"])

    async def mental_model(self, bank_id: str, name: str, model_id: str | None = None) -> Any:
        """``name``: list_mental_models, get_, refresh_ or delete_mental_model."""
        params = {} if model_id is None else {"model_id": model_id}
        out = await self.backend.call(name, memlane_bank(bank_id), params)
        if name == "list_mental_models":
            return {"items": [answers.mental_model(bank_id, m) for m in out]}
        if name == "delete_mental_model":
            return {"status": "deleted", "mental_model_id": model_id}
        return answers.mental_model(bank_id, out)
