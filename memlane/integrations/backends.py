"""Every call LangGraph's store (memlane/integrations/langgraph.py) makes into Memlane, behind
one :class:`Backend` protocol: :class:`EngineBackend` over :class:`memlane.Memory` in this
process, :class:`ServiceBackend` over the HTTP SDK. Neither imports LangGraph."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

PAGE = 1000  # memories per listing page (the REST API's most)


@dataclass(frozen=True)
class Stored:
    """One memory as the adapter reads it, from either backend."""

    document_id: str
    text: str
    tags: tuple[str, ...]
    at: datetime  # when it was retained (mentioned_at), UTC
    score: float | None = None


class Backend(Protocol):
    """Every call the store makes into Memlane: the engine's and the service's are the two."""

    def banks(self) -> list[str]: ...

    def retain(self, bank: str, items: list[dict[str, Any]]) -> None:
        """Retain API items (one document each), creating the bank when missing."""

    def delete(self, bank: str, document_id: str) -> None:
        """Delete a document; nothing when the bank or document does not exist."""

    def memories(self, bank: str, *, tags: list[str], document_id: str | None = None) -> list[Stored]:
        """Every memory holding all ``tags`` (of ``document_id``); [] for an unknown bank."""

    def recall(self, bank: str, query: str, *, tags: list[str], max_tokens: int) -> list[Stored]:
        """Recall over the memories holding all ``tags``, best first; [] for an unknown bank."""


def _utc(value: Any) -> datetime:
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return at.astimezone(UTC).replace(microsecond=0)


class EngineBackend:
    """:class:`memlane.Memory` in this process: every call the store makes into the engine is
    here (its names follow the engine's API). Calls are serialised: ``abatch`` runs them in
    worker threads, and one engine is driven from one thread at a time."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self._lock = threading.RLock()

    def banks(self) -> list[str]:
        with self._lock:
            return [b.bank_id for b in self.memory.banks.list_all()]

    def retain(self, bank: str, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self.memory.retain_items(bank, items, create_bank=True)

    def delete(self, bank: str, document_id: str) -> None:
        from memlane.errors import NotFound

        with self._lock:
            try:
                self.memory.forget.delete_document(bank, document_id)
            except NotFound:  # the bank or the document (BankNotFound is a NotFound)
                pass

    def memories(self, bank: str, *, tags: list[str], document_id: str | None = None) -> list[Stored]:
        from memlane.errors import BankNotFound

        out: list[Stored] = []
        with self._lock:
            list_memories = self.memory.browse.list_memories
            try:
                while True:
                    units, total = list_memories(
                        bank,
                        offset=len(out),
                        limit=PAGE,
                        tags=tags,
                        tags_match="all",
                        document_id=document_id,
                    )
                    out += [Stored(u.document_id, u.text, tuple(u.tags), _utc(u.mentioned_at)) for u in units]
                    if not units or len(out) >= total:
                        return out
            except BankNotFound:
                return []

    def recall(self, bank: str, query: str, *, tags: list[str], max_tokens: int) -> list[Stored]:
        from memlane.errors import BankNotFound

        with self._lock:
            try:
                result = self.memory.recall(bank, query, **_recall_options(tags, max_tokens))
            except BankNotFound:
                return []
        return [
            Stored(m.unit.document_id, m.unit.text, tuple(m.unit.tags), _utc(m.unit.mentioned_at), m.score)
            for m in result.memories
        ]


class ServiceBackend:
    """The HTTP service through the SDK (a ``memlane_client.MemlaneClient``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @staticmethod
    def _missing(exc: Exception, *codes: str) -> bool:
        # memlane_client.MemlaneAPIError, matched by its fields (the engine imports no SDK)
        return getattr(exc, "status", None) == 404 and getattr(exc, "code", None) in codes

    @staticmethod
    def _stored(unit: dict[str, Any], score: float | None = None) -> Stored:
        return Stored(
            unit["document_id"], unit["text"], tuple(unit["tags"]), _utc(unit["mentioned_at"]), score
        )

    def banks(self) -> list[str]:
        return [b["bank_id"] for b in self.client.list_banks()]

    def retain(self, bank: str, items: list[dict[str, Any]]) -> None:
        try:
            self.client.retain(bank, items)
        except Exception as exc:
            if not self._missing(exc, "bank_not_found"):
                raise
            self.client.put_bank(bank)  # the REST API retains into existing banks only
            self.client.retain(bank, items)

    def delete(self, bank: str, document_id: str) -> None:
        try:
            self.client.delete_document(bank, document_id)
        except Exception as exc:
            if not self._missing(exc, "bank_not_found", "not_found"):
                raise

    def memories(self, bank: str, *, tags: list[str], document_id: str | None = None) -> list[Stored]:
        out: list[Stored] = []
        try:
            while True:
                page = self.client.list_memories(
                    bank, offset=len(out), limit=PAGE, document_id=document_id, tags=tags, tags_match="all"
                )
                out += [self._stored(u) for u in page["items"]]
                if not page["items"] or len(out) >= page["total"]:
                    return out
        except Exception as exc:
            if self._missing(exc, "bank_not_found"):
                return []
            raise

    def recall(self, bank: str, query: str, *, tags: list[str], max_tokens: int) -> list[Stored]:
        try:
            result = self.client.recall(bank, query, **_recall_options(tags, max_tokens))
        except Exception as exc:
            if self._missing(exc, "bank_not_found"):
                return []
            raise
        return [self._stored(m["unit"], m["score"]) for m in result["memories"]]


def _recall_options(tags: list[str], max_tokens: int) -> dict[str, Any]:
    # Flat recall over the store's memories: no tree nodes, and facts a later one superseded
    # (memlane/facts) still answer, since each item is its own record, not a belief.
    return {
        "tags": tags,
        "tags_match": "all",
        "max_tokens": max_tokens,
        "planner": "off",
        "include_history": True,
    }


def backend_for(target: Any) -> Backend:
    """The backend of an engine (``memlane.Memory``), an SDK client (``MemlaneClient``) or a
    :class:`Backend` itself."""
    if hasattr(target, "retain_items") and hasattr(target, "browse"):
        return EngineBackend(target)
    if hasattr(target, "list_memories") and hasattr(target, "put_bank"):
        return ServiceBackend(target)
    if all(
        callable(getattr(target, name, None)) for name in ("banks", "retain", "delete", "memories", "recall")
    ):
        return target
    raise TypeError(f"MemlaneStore needs a memlane.Memory or a memlane_client.MemlaneClient, not {target!r}")
