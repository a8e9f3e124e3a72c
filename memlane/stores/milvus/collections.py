"""The lifecycle of the store's collections: create or open and load them on first use, write
and read rows with the batching and error handling every record kind shares."""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar, cast

from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

from memlane.records import check_bank_id
from memlane.settings import Settings
from memlane.stores.milvus.capabilities import Capabilities
from memlane.stores.milvus.codec import PLACEHOLDER
from memlane.stores.milvus.connection import (
    PREFIX_RE,
    is_missing,
    open_client,
    release_lite,
)
from memlane.stores.milvus.layout import (
    BANK_COLLECTIONS,
    LAYOUTS,
    MARKER_ID,
    NUM_PARTITIONS,
    Layout,
    make_layout,
)
from memlane.stores.milvus.observe import ObservedClient
from memlane.stores.milvus.schema import JSON_FIELDS, build_schema
from memlane.timings import stage
from memlane.units import json_value, str_list

log = logging.getLogger(__name__)

MAX_TOPK = 16_384  # Milvus search topk / query result window
WRITE_BATCH = 1000  # rows per upsert RPC (the benchmark's batch size)
ID_BATCH = 1000  # ids per "id in [...]" expression
# Collections no search reads (only queries and point lookups: Lite's slow memtable path is its
# searches'): on Milvus Lite they are flushed after this many writes left rows in their
# memtable, not after each. Rows are durable unflushed (Lite's write-ahead log), and a few
# dozen write batches in a memtable cost its queries nothing measurable. Each Lite flush writes
# a segment and queues its compaction, most of the Lite server's CPU in a retain: of a
# peer-workload request's 4 flushes (units, chunks, entities, the revision) these were 3;
# flushing the units alone took the Lite server from 79-93 to 53-65 ms of CPU a request and
# the flush stage from 44-170 to 13-53 ms (benchmarks/retain_cost.py, 4 alternated pairs,
# loaded 2-core machine, Dec 2026).
UNSEARCHED = frozenset({"chunks", "entities", "tree", "revisions"})
UNSEARCHED_FLUSH_WRITES = 32
R = TypeVar("R")
D = TypeVar("D")  # the default may differ in type from fn's result (``[]`` for a list of rows)


class Collections:
    """A connection and the collections opened through it (the base of :class:`MilvusStore`)."""

    def __init__(
        self,
        settings: Settings,
        dim: int,
        *,
        flush_writes: bool | None = None,
        layout: str | None = None,
    ) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 32_768:
            raise ValueError(f"dim must be an int in [1, 32768], got {dim!r}")
        prefix = settings.store.collection_prefix
        if not PREFIX_RE.match(prefix or ""):
            raise ValueError(f"collection_prefix {prefix!r} must match {PREFIX_RE.pattern}")
        self.settings = settings
        self.dim = dim
        self.prefix = prefix
        client, self._lite_path, version = open_client(settings)
        # Every call timed for the observers of memlane.stores.milvus.observe (metrics).
        self._client = cast(MilvusClient, ObservedClient(client))
        #: What the server can do (memlane/stores/milvus/capabilities.py), read once.
        self.capabilities = Capabilities.of(version)
        #: True when the server is Milvus Lite (file or ``milvus-lite server``).
        self.is_lite = self.capabilities.is_lite
        self.flush_writes = self.is_lite if flush_writes is None else bool(flush_writes)
        self._write_lock = threading.RLock()
        self._deferred = threading.local()  # .names: collections to flush when the block ends
        self._ready: set[str] = set()  # collections known to exist and loaded in this process
        self._kinds: dict[str, str] = {}  # collection name -> its kind, once loaded here
        self._unflushed: dict[str, int] = {}  # unsearched collection -> writes since its flush
        self._closed = False
        self._banks = f"{prefix}_banks"
        self._revisions = f"{prefix}_revisions"
        self._operations = f"{prefix}_operations"
        try:
            if settings.store.search_backend == "milvus":  # checked before anything is created
                self.capabilities.require_bm25("store.search_backend=milvus (BM25 searched in the store)")
            self._ensure(self._banks, "banks")
            self._ensure(self._revisions, "revisions")
            self._ensure(self._operations, "operations")
            #: Where banks' rows live (memlane/stores/milvus/layout.py). ``layout`` given: use
            #: it whatever the store records (the migration command writes both layouts).
            self.layout: Layout = make_layout(layout or self._resolve_layout(), prefix)
        except Exception:
            self.close()
            raise

    # ------------------------------------------------------------------------------- layout
    def recorded_layout(self) -> str | None:
        """The layout this store records (None: nothing recorded, a store from before layouts
        were recorded or an empty one)."""
        rows = self._get_rows(self._operations, [MARKER_ID], ["id", "record"])
        return str(json_value(rows[0]["record"])["layout"]) if rows else None

    def stored_layout(self) -> str | None:
        """The layout the store's banks are in: the recorded one, else per_bank when it holds
        banks (stores from before layouts were recorded), else None (an empty store)."""
        recorded = self.recorded_layout()
        if recorded is None and self.client.query(self._banks, filter="", output_fields=["id"], limit=1):
            return "per_bank"
        return recorded

    def record_layout(self, name: str) -> None:
        """Record ``name`` as the layout of this store (the migration's switch)."""
        if name not in LAYOUTS:
            raise ValueError(f"unknown store layout {name!r}: use one of {LAYOUTS}")
        row = {"id": MARKER_ID, "record": {"layout": name}, "_v": PLACEHOLDER}
        self._upsert_rows(self._operations, [row])

    def _resolve_layout(self) -> str:
        """The layout to open: the recorded one; else, for a store that holds banks, per_bank
        (the only layout before layouts were recorded); else the setting ("auto": per_bank on
        Milvus Lite, partition_key on a server), then recorded. A setting that names another
        layout than the recorded one is an error, not an empty store."""
        want = self.settings.store.layout
        marker = self.recorded_layout()
        recorded = marker or self.stored_layout()
        if recorded is not None and want not in ("auto", recorded):
            where = self.settings.store.milvus_uri or str(self.settings.data_dir)
            raise ValueError(
                f"the store at {where} (prefix {self.prefix}) holds the {recorded} layout but "
                f"MEMLANE_STORE__LAYOUT is {want}: run `memlane store migrate --to {want}` or "
                f"set MEMLANE_STORE__LAYOUT={recorded} (or auto)"
            )
        name = recorded or (want if want != "auto" else ("per_bank" if self.is_lite else "partition_key"))
        if marker is None:  # record it, so a later setting cannot silently read another layout
            self.record_layout(name)
        return name

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
        return self.layout.names(bank_id)

    def _ensure(self, name: str, kind: str) -> None:
        """Create (or open and load) a collection for writing."""
        if name in self._ready:
            return
        with self._write_lock:
            if name in self._ready:
                return
            c = self.client
            if not c.has_collection(name):
                shared = kind in BANK_COLLECTIONS and self.layout.shared
                schema, ip = build_schema(c, kind, self.dim, self.capabilities, shared=shared)
                partitioned = shared and self.capabilities.partition_key_upsert
                extra: dict[str, Any] = {"num_partitions": NUM_PARTITIONS} if partitioned else {}
                try:
                    c.create_collection(name, schema=schema, consistency_level="Strong", **extra)
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
        self._kinds[name] = kind
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

    @contextmanager
    def deferred_flushes(self) -> Iterator[None]:
        """Flush the collections this thread writes in the block once, when it ends, instead
        of after each call (Milvus Lite; a server never flushes): one logical write upserts
        and deletes a collection several times (a retain: the document's deletion, its
        chunks, units and entities, the revision), and each Lite flush costs 8-11 ms."""
        if getattr(self._deferred, "names", None) is not None:
            yield  # nested: the outer block flushes
            return
        self._deferred.names = {}
        try:
            yield
        finally:
            names, self._deferred.names = self._deferred.names, None
            if names:
                with self._write_lock, stage("flush"):
                    self._flush(names)

    def _flush(self, names: Iterable[str]) -> None:
        if not self.flush_writes:
            return
        pending = getattr(self._deferred, "names", None)
        if pending is not None:
            pending.update(dict.fromkeys(names))
            return
        with self._write_lock:
            for name in dict.fromkeys(names):
                if self._flush_due(name):
                    self.client.flush(name)

    def _flush_due(self, name: str) -> bool:
        """Whether a write that left rows in ``name`` flushes it now: always a searched
        collection, an unsearched one every :data:`UNSEARCHED_FLUSH_WRITES` writes (see
        there). Called with the write lock held."""
        if self._kinds.get(name) not in UNSEARCHED:
            return True
        writes = self._unflushed.get(name, 0) + 1
        self._unflushed[name] = 0 if writes >= UNSEARCHED_FLUSH_WRITES else writes
        return writes >= UNSEARCHED_FLUSH_WRITES

    def _upsert_rows(self, name: str, rows: list[dict[str, Any]], flush: bool = True) -> None:
        if not rows:
            return
        rows = self.capabilities.stored_rows(rows, JSON_FIELDS)
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

    def _count(self, name: str, expr: str = "") -> int:
        res = self.client.query(name, filter=expr, output_fields=["count(*)"])
        return int(res[0]["count(*)"]) if res else 0

    # ------------------------------------------------------------- one bank's rows (layout)
    # Every read or write of a bank's collection goes through these, so the layout's filter
    # and keys are applied in one place. Point lookups and deletes go by stored key alone: in
    # the partition-key layout the key carries the bank, and on Milvus Lite "id in [...]" is
    # its fast path (50 ids: 4.4 ms by key against 274 ms with a bank filter added, 10 banks of
    # 10k rows, benchmarks/milvus_layout.py).
    def _bank_get(
        self, bank_id: str, name: str, ids: Sequence[str], fields: list[str]
    ) -> list[dict[str, Any]]:
        """The bank's rows by item id, in the order of ``ids``."""
        lay = self.layout
        return lay.read_rows(self._get_rows(name, lay.keys(bank_id, list(dict.fromkeys(ids))), fields))

    def _bank_query(self, bank_id: str, name: str, expr: str, fields: list[str]) -> list[dict[str, Any]]:
        """Every row of the bank matching ``expr`` ("" for all)."""
        return self.layout.read_rows(self._query_all(name, self.layout.scope(bank_id, expr), fields))

    def _bank_count(self, bank_id: str, name: str) -> int:
        return self._count(name, self.layout.scope(bank_id))

    def _bank_upsert(self, bank_id: str, name: str, rows: list[dict[str, Any]], flush: bool = True) -> None:
        self._upsert_rows(name, self.layout.stored_rows(bank_id, rows), flush)

    def _bank_delete(self, bank_id: str, name: str, ids: Sequence[str]) -> None:
        self._delete_ids(name, self.layout.keys(bank_id, ids))

    def _delete_existing(self, bank_id: str, kind: str, ids: Sequence[str]) -> list[str]:
        """Delete the rows of ``ids`` that exist in one of the bank's collections (flushed);
        returns those ids. Call with the write lock held."""
        ids = list(dict.fromkeys(i for i in (ids or ()) if isinstance(i, str)))
        if not ids:
            check_bank_id(bank_id)
            return []
        existing = self._read(
            bank_id, kind, lambda n: [r["id"] for r in self._bank_get(bank_id, n, ids, ["id"])], []
        )
        if existing:
            name = self._names(bank_id)[kind]
            self._bank_delete(bank_id, name, existing)
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
