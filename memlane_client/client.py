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


def _iso(when: Any) -> Any:
    return when.isoformat() if hasattr(when, "isoformat") else when


class _Endpoints:
    """One method per endpoint, shared by both clients: each builds its request and hands it
    to ``_send``, which the sync client runs at once and the async client returns as a
    coroutine (so ``await client.recall(...)`` on the async one). The operations and their
    names are memlane/catalogue.py's; tests/serving/test_catalogue.py checks this class
    against it."""

    def _send(self, method: str, path: str, kw: dict | None = None, pick: str | None = None) -> Any:
        raise NotImplementedError

    def _send_text(self, method: str, path: str, kw: dict) -> Any:
        raise NotImplementedError

    def health(self) -> Any:
        return self._send("GET", "/v1/health")

    def rerank(self, query: str, documents: list[str]) -> Any:
        """The cross-encoder's scores of ``documents`` for ``query``."""
        body = {"query": query, "documents": documents}
        return self._send("POST", "/v1/rerank", {"json": body}, pick="scores")

    # banks
    def list_banks(self) -> Any:
        return self._send("GET", "/v1/banks", pick="banks")

    def put_bank(
        self,
        bank_id: str,
        *,
        name: str | None = None,
        background: str | None = None,
        disposition: dict | None = None,
    ) -> Any:
        """Create the bank, or update the fields given."""
        body = _options(name=name, background=background, disposition=disposition)
        return self._send("PUT", f"/v1/banks/{bank_id}", {"json": body})

    def get_bank(self, bank_id: str) -> Any:
        return self._send("GET", f"/v1/banks/{bank_id}")

    def delete_bank(self, bank_id: str) -> Any:
        return self._send("DELETE", f"/v1/banks/{bank_id}")

    def stats(self, bank_id: str) -> Any:
        return self._send("GET", f"/v1/banks/{bank_id}/stats")

    def export_bank(self, bank_id: str, *, vectors: bool = False) -> Any:
        """The bank as JSON Lines text (memlane/transfer.py); ``vectors`` adds unit embeddings."""
        params = {"vectors": str(bool(vectors)).lower()}
        return self._send_text("GET", f"/v1/banks/{bank_id}/export", {"params": params})

    def import_bank(self, bank_id: str, data: str | bytes | Iterable[dict]) -> Any:
        """Import an export (its text, or its records) as ``bank_id``; idempotent."""
        kw = {"content": _ndjson(data), "headers": {"Content-Type": "application/x-ndjson"}}
        return self._send("POST", f"/v1/banks/{bank_id}/import", kw)

    # retain and operations
    def retain(
        self,
        bank_id: str,
        items: Iterable[dict | str],
        *,
        document_id: str | None = None,
        tags: list[str] | None = None,
        wait: bool = True,
    ) -> Any:
        """Retain items; ``wait=False`` returns the operation to poll with :meth:`operation`."""
        rows = [{"content": i} if isinstance(i, str) else dict(i) for i in items]
        body = _options(items=rows, document_id=document_id, tags=tags)
        body["async"] = not wait
        return self._send("POST", f"/v1/banks/{bank_id}/memories", {"json": body})

    def operation(self, bank_id: str, operation_id: str) -> Any:
        return self._send("GET", f"/v1/banks/{bank_id}/operations/{operation_id}")

    # recall and reflect
    def recall(self, bank_id: str, query: str, **options: Any) -> Any:
        """Options: max_tokens, budget, types, tags, tags_match, as_of, reference_time,
        include_chunks, trace, levels (tree levels 1-5), planner ("auto", "rules", "llm",
        "off"); the answer's ``nodes`` and ``plan`` are the temporal tree's part."""
        body = _options(query=query, **options)
        return self._send("POST", f"/v1/banks/{bank_id}/recall", {"json": body})

    def reflect(self, bank_id: str, query: str, **options: Any) -> Any:
        """Options: the fields of the service's ReflectRequest (max_tokens, budget, ...)."""
        body = _options(query=query, **options)
        return self._send("POST", f"/v1/banks/{bank_id}/reflect", {"json": body})

    # reading and deleting
    def list_memories(
        self,
        bank_id: str,
        *,
        offset: int = 0,
        limit: int = 100,
        types: list[str] | None = None,
        document_id: str | None = None,
        tags: list[str] | None = None,
        tags_match: str | None = None,
        since: Any = None,
        until: Any = None,
        entity_id: str | None = None,
    ) -> Any:
        """A page of memories (``items``, ``total``); the filters combine. ``since`` /
        ``until``: datetimes or ISO strings."""
        params = _options(
            offset=offset,
            limit=limit,
            type=types,
            document_id=document_id,
            tag=tags,
            tags_match=tags_match,
            since=_iso(since),
            until=_iso(until),
            entity_id=entity_id,
        )
        return self._send("GET", f"/v1/banks/{bank_id}/memories", {"params": params})

    def get_memory(self, bank_id: str, memory_id: str) -> Any:
        return self._send("GET", f"/v1/banks/{bank_id}/memories/{memory_id}")

    def delete_memory(self, bank_id: str, memory_id: str) -> Any:
        return self._send("DELETE", f"/v1/banks/{bank_id}/memories/{memory_id}")

    def list_documents(self, bank_id: str, *, q: str | None = None) -> Any:
        """The bank's documents with their counts; ``q``: those whose id or text holds it."""
        params = _options(q=q)
        return self._send("GET", f"/v1/banks/{bank_id}/documents", {"params": params}, pick="documents")

    def get_document(self, bank_id: str, document_id: str) -> Any:
        """A document with its text as retained, its counts and tags."""
        return self._send("GET", f"/v1/banks/{bank_id}/documents/{document_id}")

    def delete_document(self, bank_id: str, document_id: str) -> Any:
        return self._send("DELETE", f"/v1/banks/{bank_id}/documents/{document_id}")

    def list_entities(self, bank_id: str) -> Any:
        return self._send("GET", f"/v1/banks/{bank_id}/entities", pick="entities")

    def get_entity(self, bank_id: str, entity_id: str, *, limit: int = 50) -> Any:
        """An entity with the memories that name it and its neighbours."""
        return self._send("GET", f"/v1/banks/{bank_id}/entities/{entity_id}", {"params": {"limit": limit}})

    def timeline(self, bank_id: str) -> Any:
        """The bank's sessions (document, session, start, end, chunks, turns) by start."""
        return self._send("GET", f"/v1/banks/{bank_id}/timeline", pick="sessions")

    # the temporal tree
    def tree(
        self, bank_id: str, *, level: int | str | None = None, since: Any = None, until: Any = None
    ) -> Any:
        """The bank's temporal tree nodes (level 2-5 or its name; nodes overlapping
        [since, until), datetimes or ISO strings), by level then start."""
        params = _options(level=level, **{"from": _iso(since), "to": _iso(until)})
        return self._send("GET", f"/v1/banks/{bank_id}/tree", {"params": params}, pick="nodes")

    def consolidate(self, bank_id: str, *, consolidator: str | None = None, wait: bool = True) -> Any:
        """Consolidate the bank's tree now: the report (``wait=False``: the operation to poll
        with :meth:`operation`). ``consolidator``: "auto", "rules" or "llm"."""
        body: dict[str, Any] = _options(consolidator=consolidator)
        body["async"] = not wait
        return self._send("POST", f"/v1/banks/{bank_id}/consolidate", {"json": body})

    # curated memory: mental models and directives
    def put_mental_model(self, bank_id: str, model_id: str, question: str) -> Any:
        """Pin ``question`` on the bank as ``model_id`` and answer it now (idempotent)."""
        return self._send("PUT", f"/v1/banks/{bank_id}/models/{model_id}", {"json": {"question": question}})

    def list_mental_models(self, bank_id: str) -> Any:
        return self._send("GET", f"/v1/banks/{bank_id}/models", pick="models")

    def get_mental_model(self, bank_id: str, model_id: str) -> Any:
        """The model's question, answer and sources."""
        return self._send("GET", f"/v1/banks/{bank_id}/models/{model_id}")

    def refresh_mental_model(self, bank_id: str, model_id: str) -> Any:
        return self._send("POST", f"/v1/banks/{bank_id}/models/{model_id}/refresh")

    def delete_mental_model(self, bank_id: str, model_id: str) -> Any:
        return self._send("DELETE", f"/v1/banks/{bank_id}/models/{model_id}")

    def put_directive(self, bank_id: str, directive_id: str, text: str, tags: list[str] | None = None) -> Any:
        """Create or replace a rule for reflect, scoped to ``tags`` (none: every reflect)."""
        body = {"text": text, "tags": list(tags or [])}
        return self._send("PUT", f"/v1/banks/{bank_id}/directives/{directive_id}", {"json": body})

    def list_directives(self, bank_id: str) -> Any:
        return self._send("GET", f"/v1/banks/{bank_id}/directives", pick="directives")

    def delete_directive(self, bank_id: str, directive_id: str) -> Any:
        return self._send("DELETE", f"/v1/banks/{bank_id}/directives/{directive_id}")


def _picked(value: Any, pick: str | None) -> Any:
    return value[pick] if pick is not None else value


class MemlaneClient(_Endpoints):
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

    def _send(self, method: str, path: str, kw: dict | None = None, pick: str | None = None) -> Any:
        return _picked(_raise_for(self._http.request(method, path, **(kw or {}))), pick)

    def _send_text(self, method: str, path: str, kw: dict) -> Any:
        return _text(self._http.request(method, path, **kw))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemlaneClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncMemlaneClient(_Endpoints):
    """The same endpoints for asyncio (each method returns a coroutine to await); use
    ``async with`` or ``await aclose()``."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        limits: httpx.Limits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url = url or os.environ.get("MEMLANE_URL") or "http://127.0.0.1:8000"
        key = api_key if api_key is not None else os.environ.get("MEMLANE_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers=headers,
            timeout=timeout,
            limits=limits or httpx.Limits(max_connections=100),
            transport=transport,
        )

    async def _send(self, method: str, path: str, kw: dict | None = None, pick: str | None = None) -> Any:
        return _picked(_raise_for(await self._http.request(method, path, **(kw or {}))), pick)

    async def _send_text(self, method: str, path: str, kw: dict) -> Any:
        return _text(await self._http.request(method, path, **kw))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemlaneClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
