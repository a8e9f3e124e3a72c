"""Python SDK for the Memlane service: :class:`MemlaneClient` (sync) and
:class:`AsyncMemlaneClient` (asyncio), one method per endpoint, on httpx.

    from memlane_client import MemlaneClient
    with MemlaneClient("http://127.0.0.1:8000", api_key="KEY") as m:
        m.put_bank("alice", name="Alice")
        m.retain("alice", [{"content": "My dog is called Biscuit", "speaker": "Alice"}])
        hits = m.recall("alice", "What is the dog called?")["memories"]

Answers are the service's JSON as it is: memories, tree nodes and entities in the one shape
every client sees (the engine's ``memlane/views.py``: no vectors, no lexical context), which
this SDK passes through without adding or expecting fields.

Errors come back as :class:`MemlaneAPIError` with the HTTP status and the service's error
code, message and field. ``url`` and ``api_key`` default to MEMLANE_URL and MEMLANE_API_KEY.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

import httpx


class MemlaneAPIError(Exception):
    """An error answer of the service."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status, self.code, self.message, self.field = status, code, message, field


def _raise_for(resp: httpx.Response) -> Any:
    if resp.status_code < 400:
        return resp.json() if resp.content else None
    try:
        err = resp.json()["error"]
        raise MemlaneAPIError(
            resp.status_code, err.get("code", "error"), err.get("message", ""), err.get("field")
        )
    except (ValueError, KeyError, TypeError):
        raise MemlaneAPIError(resp.status_code, "error", resp.text[:500]) from None


def _text(resp: httpx.Response) -> str:
    """The body of a non-JSON answer (an export), or the API error."""
    if resp.status_code < 400:
        return resp.text
    _raise_for(resp)
    return ""  # not reached: _raise_for raised


def _ndjson(data: str | bytes | Iterable[dict]) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data).encode("utf-8")


def _options(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


class _Requests:
    """The endpoints as (method, path, body/params) triples, shared by both clients."""

    @staticmethod
    def put_bank(bank_id, name=None, background=None, disposition=None):
        return (
            "PUT",
            f"/v1/banks/{bank_id}",
            {"json": _options(name=name, background=background, disposition=disposition)},
        )

    @staticmethod
    def retain(bank_id, items: Iterable[dict | str], document_id=None, tags=None, wait=True):
        items = [{"content": i} if isinstance(i, str) else dict(i) for i in items]
        body = _options(items=items, document_id=document_id, tags=tags)
        body["async"] = not wait
        return "POST", f"/v1/banks/{bank_id}/memories", {"json": body}

    @staticmethod
    def recall(bank_id, query, **options):
        return "POST", f"/v1/banks/{bank_id}/recall", {"json": _options(query=query, **options)}

    @staticmethod
    def reflect(bank_id, query, **options):
        return "POST", f"/v1/banks/{bank_id}/reflect", {"json": _options(query=query, **options)}

    @staticmethod
    def list_memories(bank_id, offset=0, limit=100, types=None, document_id=None, **filters):
        # filters: tags (sent as repeated `tag`), tags_match, since, until (datetimes or ISO
        # strings), entity_id
        tags = filters.pop("tags", None)
        for key in ("since", "until"):
            if hasattr(filters.get(key), "isoformat"):
                filters[key] = filters[key].isoformat()
        params = _options(
            offset=offset, limit=limit, type=types, document_id=document_id, tag=tags, **filters
        )
        return "GET", f"/v1/banks/{bank_id}/memories", {"params": params}

    @staticmethod
    def tree(bank_id, level=None, since=None, until=None):
        # since/until: datetimes or ISO strings, sent as `from` and `to`
        params = _options(
            level=level,
            **{
                "from": since.isoformat() if hasattr(since, "isoformat") else since,
                "to": until.isoformat() if hasattr(until, "isoformat") else until,
            },
        )
        return "GET", f"/v1/banks/{bank_id}/tree", {"params": params}

    @staticmethod
    def consolidate(bank_id, consolidator=None, wait=True):
        body: dict[str, Any] = _options(consolidator=consolidator)
        body["async"] = not wait
        return "POST", f"/v1/banks/{bank_id}/consolidate", {"json": body}

    @staticmethod
    def export_bank(bank_id, vectors=False):
        return "GET", f"/v1/banks/{bank_id}/export", {"params": {"vectors": str(bool(vectors)).lower()}}

    @staticmethod
    def import_bank(bank_id, data):
        return (
            "POST",
            f"/v1/banks/{bank_id}/import",
            {"content": _ndjson(data), "headers": {"Content-Type": "application/x-ndjson"}},
        )


class MemlaneClient:
    """Synchronous client. Use as a context manager or call :meth:`close`."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        url = url or os.environ.get("MEMLANE_URL") or "http://127.0.0.1:8000"
        key = api_key if api_key is not None else os.environ.get("MEMLANE_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    def _do(self, method: str, path: str, kw: dict | None = None) -> Any:
        return _raise_for(self._http.request(method, path, **(kw or {})))

    def health(self) -> dict:
        return self._do("GET", "/v1/health")

    def list_banks(self) -> list[dict]:
        return self._do("GET", "/v1/banks")["banks"]

    def put_bank(
        self,
        bank_id: str,
        *,
        name: str | None = None,
        background: str | None = None,
        disposition: dict | None = None,
    ) -> dict:
        return self._do(*_Requests.put_bank(bank_id, name, background, disposition))

    def get_bank(self, bank_id: str) -> dict:
        return self._do("GET", f"/v1/banks/{bank_id}")

    def delete_bank(self, bank_id: str) -> dict:
        return self._do("DELETE", f"/v1/banks/{bank_id}")

    def stats(self, bank_id: str) -> dict:
        return self._do("GET", f"/v1/banks/{bank_id}/stats")

    def retain(
        self,
        bank_id: str,
        items: Iterable[dict | str],
        *,
        document_id: str | None = None,
        tags: list[str] | None = None,
        wait: bool = True,
    ) -> dict:
        """Retain items; ``wait=False`` returns the operation to poll with :meth:`operation`."""
        return self._do(*_Requests.retain(bank_id, items, document_id, tags, wait))

    def operation(self, bank_id: str, operation_id: str) -> dict:
        return self._do("GET", f"/v1/banks/{bank_id}/operations/{operation_id}")

    def recall(self, bank_id: str, query: str, **options: Any) -> dict:
        """Options: max_tokens, budget, types, tags, tags_match, as_of, reference_time,
        include_chunks, trace, levels (tree levels 1-5), planner ("auto", "rules", "llm",
        "off"); the answer's ``nodes`` and ``plan`` are the temporal tree's part."""
        return self._do(*_Requests.recall(bank_id, query, **options))

    def reflect(self, bank_id: str, query: str, **options: Any) -> dict:
        return self._do(*_Requests.reflect(bank_id, query, **options))

    def list_memories(
        self,
        bank_id: str,
        *,
        offset: int = 0,
        limit: int = 100,
        types: list[str] | None = None,
        document_id: str | None = None,
        **filters: Any,
    ) -> dict:
        """A page of memories; ``filters``: tags, tags_match, since, until, entity_id."""
        return self._do(*_Requests.list_memories(bank_id, offset, limit, types, document_id, **filters))

    def get_memory(self, bank_id: str, memory_id: str) -> dict:
        return self._do("GET", f"/v1/banks/{bank_id}/memories/{memory_id}")

    def delete_memory(self, bank_id: str, memory_id: str) -> dict:
        return self._do("DELETE", f"/v1/banks/{bank_id}/memories/{memory_id}")

    def list_documents(self, bank_id: str) -> list[dict]:
        return self._do("GET", f"/v1/banks/{bank_id}/documents")["documents"]

    def delete_document(self, bank_id: str, document_id: str) -> dict:
        return self._do("DELETE", f"/v1/banks/{bank_id}/documents/{document_id}")

    def list_entities(self, bank_id: str) -> list[dict]:
        return self._do("GET", f"/v1/banks/{bank_id}/entities")["entities"]

    def get_entity(self, bank_id: str, entity_id: str, *, limit: int = 50) -> dict:
        """An entity with the memories that name it and its neighbours."""
        return self._do("GET", f"/v1/banks/{bank_id}/entities/{entity_id}", {"params": {"limit": limit}})

    def timeline(self, bank_id: str) -> list[dict]:
        """The bank's sessions (document, session, start, end, chunks, turns) by start."""
        return self._do("GET", f"/v1/banks/{bank_id}/timeline")["sessions"]

    def tree(
        self,
        bank_id: str,
        *,
        level: int | str | None = None,
        since: Any = None,
        until: Any = None,
    ) -> list[dict]:
        """The bank's temporal tree nodes (level 2-5 or its name; nodes overlapping
        [since, until), datetimes or ISO strings), by level then start."""
        return self._do(*_Requests.tree(bank_id, level, since, until))["nodes"]

    def consolidate(self, bank_id: str, *, consolidator: str | None = None, wait: bool = True) -> dict:
        """Consolidate the bank's tree now: the report (``wait=False``: the operation to poll
        with :meth:`operation`). ``consolidator``: "auto", "rules" or "llm"."""
        return self._do(*_Requests.consolidate(bank_id, consolidator, wait))

    def export_bank(self, bank_id: str, *, vectors: bool = False) -> str:
        """The bank as JSON Lines (memlane/transfer.py); ``vectors`` adds unit embeddings."""
        method, path, kw = _Requests.export_bank(bank_id, vectors)
        return _text(self._http.request(method, path, **kw))

    def import_bank(self, bank_id: str, data: str | bytes | Iterable[dict]) -> dict:
        """Import an export (its text, or its records) as ``bank_id``; idempotent."""
        return self._do(*_Requests.import_bank(bank_id, data))

    def rerank(self, query: str, documents: list[str]) -> list[float]:
        return self._do("POST", "/v1/rerank", {"json": {"query": query, "documents": documents}})["scores"]

    # curated memory: mental models and directives
    def put_mental_model(self, bank_id: str, model_id: str, question: str) -> dict:
        """Pin ``question`` on the bank as ``model_id`` and answer it now (idempotent)."""
        return self._do("PUT", f"/v1/banks/{bank_id}/models/{model_id}", {"json": {"question": question}})

    def list_mental_models(self, bank_id: str) -> list[dict]:
        return self._do("GET", f"/v1/banks/{bank_id}/models")["models"]

    def get_mental_model(self, bank_id: str, model_id: str) -> dict:
        """The model's question, answer and sources."""
        return self._do("GET", f"/v1/banks/{bank_id}/models/{model_id}")

    def refresh_mental_model(self, bank_id: str, model_id: str) -> dict:
        return self._do("POST", f"/v1/banks/{bank_id}/models/{model_id}/refresh")

    def delete_mental_model(self, bank_id: str, model_id: str) -> dict:
        return self._do("DELETE", f"/v1/banks/{bank_id}/models/{model_id}")

    def put_directive(
        self, bank_id: str, directive_id: str, text: str, tags: list[str] | None = None
    ) -> dict:
        """Create or replace a rule for reflect, scoped to ``tags`` (none: every reflect)."""
        body = {"text": text, "tags": list(tags or [])}
        return self._do("PUT", f"/v1/banks/{bank_id}/directives/{directive_id}", {"json": body})

    def list_directives(self, bank_id: str) -> list[dict]:
        return self._do("GET", f"/v1/banks/{bank_id}/directives")["directives"]

    def delete_directive(self, bank_id: str, directive_id: str) -> dict:
        return self._do("DELETE", f"/v1/banks/{bank_id}/directives/{directive_id}")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemlaneClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncMemlaneClient:
    """The same endpoints for asyncio; use ``async with`` or ``await aclose()``."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        limits: httpx.Limits | None = None,
    ) -> None:
        url = url or os.environ.get("MEMLANE_URL") or "http://127.0.0.1:8000"
        key = api_key if api_key is not None else os.environ.get("MEMLANE_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers=headers,
            timeout=timeout,
            limits=limits or httpx.Limits(max_connections=100),
        )

    async def _do(self, method: str, path: str, kw: dict | None = None) -> Any:
        return _raise_for(await self._http.request(method, path, **(kw or {})))

    async def health(self) -> dict:
        return await self._do("GET", "/v1/health")

    async def list_banks(self) -> list[dict]:
        return (await self._do("GET", "/v1/banks"))["banks"]

    async def put_bank(
        self,
        bank_id: str,
        *,
        name: str | None = None,
        background: str | None = None,
        disposition: dict | None = None,
    ) -> dict:
        return await self._do(*_Requests.put_bank(bank_id, name, background, disposition))

    async def get_bank(self, bank_id: str) -> dict:
        return await self._do("GET", f"/v1/banks/{bank_id}")

    async def delete_bank(self, bank_id: str) -> dict:
        return await self._do("DELETE", f"/v1/banks/{bank_id}")

    async def retain(
        self,
        bank_id: str,
        items: Iterable[dict | str],
        *,
        document_id: str | None = None,
        tags: list[str] | None = None,
        wait: bool = True,
    ) -> dict:
        return await self._do(*_Requests.retain(bank_id, items, document_id, tags, wait))

    async def operation(self, bank_id: str, operation_id: str) -> dict:
        return await self._do("GET", f"/v1/banks/{bank_id}/operations/{operation_id}")

    async def recall(self, bank_id: str, query: str, **options: Any) -> dict:
        return await self._do(*_Requests.recall(bank_id, query, **options))

    async def reflect(self, bank_id: str, query: str, **options: Any) -> dict:
        return await self._do(*_Requests.reflect(bank_id, query, **options))

    async def list_memories(
        self,
        bank_id: str,
        *,
        offset: int = 0,
        limit: int = 100,
        types: list[str] | None = None,
        document_id: str | None = None,
        **filters: Any,
    ) -> dict:
        """A page of memories; ``filters``: tags, tags_match, since, until, entity_id."""
        return await self._do(*_Requests.list_memories(bank_id, offset, limit, types, document_id, **filters))

    async def delete_document(self, bank_id: str, document_id: str) -> dict:
        return await self._do("DELETE", f"/v1/banks/{bank_id}/documents/{document_id}")

    async def tree(
        self,
        bank_id: str,
        *,
        level: int | str | None = None,
        since: Any = None,
        until: Any = None,
    ) -> list[dict]:
        """The bank's temporal tree nodes (level 2-5 or its name; nodes overlapping
        [since, until), datetimes or ISO strings), by level then start."""
        return (await self._do(*_Requests.tree(bank_id, level, since, until)))["nodes"]

    async def consolidate(self, bank_id: str, *, consolidator: str | None = None, wait: bool = True) -> dict:
        """Consolidate the bank's tree now: the report (``wait=False``: the operation to poll
        with :meth:`operation`). ``consolidator``: "auto", "rules" or "llm"."""
        return await self._do(*_Requests.consolidate(bank_id, consolidator, wait))

    async def export_bank(self, bank_id: str, *, vectors: bool = False) -> str:
        """The bank as JSON Lines (memlane/transfer.py); ``vectors`` adds unit embeddings."""
        method, path, kw = _Requests.export_bank(bank_id, vectors)
        return _text(await self._http.request(method, path, **kw))

    async def import_bank(self, bank_id: str, data: str | bytes | Iterable[dict]) -> dict:
        """Import an export (its text, or its records) as ``bank_id``; idempotent."""
        return await self._do(*_Requests.import_bank(bank_id, data))

    # curated memory: mental models and directives
    async def put_mental_model(self, bank_id: str, model_id: str, question: str) -> dict:
        """Pin ``question`` on the bank as ``model_id`` and answer it now (idempotent)."""
        return await self._do(
            "PUT", f"/v1/banks/{bank_id}/models/{model_id}", {"json": {"question": question}}
        )

    async def list_mental_models(self, bank_id: str) -> list[dict]:
        return (await self._do("GET", f"/v1/banks/{bank_id}/models"))["models"]

    async def get_mental_model(self, bank_id: str, model_id: str) -> dict:
        """The model's question, answer and sources."""
        return await self._do("GET", f"/v1/banks/{bank_id}/models/{model_id}")

    async def refresh_mental_model(self, bank_id: str, model_id: str) -> dict:
        return await self._do("POST", f"/v1/banks/{bank_id}/models/{model_id}/refresh")

    async def delete_mental_model(self, bank_id: str, model_id: str) -> dict:
        return await self._do("DELETE", f"/v1/banks/{bank_id}/models/{model_id}")

    async def put_directive(
        self, bank_id: str, directive_id: str, text: str, tags: list[str] | None = None
    ) -> dict:
        """Create or replace a rule for reflect, scoped to ``tags`` (none: every reflect)."""
        body = {"text": text, "tags": list(tags or [])}
        return await self._do("PUT", f"/v1/banks/{bank_id}/directives/{directive_id}", {"json": body})

    async def list_directives(self, bank_id: str) -> list[dict]:
        return (await self._do("GET", f"/v1/banks/{bank_id}/directives"))["directives"]

    async def delete_directive(self, bank_id: str, directive_id: str) -> dict:
        return await self._do("DELETE", f"/v1/banks/{bank_id}/directives/{directive_id}")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemlaneClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
