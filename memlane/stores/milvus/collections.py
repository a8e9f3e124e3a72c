"""The lifecycle of the store's collections: create or open and load them on first use, write
and read rows with the batching and error handling every record kind shares."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable, Sequence, TypeVar, cast

from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

from memlane.model import check_bank_id
from memlane.settings import Settings
from memlane.stores.milvus.connection import (
    PREFIX_RE,
    collection_names,
    is_missing,
    open_client,
    release_lite,
)
from memlane.stores.milvus.observe import ObservedClient
from memlane.stores.milvus.schema import build_schema
from memlane.units import str_list

log = logging.getLogger(__name__)

MAX_TOPK = 16_384  # Milvus search topk / query result window
WRITE_BATCH = 1000  # rows per upsert RPC (the benchmark's batch size)
ID_BATCH = 1000  # ids per "id in [...]" expression
R = TypeVar("R")
D = TypeVar("D")  # the default may differ in type from fn's result (``[]`` for a list of rows)


class Collections:
    """A connection and the collections opened through it (the base of :class:`MilvusStore`)."""

    def __init__(self, settings: Settings, dim: int, *, flush_writes: bool | None = None) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 32_768:
            raise ValueError(f"dim must be an int in [1, 32768], got {dim!r}")
        prefix = settings.store.collection_prefix
        if not PREFIX_RE.match(prefix or ""):
            raise ValueError(f"collection_prefix {prefix!r} must match {PREFIX_RE.pattern}")
        self.settings = settings
        self.dim = dim
        self.prefix = prefix
        client, self._lite_path, lite = open_client(settings)
        # Every call timed for the observers of memlane.stores.milvus.observe (metrics).
        self._client = cast(MilvusClient, ObservedClient(client))
        #: True when the server is Milvus Lite (file or ``milvus-lite server``).
        self.is_lite = lite
        self.flush_writes = self.is_lite if flush_writes is None else bool(flush_writes)
        self._write_lock = threading.RLock()
        self._ready: set[str] = set()  # collections known to exist and loaded in this process
        self._closed = False
        self._banks = f"{prefix}_banks"
        self._revisions = f"{prefix}_revisions"
        self._operations = f"{prefix}_operations"
        try:
            self._ensure(self._banks, "banks")
            self._ensure(self._revisions, "revisions")
            self._ensure(self._operations, "operations")
        except Exception:
            self.close()
            raise

    # ----------------------------------------------------------------------------- plumbing
    @property
    def client(self) -> MilvusClient:
        if self._closed:
            raise RuntimeError("MilvusStore is closed")
        return self._client

    def _release_lite(self) -> None:
        release_lite(self._lite_path)

    def close(self) -> None:
        """Close the client; the last store on a Lite file also stops its in-process server
        (flushing it and releasing the data-directory lock). Idempotent."""
        if self._closed:
            return
        with self._write_lock:
            self._closed = True
            try:
                self._client.close()
            finally:
                self._release_lite()

    def __enter__(self) -> Collections:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _names(self, bank_id: str) -> dict[str, str]:
        return collection_names(self.prefix, bank_id)

    def _ensure(self, name: str, kind: str) -> None:
        """Create (or open and load) a collection for writing."""
        if name in self._ready:
            return
        with self._write_lock:
            if name in self._ready:
                return
            c = self.client
            if not c.has_collection(name):
                schema, ip = build_schema(c, kind, self.dim)
                try:
                    c.create_collection(name, schema=schema, consistency_level="Strong")
                except MilvusException as exc:
                    if not c.has_collection(name):  # not a create race with another client
                        raise
                    log.debug("collection %s created concurrently: %s", name, exc)
                else:
                    # sync=False: pymilvus would poll the index state with 0.5 s sleeps
                    c.create_index(name, ip, sync=False)
            self._load(name, kind)

    def _load(self, name: str, kind: str) -> None:
        c = self.client
        c.load_collection(name)
        if kind == "units":
            desc = c.describe_collection(name)
            for f in desc.get("fields", []):
                if f.get("name") == "embedding":
                    have = int(f.get("params", {}).get("dim", self.dim))
                    if have != self.dim:
                        raise ValueError(
                            f"collection {name} holds {have}-d embeddings but the "
                            f"store was opened with dim={self.dim}"
                        )
        self._ready.add(name)

    def _open(self, name: str, kind: str) -> bool:
        """For reads: True when the collection exists (loading it on first use)."""
        if name in self._ready:
            return True
        c = self.client
        if not c.has_collection(name):
            return False
        try:
            self._load(name, kind)
        except MilvusException as exc:
            if is_missing(exc):
                return False
            raise
        return True

    def _flush(self, names: Iterable[str]) -> None:
        if self.flush_writes:
            for name in dict.fromkeys(names):
                self.client.flush(name)

    def _upsert_rows(self, name: str, rows: list[dict[str, Any]], flush: bool = True) -> None:
        if not rows:
            return
        with self._write_lock:
            for i in range(0, len(rows), WRITE_BATCH):
                self.client.upsert(name, rows[i : i + WRITE_BATCH])
            if flush:
                self._flush([name])

    def _delete_ids(self, name: str, ids: Sequence[str]) -> None:
        with self._write_lock:
            for i in range(0, len(ids), ID_BATCH):
                self.client.delete(name, filter=f"id in {str_list(ids[i : i + ID_BATCH])}")

    def _get_rows(self, name: str, ids: Sequence[str], fields: list[str]) -> list[dict[str, Any]]:
        """Rows by primary key, in the order of ``ids`` (duplicates and misses dropped)."""
        ids = list(dict.fromkeys(ids))
        found: dict[str, dict[str, Any]] = {}
        for i in range(0, len(ids), ID_BATCH):
            # exactly "id in [...]": Lite's point-lookup path
            expr = f"id in {str_list(ids[i : i + ID_BATCH])}"
            for row in self.client.query(name, filter=expr, output_fields=fields):
                found[row["id"]] = row
        return [found[i] for i in ids if i in found]

    def _query_all(self, name: str, expr: str, fields: list[str]) -> list[dict[str, Any]]:
        """Every row matching ``expr`` ("" for all). Lite has no result window; a server caps
        a query at 16,384 rows, so beyond that page with query_iterator."""
        c = self.client
        if self.is_lite:
            return list(c.query(name, filter=expr, output_fields=fields))
        rows = list(c.query(name, filter=expr, output_fields=fields, limit=MAX_TOPK))
        if len(rows) < MAX_TOPK:
            return rows
        rows = []
        it = c.query_iterator(name, batch_size=4096, filter=expr, output_fields=fields)
        try:
            while page := it.next():
                rows.extend(page)
        finally:
            it.close()
        return rows

    def _count(self, name: str) -> int:
        res = self.client.query(name, filter="", output_fields=["count(*)"])
        return int(res[0]["count(*)"]) if res else 0

    def _delete_existing(self, bank_id: str, kind: str, ids: Sequence[str]) -> list[str]:
        """Delete the rows of ``ids`` that exist in one of the bank's collections (flushed);
        returns those ids. Call with the write lock held."""
        ids = list(dict.fromkeys(i for i in (ids or ()) if isinstance(i, str)))
        if not ids:
            check_bank_id(bank_id)
            return []
        existing = self._read(bank_id, kind, lambda n: [r["id"] for r in self._get_rows(n, ids, ["id"])], [])
        if existing:
            name = self._names(bank_id)[kind]
            self._delete_ids(name, existing)
            self._flush([name])
        return existing

    def _forget(self, name: str) -> None:
        self._ready.discard(name)

    def _read(self, bank_id: str, kind: str, fn: Callable[[str], R], default: D) -> R | D:
        """Run a read against one of the bank's collections; a missing collection (never
        created, or dropped by another client meanwhile) reads as ``default``."""
        name = self._names(check_bank_id(bank_id))[kind]
        if not self._open(name, kind):
            return default
        try:
            return fn(name)
        except MilvusException as exc:
            if is_missing(exc):
                for other in self._names(bank_id).values():  # dropped together
                    self._forget(other)
                return default
            raise
