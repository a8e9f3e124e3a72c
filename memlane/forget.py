"""Forgetting: invalidating a memory (kept for history) and deleting documents and memories."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Callable

from memlane.banks import require_bank
from memlane.errors import InvalidInput, NotFound
from memlane.interfaces import VectorStore
from memlane.records import now_utc, utc

if TYPE_CHECKING:
    from memlane.writes import BankWriter


class Forget:
    """Invalidation and deletion through the bank writer."""

    def __init__(self, store: VectorStore, writer: BankWriter, written: Callable[[str], None]) -> None:
        """``written(bank_id)`` queues what follows a deletion (the tree, mental models)."""
        self.store = store
        self.writer = writer
        self.written = written

    def invalidate(
        self, bank_id: str, unit_id: str, *, superseded_by: str | None = None, at: datetime | None = None
    ) -> None:
        """Mark a unit no longer valid from ``at`` (default now): it stays stored and answers
        ``as_of`` questions about the time before (Engram: invalidate, never delete)."""
        require_bank(self.store, bank_id)
        units = self.store.get_units(bank_id, [unit_id], with_embedding=True)
        if not units:
            raise InvalidInput(f"unit {unit_id!r} is not in bank {bank_id!r}")
        unit = units[0]
        unit.invalid_at = utc(at) if at else now_utc()
        unit.superseded_by = superseded_by
        with self.writer.write(bank_id) as w:
            w.units([unit])

    def delete_document(self, bank_id: str, document_id: str) -> dict[str, int]:
        """Delete a document's units and chunks, then rebuild the bank's graph and drop entities
        nothing mentions any more. Raises NotFound for a document the bank does not hold."""
        require_bank(self.store, bank_id)
        if not isinstance(document_id, str) or not document_id:
            raise InvalidInput(f"document_id must be a non-empty string, got {document_id!r}")
        with self.writer.write(bank_id) as w:
            counts = w.delete_document(document_id)
        if not counts["units"] and not counts["chunks"]:
            raise NotFound(f"document {document_id!r} is not in bank {bank_id!r}", "document_id")
        self.written(bank_id)  # the tree windows it was under, models citing it
        return counts

    def delete_memory(self, bank_id: str, memory_id: str) -> dict[str, int]:
        """Delete one memory unit (links to it are pruned, the graph rebuilt, orphaned entities
        dropped). To keep history instead, use :meth:`invalidate`."""
        require_bank(self.store, bank_id)
        with self.writer.write(bank_id) as w:
            deleted, entities = w.delete_units([memory_id])
        if not deleted:
            raise NotFound(f"memory {memory_id!r} is not in bank {bank_id!r}", "memory_id")
        self.written(bank_id)
        return {"units": deleted, "entities": entities}
