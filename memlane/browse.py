"""Reading a bank: pages of its memories, one memory, its entities with their neighbours, its
documents and its sessions over time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Sequence

from memlane.banks import require_bank
from memlane.errors import InvalidInput, NotFound
from memlane.interfaces import UnitFilter, VectorStore
from memlane.records import Entity, FactType, MemoryUnit, StoredDocument, utc
from memlane.units import FilterError, check_filter


class Browse:
    """What the explorer, the list endpoints and the CLI read of a bank."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store

    def list_memories(
        self,
        bank_id: str,
        *,
        offset: int = 0,
        limit: int = 100,
        types: Sequence[str] | None = None,
        document_id: str | None = None,
        include_invalid: bool = True,
        tags: Sequence[str] | None = None,
        tags_match: str = "any",
        since: datetime | None = None,
        until: datetime | None = None,
        entity_id: str | None = None,
    ) -> tuple[list[MemoryUnit], int]:
        """A page of the bank's memories in id order, and how many match in all. ``tags``
        (``tags_match``: one of memlane.records.TAG_MODES), the mention window ``since``
        (inclusive) to ``until`` (exclusive) and ``entity_id`` mean what they mean to recall
        (memlane/units.py)."""
        require_bank(self.store, bank_id)
        if offset < 0 or not 1 <= limit <= 1000:
            raise InvalidInput("offset must be >= 0 and limit in 1..1000")
        try:
            fact_types = [FactType(t) for t in types] if types else None
        except ValueError as exc:
            raise InvalidInput(f"types: {exc}") from None
        flt = UnitFilter(
            fact_types=fact_types,
            document_id=document_id,
            only_valid=not include_invalid,
            tags=list(tags) if tags else None,
            tags_match=tags_match,
            mentioned_since=utc(since) if since else None,
            mentioned_until=utc(until) if until else None,
            entity_id=entity_id,
        )
        try:
            check_filter(flt)
        except FilterError as exc:
            # the two rules check_filter can refuse here, named by the caller's parameter
            if exc.field == "tags_match":
                raise InvalidInput(f"tags_match: {exc}") from None
            raise InvalidInput(f"until: must be after since ({exc})") from None
        ids = self.store.list_unit_ids(bank_id, flt)
        page = self.store.get_units(bank_id, ids[offset : offset + limit])
        return page, len(ids)

    def entity(self, bank_id: str, entity_id: str, *, limit: int = 50) -> dict[str, Any]:
        """An entity with the memories that name it (the first ``limit``, by mention time)
        and its neighbours: the other entities those memories name, by how many they share.
        Raises NotFound for an entity the bank does not hold."""
        require_bank(self.store, bank_id)
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit: must be in 1..1000")
        entities = {e.entity_id: e for e in self.store.list_entities(bank_id)}
        found = [entities[entity_id]] if entity_id in entities else []
        if not found:
            raise NotFound(f"entity {entity_id!r} is not in bank {bank_id!r}", "entity_id")
        ids = self.store.list_unit_ids(bank_id, UnitFilter(entity_id=entity_id, only_valid=False))
        # Only two small fields of every mention: a popular entity's neighbours need them all,
        # its memories only a page.
        fields = self.store.get_unit_fields(bank_id, ids, ["entity_ids", "mentioned_at"])
        shared: dict[str, int] = {}
        for f in fields.values():
            for other in set(f.get("entity_ids") or ()) - {entity_id}:
                shared[other] = shared.get(other, 0) + 1
        first = sorted(ids, key=lambda i: (fields.get(i, {}).get("mentioned_at") or 0, i))[:limit]
        units = {u.id: u for u in self.store.get_units(bank_id, first)}
        by_id = {k: e for k, e in entities.items() if k in shared}
        order = sorted(by_id, key=lambda k: (-shared[k], by_id[k].name))
        neighbours = [{"entity": by_id[k], "shared": shared[k]} for k in order]
        return {
            "entity": found[0],
            "memories": [units[i] for i in first if i in units],
            "total": len(ids),
            "neighbours": neighbours,
        }

    def timeline(self, bank_id: str) -> list[dict[str, Any]]:
        """The bank's sessions over time, from its chunks (the raw turns): per document and
        session, its start (the first chunk's start), its end (the last turn's time: the
        latest mention among the memories of its chunks, the last chunk's start when none is
        later), the chunk and turn counts; by start time. A chunk keeps only its first turn's
        time, so a one-chunk session would otherwise end where it starts."""
        require_bank(self.store, bank_id)
        spans: dict[tuple[str, str], dict[str, Any]] = {}
        session_of: dict[str, tuple[str, str]] = {}
        for page in self.store.iter_chunks(bank_id):
            for c in page:
                key = (c.document_id, c.session_id)
                session_of[c.chunk_id] = key
                s = spans.setdefault(
                    key,
                    {
                        "document_id": c.document_id,
                        "session_id": c.session_id,
                        "start": c.started_at,
                        "end": c.started_at,
                        "chunks": 0,
                        "turns": 0,
                    },
                )
                s["start"], s["end"] = min(s["start"], c.started_at), max(s["end"], c.started_at)
                s["chunks"] += 1
                s["turns"] += len(c.turn_ids)
        ids = self.store.list_unit_ids(bank_id, UnitFilter(only_valid=False))
        for f in self.store.get_unit_fields(bank_id, ids, ["chunk_id", "mentioned_at"]).values():
            found = session_of.get(f.get("chunk_id") or "")
            if found is not None and f.get("mentioned_at") is not None:
                said = datetime.fromtimestamp(f["mentioned_at"], UTC)
                spans[found]["end"] = max(spans[found]["end"], said)
        return sorted(spans.values(), key=lambda s: (s["start"], s["document_id"], s["session_id"]))

    def get_memory(self, bank_id: str, memory_id: str) -> MemoryUnit:
        require_bank(self.store, bank_id)
        units = self.store.get_units(bank_id, [memory_id])
        if not units:
            raise NotFound(f"memory {memory_id!r} is not in bank {bank_id!r}", "memory_id")
        return units[0]

    def list_documents(self, bank_id: str, q: str | None = None) -> dict[str, dict[str, int]]:
        """``{document_id: {"units": n, "chunks": m}}`` for the bank; with ``q``, only the
        documents whose id or text holds it (case-insensitive; reads the bank's chunks)."""
        require_bank(self.store, bank_id)
        counts = self.store.document_counts(bank_id)
        if not q:
            return counts
        needle = q.casefold()
        found = {d for d in counts if needle in d.casefold()}
        for page in self.store.iter_chunks(bank_id):
            found.update(c.document_id for c in page if needle in c.text.casefold())
        return {d: c for d, c in counts.items() if d in found}

    def get_document(self, bank_id: str, document_id: str) -> StoredDocument:
        """A document with its text as retained (its chunks' text, session by session in the
        order they started, chunks in order) and its counts. Raises NotFound."""
        require_bank(self.store, bank_id)
        chunks = self.store.document_chunks(bank_id, document_id)
        units = self.store.list_unit_ids(bank_id, UnitFilter(document_id=document_id, only_valid=False))
        if not chunks and not units:
            raise NotFound(f"document {document_id!r} is not in bank {bank_id!r}", "document_id")
        began: dict[str, datetime] = {}
        for c in chunks:
            began[c.session_id] = min(began.get(c.session_id, c.started_at), c.started_at)
        chunks.sort(key=lambda c: (began[c.session_id], c.session_id, c.index))
        starts = [c.started_at for c in chunks]
        return StoredDocument(
            document_id=document_id,
            text="\n".join(c.text for c in chunks),
            units=len(units),
            chunks=len(chunks),
            tags=sorted({t for c in chunks for t in c.tags}),
            start=min(starts, default=None),
            end=max(starts, default=None),
        )

    def list_entities(self, bank_id: str) -> list[Entity]:
        require_bank(self.store, bank_id)
        return sorted(self.store.list_entities(bank_id), key=lambda e: (-e.mention_count, e.name))
