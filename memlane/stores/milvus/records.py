"""Banks, revisions, background operations, chunks and entities: the store's records other
than units."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any, Iterator, Sequence

from pymilvus.exceptions import MilvusException

from memlane import revlog
from memlane.records import Bank, Chunk, Entity, check_bank_id
from memlane.revlog import RevisionDelta, RevisionStep
from memlane.stores.milvus.codec import (
    BANK_OUT,
    CHUNK_OUT,
    ENTITY_OUT,
    MAX_ID_BYTES,
    PLACEHOLDER,
    bank_row,
    check_json,
    chunk_row,
    entity_row,
    row_bank,
    row_chunk,
    row_entity,
)
from memlane.stores.milvus.collections import Collections
from memlane.stores.milvus.connection import is_missing
from memlane.units import escape_string, json_value

# The collections every bank gets with its first write (the tree's comes with consolidation).
BANK_KINDS = ("units", "chunks", "entities")


CURATED_KINDS = ("model", "directive")


def _revlog_key(bank_id: str) -> str:
    # The revision log (memlane/revlog.py) lives in the operations collection, keyed
    # "revlog:<bank>": its JSON field holds it, so the revisions collection's schema is
    # unchanged (Milvus Lite cannot add a field to an existing collection).
    return f"revlog:{bank_id}"


def _curated_key(kind: str, bank_id: str, item_id: str) -> str:
    if kind not in CURATED_KINDS:
        raise ValueError(f"curated record kind must be one of {CURATED_KINDS}, got {kind!r}")
    return f"{kind}:{check_bank_id(bank_id)}:{item_id}"


class Records(Collections):
    """Record methods of :class:`MilvusStore` (all but units and search)."""

    def _ensure_bank(self, bank_id: str) -> dict[str, str]:
        """Create the bank's collections for writing; register a default Bank record if the
        bank has none, so list_banks and delete_bank always see banks that hold data."""
        names = self._names(bank_id)
        # Per bank, ready collections mean a registered bank (a deletion elsewhere drops them,
        # which the write sees); shared collections say nothing of one bank, so the partition-
        # key layout looks its bank row up on every write (one point lookup).
        if not self.layout.shared and all(names[k] in self._ready for k in BANK_KINDS):
            return names
        with self._write_lock:
            for kind in BANK_KINDS:
                self._ensure(names[kind], kind)
            if self.get_bank(bank_id) is None:
                self._upsert_rows(self._banks, [bank_row(Bank(bank_id=bank_id, name=bank_id))])
        return names

    def _write_bank(self, bank_id: str, write) -> None:
        """Run ``write(names)`` on the bank's collections, creating them if needed. If another
        client dropped them after this process cached them as ready (delete_bank elsewhere),
        forget them, recreate and write again once (upserts are idempotent)."""
        with self._write_lock:
            for attempt in (0, 1):
                names = self._ensure_bank(bank_id)
                try:
                    write(names)
                    return
                except MilvusException as exc:
                    if attempt or not is_missing(exc):
                        raise
                    for name in names.values():
                        self._forget(name)

    def upsert_bank(self, bank: Bank) -> None:
        """Insert or replace a bank's profile (name, background, disposition, times)."""
        if not isinstance(bank, Bank):
            raise ValueError(f"upsert_bank takes a Bank, got {type(bank).__name__}")
        self._upsert_rows(self._banks, [bank_row(bank)])

    def get_bank(self, bank_id: str) -> Bank | None:
        """The bank's profile, or None for an unknown bank."""
        check_bank_id(bank_id)
        rows = self._get_rows(self._banks, [bank_id], BANK_OUT)
        return row_bank(rows[0]) if rows else None

    def list_banks(self) -> list[Bank]:
        """Every bank with a profile, sorted by id (read from the banks collection)."""
        rows = self._query_all(self._banks, "", BANK_OUT)
        return sorted((row_bank(r) for r in rows), key=lambda b: b.bank_id)

    def _drop_bank_rows(self, bank_id: str) -> None:
        """Remove the bank's units, chunks, entities and tree nodes: drop its collections (per
        bank) or delete its rows by the bank filter (partition key). Call with the write lock."""
        c = self.client
        names = self._names(bank_id)
        if not self.layout.shared:
            for name in names.values():
                self._forget(name)
                if c.has_collection(name):
                    c.drop_collection(name)
            return
        expr = self.layout.scope(bank_id)
        for name in names.values():
            if name in self._ready or c.has_collection(name):
                c.delete(name, filter=expr)
                self._flush([name])

    def delete_bank(self, bank_id: str) -> None:
        """Remove the bank and everything in it (its collections, the tree's too, its mental
        models and directives, and its profile). A no-op for an unknown bank."""
        check_bank_id(bank_id)
        with self._write_lock:
            # Its mental models and directives first: the bank's own row goes last, so a
            # deletion cut short is retried (the bank still exists) and leaves no orphans.
            for kind in CURATED_KINDS:
                keys = [_curated_key(kind, bank_id, i) for i in self._curated_ids(kind, bank_id)]
                self._delete_ids(self._operations, keys)
            self._drop_bank_rows(bank_id)
            self._delete_ids(self._banks, [bank_id])
            self._delete_ids(self._revisions, [bank_id])
            self._delete_ids(self._operations, [_revlog_key(bank_id)])
            self._flush([self._banks, self._revisions, self._operations])

    # ---------------------------------------------------------------------------- revisions
    def get_revision(self, bank_id: str) -> str:
        """The bank's revision token ('' before its first write). Processes that cache derived
        data of a bank (search index, graph) compare it to know when to refresh."""
        rows = self._get_rows(self._revisions, [check_bank_id(bank_id)], ["id", "revision"])
        return rows[0]["revision"] if rows else ""

    def bump_revision(self, bank_id: str, delta: RevisionDelta | None = None) -> str:
        """Give the bank a new random revision token and return it. Called after every write
        to the bank; random, not a counter, so concurrent writers never need to read first.

        With ``delta`` (what the write changed, under the bank's lease) the write is also
        appended to the bank's revision log (memlane/revlog.py) before the token changes, so a
        reader that sees the new token finds the step that leads to it. Without one the log is
        left alone: it no longer ends at the bank's token, so readers reload in full."""
        check_bank_id(bank_id)
        token = uuid.uuid4().hex
        if delta is not None:
            current = self.get_revision(bank_id)
            log_token, steps = self.revision_log(bank_id)
            kept = revlog.append(current, log_token, steps, delta, token)
            # Not flushed: a log lost with an unflushed memtable only costs readers a reload.
            self._upsert_rows(
                self._operations,
                [{"id": _revlog_key(bank_id), "record": revlog.log_record(token, kept), "_v": PLACEHOLDER}],
                flush=False,
            )
        self._upsert_rows(self._revisions, [{"id": bank_id, "revision": token, "_v": PLACEHOLDER}])
        return token

    def revision_log(self, bank_id: str) -> tuple[str, list[RevisionStep]]:
        """The bank's revision log: the token it ends at and its steps, oldest first (("", [])
        when there is none). Read only when a bank's token changed (never on the hot path)."""
        rows = self._get_rows(self._operations, [_revlog_key(check_bank_id(bank_id))], ["id", "record"])
        return revlog.parse_log(json_value(rows[0]["record"]) if rows else None)

    # --------------------------------------------------------------------------- operations
    def put_operation(self, op_id: str, record: dict[str, Any]) -> None:
        """Insert or replace the JSON record of a background operation (an async retain), so
        any process can report its status."""
        if not isinstance(op_id, str) or not 0 < len(op_id.encode()) <= MAX_ID_BYTES:
            raise ValueError(f"invalid operation id {op_id!r}")
        self._upsert_rows(
            self._operations, [{"id": op_id, "record": check_json("operation", record), "_v": PLACEHOLDER}]
        )

    def get_operation(self, op_id: str) -> dict[str, Any] | None:
        """The operation's record, or None for an unknown id."""
        if not isinstance(op_id, str) or not op_id:
            return None
        rows = self._get_rows(self._operations, [op_id], ["id", "record"])
        return json_value(rows[0]["record"]) if rows else None

    # ------------------------------------------------------------------------------- leases
    # Bank write leases (memlane/leases.py) live in the operations collection, keyed
    # "lease:<bank>:<owner>": global, created with the store, and never flushed (Strong
    # consistency makes an unflushed write visible to every later query; a lease need not
    # survive a restart of the server).
    def put_lease(self, bank_id: str, owner: str, record: dict[str, Any]) -> None:
        """Insert or replace one writer's lease record on ``bank_id``."""
        key = f"lease:{check_bank_id(bank_id)}:{owner}"
        self._upsert_rows(
            self._operations,
            [{"id": key, "record": check_json("lease", record), "_v": PLACEHOLDER}],
            flush=False,
        )

    def list_leases(self, bank_id: str) -> list[dict[str, Any]]:
        """Every writer's lease record on ``bank_id`` (live or expired)."""
        prefix = f"lease:{check_bank_id(bank_id)}:"
        rows = self._query_all(self._operations, f'id like "{prefix}%"', ["id", "record"])
        # LIKE may treat "_" in a bank id as a wildcard: keep the exact prefix only.
        return [json_value(r["record"]) for r in rows if r["id"].startswith(prefix)]

    def delete_lease(self, bank_id: str, owner: str) -> None:
        """Remove one writer's lease record (a no-op when it is gone)."""
        self._delete_ids(self._operations, [f"lease:{check_bank_id(bank_id)}:{owner}"])

    # ------------------------------------------------------------------------ curated records
    # Mental models and directives (memlane/curated/) live in the operations collection too,
    # keyed "<kind>:<bank>:<id>" like leases, but flushed (they must survive a restart), and
    # go with the bank (delete_bank).
    def put_curated(self, kind: str, bank_id: str, item_id: str, record: dict[str, Any]) -> None:
        """Insert or replace one curated record (``kind``: "model" or "directive")."""
        key = _curated_key(kind, bank_id, item_id)
        self._upsert_rows(
            self._operations, [{"id": key, "record": check_json(kind, record), "_v": PLACEHOLDER}]
        )

    def get_curated(self, kind: str, bank_id: str, item_id: str) -> dict[str, Any] | None:
        """One curated record, or None."""
        rows = self._get_rows(self._operations, [_curated_key(kind, bank_id, item_id)], ["id", "record"])
        return json_value(rows[0]["record"]) if rows else None

    def list_curated(self, kind: str, bank_id: str) -> list[dict[str, Any]]:
        """Every curated record of ``kind`` in the bank, by id."""
        prefix = _curated_key(kind, bank_id, "")
        rows = self._query_all(self._operations, f'id like "{prefix}%"', ["id", "record"])
        # LIKE may treat "_" in a bank id as a wildcard: keep the exact prefix only.
        return [
            json_value(r["record"]) for r in sorted(rows, key=lambda r: r["id"]) if r["id"].startswith(prefix)
        ]

    def delete_curated(self, kind: str, bank_id: str, item_id: str) -> bool:
        """Remove one curated record; False when it was not there."""
        key = _curated_key(kind, bank_id, item_id)
        with self._write_lock:
            if not self._get_rows(self._operations, [key], ["id"]):
                return False
            self._delete_ids(self._operations, [key])
            self._flush([self._operations])
        return True

    def _curated_ids(self, kind: str, bank_id: str) -> list[str]:
        prefix = _curated_key(kind, bank_id, "")
        rows = self._query_all(self._operations, f'id like "{prefix}%"', ["id"])
        return [r["id"][len(prefix) :] for r in rows if r["id"].startswith(prefix)]

    # ------------------------------------------------------------------------------- chunks

    def upsert_chunks(self, bank_id: str, chunks: Sequence[Chunk]) -> None:
        """Insert or replace source chunks (keyed by ``chunk_id``)."""
        check_bank_id(bank_id)
        latest: dict[str, dict[str, Any]] = {}
        for ch in chunks or ():
            if not isinstance(ch, Chunk):
                raise ValueError(f"upsert_chunks takes Chunk objects, got {type(ch).__name__}")
            if ch.bank_id != bank_id:
                raise ValueError(f"chunk {ch.chunk_id!r} belongs to bank {ch.bank_id!r}, not {bank_id!r}")
            latest[ch.chunk_id] = chunk_row(bank_id, ch)
        if latest:
            self._write_bank(
                bank_id, lambda names: self._bank_upsert(bank_id, names["chunks"], list(latest.values()))
            )

    def get_chunks(self, bank_id: str, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id, in the order asked (unknown ids skipped)."""
        ids = [i for i in (ids or ()) if isinstance(i, str)]
        if not ids:
            check_bank_id(bank_id)
            return []
        rows = self._read(bank_id, "chunks", lambda n: self._bank_get(bank_id, n, ids, CHUNK_OUT), [])
        return [row_chunk(bank_id, r) for r in rows]

    def iter_chunks(self, bank_id: str, *, batch_size: int = 2000) -> Iterator[list[Chunk]]:
        """All chunks of the bank in pages of at most ``batch_size``, in id order (ids listed
        once, pages fetched by id, as :meth:`iter_units` does)."""
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        id_rows = self._read(bank_id, "chunks", lambda n: self._bank_query(bank_id, n, "", ["id"]), [])
        ids: list[str] = sorted(r["id"] for r in id_rows)
        for i in range(0, len(ids), batch_size):
            page = ids[i : i + batch_size]
            rows = self._read(
                bank_id, "chunks", partial(self._bank_get, bank_id, ids=page, fields=CHUNK_OUT), []
            )
            if rows:
                yield [row_chunk(bank_id, r) for r in rows]

    def document_chunks(self, bank_id: str, document_id: str) -> list[Chunk]:
        """The chunks of one document, in id order ([] for an unknown bank or document)."""
        if not isinstance(document_id, str) or not document_id:
            raise ValueError(f"document_id must be a non-empty string, got {document_id!r}")
        expr = f"document_id == {escape_string(document_id)}"
        rows = self._read(bank_id, "chunks", lambda n: self._bank_query(bank_id, n, expr, CHUNK_OUT), [])
        return sorted((row_chunk(bank_id, r) for r in rows), key=lambda c: c.chunk_id)

    def delete_chunks(self, bank_id: str, ids: Sequence[str]) -> int:
        """Delete chunks by id; returns how many existed (their units are not touched)."""
        with self._write_lock:
            return len(self._delete_existing(bank_id, "chunks", ids))

    def count_chunks(self, bank_id: str) -> int:
        """Number of chunks in the bank (0 for an unknown bank)."""
        return self._read(bank_id, "chunks", partial(self._bank_count, bank_id), 0)

    # ----------------------------------------------------------------------------- entities

    def upsert_entities(self, bank_id: str, entities: Sequence[Entity]) -> None:
        """Insert or replace entities (keyed by ``entity_id``)."""
        check_bank_id(bank_id)
        latest: dict[str, dict[str, Any]] = {}
        for e in entities or ():
            if not isinstance(e, Entity):
                raise ValueError(f"upsert_entities takes Entity objects, got {type(e).__name__}")
            if e.bank_id != bank_id:
                raise ValueError(f"entity {e.entity_id!r} belongs to bank {e.bank_id!r}, not {bank_id!r}")
            latest[e.entity_id] = entity_row(bank_id, e)
        if latest:
            self._write_bank(
                bank_id, lambda names: self._bank_upsert(bank_id, names["entities"], list(latest.values()))
            )

    def list_entities(self, bank_id: str) -> list[Entity]:
        """All entities of the bank, sorted by id."""
        rows = self._read(bank_id, "entities", lambda n: self._bank_query(bank_id, n, "", ENTITY_OUT), [])
        return sorted((row_entity(bank_id, r) for r in rows), key=lambda e: e.entity_id)

    def delete_entities(self, bank_id: str, ids: Sequence[str]) -> int:
        """Delete entities by id; returns how many existed."""
        with self._write_lock:
            return len(self._delete_existing(bank_id, "entities", ids))
