"""The store of record on Milvus: banks, memory units, source chunks and entities.

Layout decision (measured with ``benchmarks/milvus_layout.py`` on Milvus Lite 3.2.2, pymilvus
3.0.2, 2 CPU cores, 384-d random unit vectors, synthetic 8-20-word sentences; ms p50 / p95):

    measure                        (a) one collection per bank   (b) shared, partition key
    rows scanned for one bank      10,000                        100,000 (10 banks)
    insert rows/s (batch 1000)     2,803                         2,690
    dense, 1 query, top 100        24.1 / 78.3                   137.3 / 244.0
    BM25, 1 query, top 100         12.8 / 15.2                   156.5 / 206.5
    dense, 64 queries, top 10      45.7 / 49.7                   290.9 / 438.3
    get 50 units by id             3.9 / 4.2                     273.6 / 577.8 (4.4 with a
                                                                  "bank/id" key and no filter)
    count one bank                 4.2 / 5.3                     975.6 / 1304.9
    cold start (open+load, first search)  see below              1.09 s + 0.30 s, RSS 592 MB

    many banks, layout (a): 200 banks x 3 collections created in 5.3 s (8.8 ms each); per bank
    opened in a process +0.23 MB RSS and +3 threads (Milvus Lite runs one background thread per
    open collection); 1000 banks extrapolate to ~26 s of creation, ~225 MB and ~3000 threads,
    paid only for banks a process touches. Cold start on 600 collections: open 0.14 s, first
    bank loaded and searched in 88 ms, all 600 collections touched in 2.4 s.

Milvus Lite scans every row of a collection and a filter (or a partition key: rows are hashed
into 16 buckets that a ``bank_id ==`` filter does not prune) does not shrink the scan, so with a
shared collection every query pays for all banks: 5-12x slower searches at 10 banks, growing
with the number of banks, and counts or scalar queries that materialise every matching row.
So each bank gets its own three collections (units, chunks, entities); banks live in one small
global collection, which is also what ``list_banks`` reads (never the list of collections). The
cost, ~27 ms to create a bank and a few threads per open bank, is paid once per bank. On a
Milvus server the same layout works; a deployment with very many small banks may prefer
partition keys there, where filters do prune segments.

Other facts verified here (and relied on below):

* BM25 distances come back negated from Milvus Lite (best first, most negative); a Milvus
  server returns them positive. Scores are reported as ``abs(distance)``, right for both.
* Writes land in Lite's memtable before the RPC returns, so reads see them; collections are
  created with ``consistency_level="Strong"`` so a Milvus server waits for the write timestamp
  too (read-your-writes on both).
* Rows still in Lite's memtable are searched by rebuilding a brute-force index per query:
  13k unflushed rows cost 0.4-1.2 s per dense or BM25 search against 18 ms / 11 ms once
  flushed, and flushing a 20-row batch costs 8-11 ms. So on Milvus Lite every write call ends
  with a flush of the collections it touched (``flush_writes``); never on a server, where
  flushes are rate-limited and segments seal by themselves.
* ``ARRAY<VARCHAR>`` with ``array_contains_any`` / ``array_contains_all``, JSON fields,
  nullable VARCHAR with ``is null``, and ``count(*)`` (exact after upserts and deletes) work.
  Filter strings are escaped (``\\``, ``"``, ``\\n``, ``\\r``, ``\\t``: the escapes both Lite's
  and Milvus's expression grammars accept); Lite ignores ``filter_params`` templates.
* A Lite query without a limit returns every matching row (checked at 20k); a Milvus server caps
  results at 16,384 rows, so larger scans page with ``query_iterator`` there.
* pymilvus' ``get``/``delete`` by ids quote ids without escaping, so ids are packed here. An
  expression that is exactly ``id in [...]`` takes Lite's point-lookup path (50 ids: 4 ms).
* One MilvusClient is shared by all threads: its gRPC channel is thread-safe (6 reader threads
  and 2 writer threads on one collection, 180 rounds, no error or lost row; 6 unguarded writer
  threads, 12,000 rows, none lost). Lite documents its collections as single-writer, so all
  writes of a store are still serialised by one lock; reads run concurrently.
* ``create_index`` waits by polling with 0.5 s sleeps unless ``sync=False`` (1.0 s per
  collection instead of ~9 ms); reopened Lite collections start released, so each collection is
  loaded on first use in a process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
from pymilvus import DataType, Function, FunctionType, MilvusClient
from pymilvus.exceptions import MilvusException

from memlane.stores.lexical import ANALYZER_PARAMS, analyze
from memlane.interfaces import Hit, UnitFilter
from memlane.model import (Bank, Chunk, Disposition, Entity, FactType, Link, MemoryUnit,
                           OpinionChange, check_bank_id, utc)
from memlane.settings import Settings

log = logging.getLogger(__name__)

__all__ = ["MilvusStore", "unit_from_fields", "collection_names", "escape_string", "filter_expr",
           "NONE_TIME_US", "UNIT_HIT_FIELDS"]

# ---------------------------------------------------------------------------------------------
# Limits and sentinels
# ---------------------------------------------------------------------------------------------
#: Stored times are INT64 microseconds since the epoch (exact round trips of datetimes); this
#: value stands for None. It lies far outside datetime's range (year 1 is -6.2e16 us).
NONE_TIME_US = -(2 ** 62)
NO_CONFIDENCE = -1.0  # confidence is in [0, 1]; -1 stands for None
MAX_ID_BYTES = 512  # ids, document/chunk ids, list elements
MAX_TEXT_BYTES = 65_535  # Milvus VARCHAR limit (bytes of UTF-8)
MAX_ARRAY = 4096  # Milvus ARRAY max_capacity limit
MAX_TOPK = 16_384  # Milvus search topk / query result window
WRITE_BATCH = 1000  # rows per upsert RPC (the benchmark's batch size)
ID_BATCH = 1000  # ids per "id in [...]" expression
_PLACEHOLDER = [0.0, 0.0]  # Milvus wants a vector field in every collection
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_PREFIX_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

_UNIT_TIME_FIELDS = ("occurred_start", "occurred_end", "mentioned_at", "valid_from", "invalid_at")
_UNIT_LIST_FIELDS = ("source_turns", "entity_ids", "tags", "source_fact_ids")
#: Stored unit fields that Hit.fields carries (every unit field but id and the vector).
UNIT_HIT_FIELDS = (
    "bank_id", "text", "context", "fact_type", "occurred_start", "occurred_end", "mentioned_at",
    "confidence", "document_id", "chunk_id", "source_turns", "entity_ids", "tags", "links",
    "proof_count", "source_fact_ids", "history", "valid_from", "invalid_at", "superseded_by",
    "metadata",
)
_UNIT_OUT = ["id", *UNIT_HIT_FIELDS]
_CHUNK_OUT = ["id", "bank_id", "document_id", "session_id", "index", "text", "turn_ids",
              "started_at", "tags"]
_ENTITY_OUT = ["id", "bank_id", "name", "type", "aliases", "mention_count", "first_seen",
               "last_seen"]
_BANK_OUT = ["id", "name", "background", "disposition", "created_at", "updated_at"]

# Milvus Lite file targets opened by stores of this process: path -> open stores. The in-process
# Lite server is shared per path (pymilvus reuses it), so it is released with the last store.
_LITE_REFS: dict[str, int] = {}
_LITE_LOCK = threading.Lock()


# ---------------------------------------------------------------------------------------------
# Small pure helpers (public ones are documented)
# ---------------------------------------------------------------------------------------------
def escape_string(value: str) -> str:
    """Return ``value`` as a double-quoted Milvus filter string literal.

    Backslash, double quote, newline, carriage return and tab are escaped, so a value can neither
    end the literal early nor inject expression syntax."""
    if not isinstance(value, str):
        raise ValueError(f"filter value must be a string, got {type(value).__name__}")
    out = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
           .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{out}"'


def _str_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(escape_string(v) for v in values) + "]"


def _to_us(dt: datetime | None) -> int:
    if dt is None:
        return NONE_TIME_US
    d = utc(dt) - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def _from_us(us: int | None) -> datetime | None:
    if us is None or us == NONE_TIME_US:
        return None
    return _EPOCH + timedelta(microseconds=int(us))


def _us_to_s(us: int | None) -> int | None:
    if us is None or us == NONE_TIME_US:
        return None
    return int(us) // 1_000_000


def _to_dt(value: Any) -> datetime | None:
    """Epoch seconds (int/float), an ISO string or a datetime -> aware UTC datetime."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, (int, float)):
        return _EPOCH + timedelta(seconds=value)
    if isinstance(value, str):
        return utc(datetime.fromisoformat(value))
    raise ValueError(f"not a time: {value!r}")


def _json_value(value: Any) -> Any:
    if isinstance(value, (str, bytes, bytearray)):
        return json.loads(value)
    return value


def _bank_slug(bank_id: str) -> str:
    # Deterministic and collision-free: the sanitised id keeps names readable, the hash of the
    # exact id separates ids that sanitise alike ("a.b" / "a-b") or differ only in case.
    slug = re.sub(r"[^A-Za-z0-9_]", "_", bank_id)[:48]
    digest = hashlib.sha256(bank_id.encode("utf-8")).hexdigest()[:12]
    return f"{slug}_{digest}"


def collection_names(prefix: str, bank_id: str) -> dict[str, str]:
    """The collection names of one bank: ``{"units": ..., "chunks": ..., "entities": ...}``.

    Valid Milvus names (letters, digits, underscores; under 255 chars) derived from any valid
    bank id, deterministic and collision-free (sanitised prefix of the id plus a 48-bit hash
    of it)."""
    check_bank_id(bank_id)
    slug = _bank_slug(bank_id)
    return {"units": f"{prefix}_u_{slug}", "chunks": f"{prefix}_c_{slug}",
            "entities": f"{prefix}_e_{slug}"}


def filter_expr(flt: UnitFilter | None) -> str:
    """Translate a :class:`UnitFilter` into a Milvus filter expression over a units collection
    ("" for no restriction). String values are escaped with :func:`escape_string`."""
    if flt is None:
        return ""
    parts: list[str] = []
    if flt.fact_types:
        types = [FactType(t).value for t in flt.fact_types]
        parts.append(f"fact_type in {_str_list(types)}")
    if flt.tags:
        if flt.tags_match not in ("any", "all"):
            raise ValueError(f"tags_match must be 'any' or 'all', got {flt.tags_match!r}")
        fn = "array_contains_any" if flt.tags_match == "any" else "array_contains_all"
        parts.append(f"{fn}(tags, {_str_list(flt.tags)})")
    if flt.document_id:
        parts.append(f"document_id == {escape_string(flt.document_id)}")
    if flt.as_of is not None:
        at = _to_us(flt.as_of)
        # known by then (valid_from None means "from mention", already implied by the first
        # clause) and not yet invalidated then
        parts.append(f"mentioned_at <= {at}")
        parts.append(f"(valid_from == {NONE_TIME_US} or valid_from <= {at})")
        parts.append(f"(invalid_at == {NONE_TIME_US} or invalid_at > {at})")
    elif flt.only_valid:
        parts.append(f"invalid_at == {NONE_TIME_US}")
    return " and ".join(f"({p})" for p in parts)


def unit_from_fields(bank_id: str, id: str, fields: dict[str, Any]) -> MemoryUnit:  # noqa: A002
    """Build a MemoryUnit from a search hit's fields without another round trip.

    Times may be epoch seconds (as in ``Hit.fields``), ISO strings or datetimes; hits carry
    whole seconds, so sub-second parts are lost (``get_units`` returns exact times). An
    ``embedding`` key, when present, is kept. Unknown keys are ignored."""
    data = {k: v for k, v in fields.items() if k in MemoryUnit.model_fields}
    for key in _UNIT_TIME_FIELDS:
        if key in data:
            data[key] = _to_dt(data[key])
    if "links" in data:
        data["links"] = [Link.model_validate(_json_value(x)) for x in _json_value(data["links"])]
    if "history" in data:
        data["history"] = [OpinionChange.model_validate(_json_value(x))
                           for x in _json_value(data["history"])]
    if "metadata" in data:
        data["metadata"] = _json_value(data["metadata"]) or {}
    data["id"], data["bank_id"] = id, bank_id
    return MemoryUnit.model_validate(data)


# ---------------------------------------------------------------------------------------------
# Row conversion
# ---------------------------------------------------------------------------------------------
def _truncate_bytes(value: str, limit: int) -> str:
    """Cut an analysed (indexing-only) string to ``limit`` UTF-8 bytes at a token boundary."""
    data = value.encode()
    if len(data) <= limit:
        return value
    return data[:limit].decode(errors="ignore").rsplit(" ", 1)[0]


def _check_bytes(what: str, value: str, limit: int) -> str:
    n = len(value.encode("utf-8"))
    if n > limit:
        raise ValueError(f"{what} is {n} bytes of UTF-8, the limit is {limit}")
    return value


def _check_list(what: str, values: Sequence[str]) -> list[str]:
    if len(values) > MAX_ARRAY:
        raise ValueError(f"{what} has {len(values)} items, the limit is {MAX_ARRAY}")
    for v in values:
        _check_bytes(f"an item of {what}", v, MAX_ID_BYTES)
    return list(values)


def _check_json(what: str, value: Any) -> Any:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from None
    _check_bytes(what, text, MAX_TEXT_BYTES)
    return value


def _raw_unit_fields(raw: dict[str, Any], keys: Sequence[str] = UNIT_HIT_FIELDS) -> dict[str, Any]:
    """Stored row -> Hit.fields (times in epoch seconds or None, sentinels hidden), for
    ``keys`` only."""
    if keys is not UNIT_HIT_FIELDS:
        full = _raw_unit_fields(raw)
        return {k: full[k] for k in keys}
    f: dict[str, Any] = {}
    for key in UNIT_HIT_FIELDS:
        f[key] = raw.get(key)
    for key in _UNIT_TIME_FIELDS:
        f[key] = _us_to_s(raw.get(key))
    conf = raw.get("confidence")
    f["confidence"] = None if conf is None or conf < 0 else float(conf)
    for key in _UNIT_LIST_FIELDS:
        f[key] = list(raw.get(key) or [])
    f["links"] = list(_json_value(raw.get("links")) or [])
    f["history"] = list(_json_value(raw.get("history")) or [])
    f["metadata"] = _json_value(raw.get("metadata")) or {}
    f["proof_count"] = int(raw.get("proof_count") or 0)
    return f


def _raw_to_unit(bank_id: str, raw: dict[str, Any], with_embedding: bool) -> MemoryUnit:
    """Stored row -> MemoryUnit with exact (microsecond) times."""
    data = _raw_unit_fields(raw)
    for key in _UNIT_TIME_FIELDS:
        data[key] = _from_us(raw.get(key))
    data["links"] = [Link.model_validate(x) for x in data["links"]]
    data["history"] = [OpinionChange.model_validate(x) for x in data["history"]]
    data["id"], data["bank_id"] = raw["id"], bank_id
    if with_embedding and raw.get("embedding") is not None:
        data["embedding"] = [float(x) for x in raw["embedding"]]
    return MemoryUnit.model_validate(data)


def _effective_interval(u: MemoryUnit) -> tuple[int, int]:
    """Occurrence interval used by search_time: missing ends fall back to the other end, and a
    unit with no occurrence time to its mention time."""
    start = u.occurred_start or u.occurred_end or u.mentioned_at
    end = u.occurred_end or u.occurred_start or u.mentioned_at
    s, e = _to_us(start), _to_us(end)
    return (s, e) if s <= e else (e, s)


# ---------------------------------------------------------------------------------------------
# The store
# ---------------------------------------------------------------------------------------------
class MilvusStore:
    """The VectorStore on Milvus (Lite file, Lite server or a Milvus server).

    ``MilvusStore(settings, dim)`` opens ``settings.milvus_target()``: Milvus Lite under
    ``settings.data_dir`` by default (the directory is created), else the server URI in
    ``settings.milvus_uri`` with ``settings.milvus_token``. One collection set per bank (units,
    chunks, entities; see the module docstring for the measurements behind that) plus a global
    banks collection. Thread-safe: reads run concurrently, writes are serialised.

    ``flush_writes`` (default: True on Milvus Lite, False on a server) flushes the collections a
    write call touched before it returns, which keeps Lite searches off its slow memtable path.
    """

    def __init__(self, settings: Settings, dim: int, *, flush_writes: bool | None = None) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 32_768:
            raise ValueError(f"dim must be an int in [1, 32768], got {dim!r}")
        prefix = settings.collection_prefix
        if not _PREFIX_RE.match(prefix or ""):
            raise ValueError(f"collection_prefix {prefix!r} must match {_PREFIX_RE.pattern}")
        self.settings = settings
        self.dim = dim
        self.prefix = prefix
        self._lite_path: str | None = None
        target = settings.milvus_target()
        if not settings.milvus_uri:
            Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
            self._lite_path = str(Path(target).resolve())
            target = self._lite_path
            with _LITE_LOCK:
                _LITE_REFS[self._lite_path] = _LITE_REFS.get(self._lite_path, 0) + 1
        try:
            self._client = MilvusClient(uri=target, token=settings.milvus_token or "")
            db = settings.milvus_db or "default"
            if db != "default":
                if db not in self._client.list_databases():
                    try:
                        self._client.create_database(db)
                    except MilvusException:  # created meanwhile by another client
                        pass
                self._client.use_database(db)
            version = str(self._client.get_server_version())
        except MilvusException as exc:
            self._release_lite()
            if self._lite_path is None:
                raise
            raise RuntimeError(
                f"cannot open Milvus Lite at {self._lite_path} ({exc}); a data directory is "
                "opened by one process only: run `milvus-lite server --data-dir DIR --host "
                "127.0.0.1 --port P` and set MEMLANE_MILVUS_URI=http://127.0.0.1:P to share it"
            ) from exc
        except Exception:
            self._release_lite()
            raise
        #: True when the server is Milvus Lite (file or ``milvus-lite server``).
        self.is_lite = version.startswith("milvus_lite")
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
        if self._lite_path is None:
            return
        with _LITE_LOCK:
            left = _LITE_REFS.get(self._lite_path, 1) - 1
            if left > 0:
                _LITE_REFS[self._lite_path] = left
                return
            _LITE_REFS.pop(self._lite_path, None)
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(self._lite_path)  # flushes, frees the dir lock

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

    def __enter__(self) -> "MilvusStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _names(self, bank_id: str) -> dict[str, str]:
        return collection_names(self.prefix, bank_id)

    def _schema(self, kind: str):
        c = self.client
        s = c.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_ID_BYTES)
        ip = c.prepare_index_params()
        arr = dict(element_type=DataType.VARCHAR, max_capacity=MAX_ARRAY, max_length=MAX_ID_BYTES)
        if kind == "units":
            s.add_field("bank_id", DataType.VARCHAR, max_length=128)
            s.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
            s.add_field("context", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
            # BM25 input: text + context, analysed in Python (memlane/stores/lexical.py).
            s.add_field("lexical", DataType.VARCHAR, max_length=MAX_TEXT_BYTES,
                        enable_analyzer=True, analyzer_params=ANALYZER_PARAMS)
            s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            s.add_field("embedding", DataType.FLOAT_VECTOR, dim=self.dim)
            s.add_field("fact_type", DataType.VARCHAR, max_length=16)
            for name in (*_UNIT_TIME_FIELDS, "t_start", "t_end", "proof_count"):
                s.add_field(name, DataType.INT64)
            s.add_field("confidence", DataType.DOUBLE)
            s.add_field("document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
            s.add_field("chunk_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
            for name in (*_UNIT_LIST_FIELDS, "link_targets"):
                s.add_field(name, DataType.ARRAY, **arr)
            s.add_field("superseded_by", DataType.VARCHAR, max_length=MAX_ID_BYTES, nullable=True)
            for name in ("links", "history", "metadata"):
                s.add_field(name, DataType.JSON)
            s.add_function(Function(name="text_bm25", function_type=FunctionType.BM25,
                                    input_field_names=["lexical"], output_field_names=["sparse"]))
            # FLAT: exact COSINE; at one bank's size a brute-force scan is 24 ms p50 (above).
            ip.add_index("embedding", index_type="FLAT", metric_type="COSINE")
            ip.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
            return s, ip
        if kind == "chunks":
            s.add_field("bank_id", DataType.VARCHAR, max_length=128)
            s.add_field("document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
            s.add_field("session_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
            s.add_field("index", DataType.INT64)
            s.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
            s.add_field("turn_ids", DataType.ARRAY, **arr)
            s.add_field("started_at", DataType.INT64)
            s.add_field("tags", DataType.ARRAY, **arr)
        elif kind == "entities":
            s.add_field("bank_id", DataType.VARCHAR, max_length=128)
            s.add_field("name", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
            s.add_field("type", DataType.VARCHAR, max_length=MAX_ID_BYTES)
            s.add_field("aliases", DataType.ARRAY, **arr)
            s.add_field("mention_count", DataType.INT64)
            s.add_field("first_seen", DataType.INT64)
            s.add_field("last_seen", DataType.INT64)
        elif kind == "revisions":
            s.add_field("revision", DataType.VARCHAR, max_length=64)
        elif kind == "operations":
            s.add_field("record", DataType.JSON)
        elif kind == "banks":
            s.add_field("name", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
            s.add_field("background", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
            s.add_field("disposition", DataType.JSON)
            s.add_field("created_at", DataType.INT64)
            s.add_field("updated_at", DataType.INT64)
        else:  # pragma: no cover - internal misuse
            raise ValueError(f"unknown collection kind {kind!r}")
        s.add_field("_v", DataType.FLOAT_VECTOR, dim=len(_PLACEHOLDER))
        ip.add_index("_v", index_type="FLAT", metric_type="L2")
        return s, ip

    def _ensure(self, name: str, kind: str) -> None:
        """Create (or open and load) a collection for writing."""
        if name in self._ready:
            return
        with self._write_lock:
            if name in self._ready:
                return
            c = self.client
            if not c.has_collection(name):
                schema, ip = self._schema(kind)
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
                        raise ValueError(f"collection {name} holds {have}-d embeddings but the "
                                         f"store was opened with dim={self.dim}")
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
            if _is_missing(exc):
                return False
            raise
        return True

    def _ensure_bank(self, bank_id: str) -> dict[str, str]:
        """Create the bank's collections for writing; register a default Bank record if the
        bank has none, so list_banks and delete_bank always see banks that hold data."""
        names = self._names(bank_id)
        if all(n in self._ready for n in names.values()):
            return names
        with self._write_lock:
            for kind, name in names.items():
                self._ensure(name, kind)
            if self.get_bank(bank_id) is None:
                self._upsert_rows(self._banks, [self._bank_row(Bank(bank_id=bank_id,
                                                                    name=bank_id))])
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
                    if attempt or not _is_missing(exc):
                        raise
                    for name in names.values():
                        self._forget(name)

    def _flush(self, names: Iterable[str]) -> None:
        if self.flush_writes:
            for name in dict.fromkeys(names):
                self.client.flush(name)

    def _upsert_rows(self, name: str, rows: list[dict[str, Any]], flush: bool = True) -> None:
        if not rows:
            return
        with self._write_lock:
            for i in range(0, len(rows), WRITE_BATCH):
                self.client.upsert(name, rows[i:i + WRITE_BATCH])
            if flush:
                self._flush([name])

    def _delete_ids(self, name: str, ids: Sequence[str]) -> None:
        with self._write_lock:
            for i in range(0, len(ids), ID_BATCH):
                self.client.delete(name, filter=f"id in {_str_list(ids[i:i + ID_BATCH])}")

    def _get_rows(self, name: str, ids: Sequence[str], fields: list[str]) -> list[dict[str, Any]]:
        """Rows by primary key, in the order of ``ids`` (duplicates and misses dropped)."""
        ids = list(dict.fromkeys(ids))
        found: dict[str, dict[str, Any]] = {}
        for i in range(0, len(ids), ID_BATCH):
            # exactly "id in [...]": Lite's point-lookup path
            expr = f"id in {_str_list(ids[i:i + ID_BATCH])}"
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

    def _forget(self, name: str) -> None:
        self._ready.discard(name)

    def _read(self, bank_id: str, kind: str, fn, default):
        """Run a read against one of the bank's collections; a missing collection (never
        created, or dropped by another client meanwhile) reads as ``default``."""
        name = self._names(check_bank_id(bank_id))[kind]
        if not self._open(name, kind):
            return default
        try:
            return fn(name)
        except MilvusException as exc:
            if _is_missing(exc):
                for other in self._names(bank_id).values():  # dropped together
                    self._forget(other)
                return default
            raise

    # -------------------------------------------------------------------------------- banks
    @staticmethod
    def _bank_row(bank: Bank) -> dict[str, Any]:
        check_bank_id(bank.bank_id)
        return {
            "id": bank.bank_id, "name": _check_bytes("bank name", bank.name, MAX_TEXT_BYTES),
            "background": _check_bytes("bank background", bank.background, MAX_TEXT_BYTES),
            "disposition": bank.disposition.model_dump(mode="json"),
            "created_at": _to_us(bank.created_at), "updated_at": _to_us(bank.updated_at),
            "_v": _PLACEHOLDER,
        }

    @staticmethod
    def _row_bank(row: dict[str, Any]) -> Bank:
        return Bank(bank_id=row["id"], name=row.get("name") or "",
                    background=row.get("background") or "",
                    disposition=Disposition.model_validate(_json_value(row.get("disposition"))
                                                           or {}),
                    created_at=_from_us(row["created_at"]), updated_at=_from_us(row["updated_at"]))

    def upsert_bank(self, bank: Bank) -> None:
        """Insert or replace a bank's profile (name, background, disposition, times)."""
        if not isinstance(bank, Bank):
            raise ValueError(f"upsert_bank takes a Bank, got {type(bank).__name__}")
        self._upsert_rows(self._banks, [self._bank_row(bank)])

    def get_bank(self, bank_id: str) -> Bank | None:
        """The bank's profile, or None for an unknown bank."""
        check_bank_id(bank_id)
        rows = self._get_rows(self._banks, [bank_id], _BANK_OUT)
        return self._row_bank(rows[0]) if rows else None

    def list_banks(self) -> list[Bank]:
        """Every bank with a profile, sorted by id (read from the banks collection)."""
        rows = self._query_all(self._banks, "", _BANK_OUT)
        return sorted((self._row_bank(r) for r in rows), key=lambda b: b.bank_id)

    def delete_bank(self, bank_id: str) -> None:
        """Remove the bank and everything in it (its three collections and its profile). A no-op
        for an unknown bank."""
        names = self._names(check_bank_id(bank_id))
        with self._write_lock:
            c = self.client
            for name in names.values():
                self._forget(name)
                if c.has_collection(name):
                    c.drop_collection(name)
            self._delete_ids(self._banks, [bank_id])
            self._delete_ids(self._revisions, [bank_id])
            self._flush([self._banks, self._revisions])

    # ---------------------------------------------------------------------------- revisions
    def get_revision(self, bank_id: str) -> str:
        """The bank's revision token ('' before its first write). Processes that cache derived
        data of a bank (search index, graph) compare it to know when to refresh."""
        rows = self._get_rows(self._revisions, [check_bank_id(bank_id)], ["id", "revision"])
        return rows[0]["revision"] if rows else ""

    def bump_revision(self, bank_id: str) -> str:
        """Give the bank a new random revision token and return it. Called after every write
        to the bank; random, not a counter, so concurrent writers never need to read first."""
        token = uuid.uuid4().hex
        self._upsert_rows(self._revisions, [{"id": check_bank_id(bank_id), "revision": token,
                                             "_v": _PLACEHOLDER}])
        return token

    # --------------------------------------------------------------------------- operations
    def put_operation(self, op_id: str, record: dict[str, Any]) -> None:
        """Insert or replace the JSON record of a background operation (an async retain), so
        any process can report its status."""
        if not isinstance(op_id, str) or not 0 < len(op_id.encode()) <= MAX_ID_BYTES:
            raise ValueError(f"invalid operation id {op_id!r}")
        self._upsert_rows(self._operations, [{"id": op_id, "record": _check_json("operation",
                                                                                  record),
                                              "_v": _PLACEHOLDER}])

    def get_operation(self, op_id: str) -> dict[str, Any] | None:
        """The operation's record, or None for an unknown id."""
        if not isinstance(op_id, str) or not op_id:
            return None
        rows = self._get_rows(self._operations, [op_id], ["id", "record"])
        return _json_value(rows[0]["record"]) if rows else None

    # -------------------------------------------------------------------------------- units
    def _unit_row(self, bank_id: str, u: MemoryUnit, embedding: Sequence[float]) -> dict[str, Any]:
        vec = np.asarray(embedding, dtype=np.float32)
        if vec.shape != (self.dim,):
            raise ValueError(f"unit {u.id!r}: embedding has shape {vec.shape}, the store's "
                             f"dim is {self.dim}")
        if not np.all(np.isfinite(vec)):
            raise ValueError(f"unit {u.id!r}: embedding has NaN or infinite values")
        t_start, t_end = _effective_interval(u)
        what = f"unit {u.id!r}"
        return {
            "id": _check_bytes(f"{what} id", u.id, MAX_ID_BYTES), "bank_id": bank_id,
            "text": _check_bytes(f"{what} text", u.text, MAX_TEXT_BYTES),
            "context": _check_bytes(f"{what} context", u.context, MAX_TEXT_BYTES),
            "lexical": _truncate_bytes(analyze(f"{u.text} {u.context}"), MAX_TEXT_BYTES),
            "embedding": vec.tolist(), "fact_type": FactType(u.fact_type).value,
            "occurred_start": _to_us(u.occurred_start), "occurred_end": _to_us(u.occurred_end),
            "mentioned_at": _to_us(u.mentioned_at), "valid_from": _to_us(u.valid_from),
            "invalid_at": _to_us(u.invalid_at), "t_start": t_start, "t_end": t_end,
            "proof_count": u.proof_count,
            "confidence": NO_CONFIDENCE if u.confidence is None else float(u.confidence),
            "document_id": _check_bytes(f"{what} document_id", u.document_id, MAX_ID_BYTES),
            "chunk_id": _check_bytes(f"{what} chunk_id", u.chunk_id, MAX_ID_BYTES),
            **{k: _check_list(f"{what} {k}", getattr(u, k)) for k in _UNIT_LIST_FIELDS},
            "link_targets": _check_list(f"{what} links",
                                        list(dict.fromkeys(x.target_id for x in u.links))),
            "superseded_by": (None if u.superseded_by is None else
                              _check_bytes(f"{what} superseded_by", u.superseded_by,
                                           MAX_ID_BYTES)),
            "links": [{"target_id": x.target_id, "type": x.type.value, "weight": x.weight}
                      for x in u.links],
            "history": _check_json(f"{what} history",
                                   [h.model_dump(mode="json") for h in u.history]),
            "metadata": _check_json(f"{what} metadata", u.metadata),
        }

    def upsert_units(self, bank_id: str, units: Sequence[MemoryUnit]) -> None:
        """Insert or replace units (keyed by ``unit.id``); rewriting the same units never
        duplicates. A unit without an embedding keeps the one already stored (so a unit read
        without its vector can be updated and written back); a new unit needs one. Every unit
        is validated before anything is written."""
        check_bank_id(bank_id)
        latest: dict[str, MemoryUnit] = {}
        for u in units or ():
            if not isinstance(u, MemoryUnit):
                raise ValueError(f"upsert_units takes MemoryUnit objects, got {type(u).__name__}")
            if u.bank_id != bank_id:
                raise ValueError(f"unit {u.id!r} belongs to bank {u.bank_id!r}, not {bank_id!r}")
            latest[u.id] = u  # the last copy of an id wins, as with sequential upserts
        if not latest:
            return

        def write(names: dict[str, str]) -> None:
            missing = [i for i, u in latest.items() if u.embedding is None]
            stored: dict[str, list[float]] = {}
            if missing:
                for row in self._get_rows(names["units"], missing, ["id", "embedding"]):
                    stored[row["id"]] = row["embedding"]
                absent = [i for i in missing if i not in stored]
                if absent:
                    raise ValueError(f"units {absent[:5]} have no embedding and none is stored")
            rows = [self._unit_row(bank_id, u, u.embedding if u.embedding is not None
                                   else stored[u.id]) for u in latest.values()]
            self._upsert_rows(names["units"], rows)

        self._write_bank(bank_id, write)

    def get_units(self, bank_id: str, ids: Sequence[str], *,
                  with_embedding: bool = False) -> list[MemoryUnit]:
        """Units by id, in the order asked (unknown ids skipped, duplicates once)."""
        ids = [i for i in (ids or ()) if isinstance(i, str)]
        if not ids:
            check_bank_id(bank_id)
            return []
        fields = _UNIT_OUT + (["embedding"] if with_embedding else [])
        rows = self._read(bank_id, "units", lambda n: self._get_rows(n, ids, fields), [])
        return [_raw_to_unit(bank_id, r, with_embedding) for r in rows]

    def iter_units(self, bank_id: str, *, with_embedding: bool = False,
                   batch_size: int = 2000) -> Iterator[list[MemoryUnit]]:
        """All units of the bank in pages of at most ``batch_size``, in id order.

        Lists the ids once (a light query), then fetches each page by id through the point
        lookup path: linear in the bank's size, and not bound by Milvus's 16,384-row query
        window. Units written meanwhile may be missed; deleted ones are skipped."""
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        ids = self._read(bank_id, "units", lambda n: self._query_all(n, "", ["id"]), [])
        ids = sorted(r["id"] for r in ids)
        fields = _UNIT_OUT + (["embedding"] if with_embedding else [])
        for i in range(0, len(ids), batch_size):
            page = ids[i:i + batch_size]
            rows = self._read(bank_id, "units", lambda n, p=page: self._get_rows(n, p, fields), [])
            if rows:
                yield [_raw_to_unit(bank_id, r, with_embedding) for r in rows]

    def list_unit_ids(self, bank_id: str, flt: UnitFilter | None = None) -> list[str]:
        """Ids of the bank's units that pass ``flt`` (all units, invalidated ones included,
        when None), sorted; [] for an unknown bank."""
        expr = filter_expr(flt)
        rows = self._read(bank_id, "units", lambda n: self._query_all(n, expr, ["id"]), [])
        return sorted(r["id"] for r in rows)

    def document_counts(self, bank_id: str) -> dict[str, dict[str, int]]:
        """``{document_id: {"units": n, "chunks": m}}`` for every document of the bank."""
        out: dict[str, dict[str, int]] = {}
        for kind in ("units", "chunks"):
            rows = self._read(bank_id, kind, lambda n: self._query_all(n, "", ["document_id"]), [])
            for r in rows:
                counts = out.setdefault(r["document_id"], {"units": 0, "chunks": 0})
                counts[kind] += 1
        return dict(sorted(out.items()))

    def count_units(self, bank_id: str) -> int:
        """Number of units in the bank (0 for an unknown bank)."""
        return self._read(bank_id, "units", self._count, 0)

    def delete_units(self, bank_id: str, ids: Sequence[str]) -> int:
        """Delete units by id; returns how many existed. Links of other units that pointed at
        them are removed too, so no stored link dangles."""
        ids = list(dict.fromkeys(i for i in (ids or ()) if isinstance(i, str)))
        if not ids:
            check_bank_id(bank_id)
            return 0
        with self._write_lock:
            existing = self._read(bank_id, "units",
                                  lambda n: [r["id"] for r in self._get_rows(n, ids, ["id"])], [])
            if not existing:
                return 0
            name = self._names(bank_id)["units"]
            self._delete_ids(name, existing)
            self._prune_links(bank_id, name, existing)
            self._flush([name])
            return len(existing)

    def _prune_links(self, bank_id: str, name: str, deleted: Sequence[str]) -> None:
        gone = set(deleted)
        fields = _UNIT_OUT + ["embedding"]
        for i in range(0, len(deleted), ID_BATCH):
            expr = f"array_contains_any(link_targets, {_str_list(deleted[i:i + ID_BATCH])})"
            rows = self._query_all(name, expr, fields)
            units = [_raw_to_unit(bank_id, r, True) for r in rows if r["id"] not in gone]
            fixed = [u.model_copy(update={"links": [x for x in u.links if x.target_id not in gone]})
                     for u in units]
            self._upsert_rows(name, [self._unit_row(bank_id, u, u.embedding) for u in fixed],
                              flush=False)

    def delete_document(self, bank_id: str, document_id: str) -> dict[str, int]:
        """Delete a document's units and chunks; returns ``{"units": n, "chunks": m}``. Links of
        remaining units that pointed at the deleted units are removed."""
        if not isinstance(document_id, str) or not document_id:
            raise ValueError(f"document_id must be a non-empty string, got {document_id!r}")
        check_bank_id(bank_id)
        expr = f"document_id == {escape_string(document_id)}"
        with self._write_lock:
            unit_ids = [r["id"] for r in self._read(
                bank_id, "units", lambda n: self._query_all(n, expr, ["id"]), [])]
            chunk_ids = [r["id"] for r in self._read(
                bank_id, "chunks", lambda n: self._query_all(n, expr, ["id"]), [])]
            names = self._names(bank_id)
            if unit_ids:
                self._delete_ids(names["units"], unit_ids)
                self._prune_links(bank_id, names["units"], unit_ids)
            if chunk_ids:
                self._delete_ids(names["chunks"], chunk_ids)
            self._flush([names[k] for k, ids in (("units", unit_ids), ("chunks", chunk_ids))
                         if ids])
        return {"units": len(unit_ids), "chunks": len(chunk_ids)}

    # ------------------------------------------------------------------------------- chunks
    @staticmethod
    def _chunk_row(bank_id: str, ch: Chunk) -> dict[str, Any]:
        what = f"chunk {ch.chunk_id!r}"
        return {
            "id": _check_bytes(f"{what} id", ch.chunk_id, MAX_ID_BYTES), "bank_id": bank_id,
            "document_id": _check_bytes(f"{what} document_id", ch.document_id, MAX_ID_BYTES),
            "session_id": _check_bytes(f"{what} session_id", ch.session_id, MAX_ID_BYTES),
            "index": ch.index, "text": _check_bytes(f"{what} text", ch.text, MAX_TEXT_BYTES),
            "turn_ids": _check_list(f"{what} turn_ids", ch.turn_ids),
            "started_at": _to_us(ch.started_at), "tags": _check_list(f"{what} tags", ch.tags),
            "_v": _PLACEHOLDER,
        }

    @staticmethod
    def _row_chunk(bank_id: str, r: dict[str, Any]) -> Chunk:
        return Chunk(chunk_id=r["id"], bank_id=bank_id, document_id=r["document_id"],
                     session_id=r["session_id"], index=int(r["index"]), text=r["text"],
                     turn_ids=list(r.get("turn_ids") or []), started_at=_from_us(r["started_at"]),
                     tags=list(r.get("tags") or []))

    def upsert_chunks(self, bank_id: str, chunks: Sequence[Chunk]) -> None:
        """Insert or replace source chunks (keyed by ``chunk_id``)."""
        check_bank_id(bank_id)
        latest: dict[str, dict[str, Any]] = {}
        for ch in chunks or ():
            if not isinstance(ch, Chunk):
                raise ValueError(f"upsert_chunks takes Chunk objects, got {type(ch).__name__}")
            if ch.bank_id != bank_id:
                raise ValueError(f"chunk {ch.chunk_id!r} belongs to bank {ch.bank_id!r}, "
                                 f"not {bank_id!r}")
            latest[ch.chunk_id] = self._chunk_row(bank_id, ch)
        if latest:
            self._write_bank(bank_id, lambda names: self._upsert_rows(names["chunks"],
                                                                      list(latest.values())))

    def get_chunks(self, bank_id: str, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id, in the order asked (unknown ids skipped)."""
        ids = [i for i in (ids or ()) if isinstance(i, str)]
        if not ids:
            check_bank_id(bank_id)
            return []
        rows = self._read(bank_id, "chunks", lambda n: self._get_rows(n, ids, _CHUNK_OUT), [])
        return [self._row_chunk(bank_id, r) for r in rows]

    def count_chunks(self, bank_id: str) -> int:
        """Number of chunks in the bank (0 for an unknown bank)."""
        return self._read(bank_id, "chunks", self._count, 0)

    # ----------------------------------------------------------------------------- entities
    @staticmethod
    def _entity_row(bank_id: str, e: Entity) -> dict[str, Any]:
        what = f"entity {e.entity_id!r}"
        return {
            "id": _check_bytes(f"{what} id", e.entity_id, MAX_ID_BYTES), "bank_id": bank_id,
            "name": _check_bytes(f"{what} name", e.name, MAX_TEXT_BYTES),
            "type": _check_bytes(f"{what} type", e.type, MAX_ID_BYTES),
            "aliases": _check_list(f"{what} aliases", e.aliases),
            "mention_count": e.mention_count, "first_seen": _to_us(e.first_seen),
            "last_seen": _to_us(e.last_seen), "_v": _PLACEHOLDER,
        }

    @staticmethod
    def _row_entity(bank_id: str, r: dict[str, Any]) -> Entity:
        return Entity(entity_id=r["id"], bank_id=bank_id, name=r["name"], type=r["type"],
                      aliases=list(r.get("aliases") or []), mention_count=int(r["mention_count"]),
                      first_seen=_from_us(r["first_seen"]), last_seen=_from_us(r["last_seen"]))

    def upsert_entities(self, bank_id: str, entities: Sequence[Entity]) -> None:
        """Insert or replace entities (keyed by ``entity_id``)."""
        check_bank_id(bank_id)
        latest: dict[str, dict[str, Any]] = {}
        for e in entities or ():
            if not isinstance(e, Entity):
                raise ValueError(f"upsert_entities takes Entity objects, got {type(e).__name__}")
            if e.bank_id != bank_id:
                raise ValueError(f"entity {e.entity_id!r} belongs to bank {e.bank_id!r}, "
                                 f"not {bank_id!r}")
            latest[e.entity_id] = self._entity_row(bank_id, e)
        if latest:
            self._write_bank(bank_id, lambda names: self._upsert_rows(names["entities"],
                                                                      list(latest.values())))

    def list_entities(self, bank_id: str) -> list[Entity]:
        """All entities of the bank, sorted by id."""
        rows = self._read(bank_id, "entities", lambda n: self._query_all(n, "", _ENTITY_OUT), [])
        return sorted((self._row_entity(bank_id, r) for r in rows), key=lambda e: e.entity_id)

    def delete_entities(self, bank_id: str, ids: Sequence[str]) -> int:
        """Delete entities by id; returns how many existed."""
        ids = list(dict.fromkeys(i for i in (ids or ()) if isinstance(i, str)))
        if not ids:
            check_bank_id(bank_id)
            return 0
        with self._write_lock:
            existing = self._read(bank_id, "entities",
                                  lambda n: [r["id"] for r in self._get_rows(n, ids, ["id"])], [])
            if existing:
                name = self._names(bank_id)["entities"]
                self._delete_ids(name, existing)
                self._flush([name])
            return len(existing)

    # ------------------------------------------------------------------------------- search
    @staticmethod
    def _limit(limit: int) -> int:
        if not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 0:
            raise ValueError(f"limit must be a non-negative int, got {limit!r}")
        if limit > MAX_TOPK:
            raise ValueError(f"limit {limit} exceeds Milvus's maximum of {MAX_TOPK}")
        return int(limit)

    @staticmethod
    def _hits(results, score, keys: Sequence[str]) -> list[list[Hit]]:
        if not keys:
            return [[Hit(id=h["id"], score=score(float(h["distance"]))) for h in hits]
                    for hits in results]
        return [[Hit(id=h["id"], score=score(float(h["distance"])),
                     fields=_raw_unit_fields(h.get("entity") or {}, keys)) for h in hits]
                for hits in results]

    @staticmethod
    def _output(fields: Sequence[str] | None) -> tuple[Sequence[str], list[str]]:
        """(hit keys, Milvus output fields) for a search's ``fields`` argument.

        Shipping every field of 300 hits through Lite's gRPC cost 37 ms per search against 4 ms
        for ids only (419-unit bank), so hot paths ask for the fields they use."""
        if fields is None:
            return UNIT_HIT_FIELDS, list(UNIT_HIT_FIELDS)
        unknown = set(fields) - set(UNIT_HIT_FIELDS)
        if unknown:
            raise ValueError(f"unknown unit fields {sorted(unknown)}")
        # An empty output list makes Milvus Lite return every field: ask for the key alone.
        return tuple(fields), list(fields) or ["id"]

    def get_unit_fields(self, bank_id: str, ids: Sequence[str],
                        fields: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """Hit-style fields (times in epoch seconds) by unit id, all of them or ``fields``;
        unknown ids are absent from the result."""
        ids = [i for i in (ids or ()) if isinstance(i, str)]
        check_bank_id(bank_id)
        if not ids:
            return {}
        keys, out = self._output(fields)
        rows = self._read(bank_id, "units", lambda n: self._get_rows(n, ids, ["id", *out]), [])
        return {r["id"]: _raw_unit_fields(r, keys) for r in rows}

    def search_dense(self, bank_id: str, vectors: np.ndarray, limit: int,
                     flt: UnitFilter | None = None, fields: Sequence[str] | None = None) -> list[list[Hit]]:
        """COSINE search; one hit list per query vector (rows of ``vectors``; a single 1-d
        vector is taken as a batch of one), best first, score = cosine similarity. ``fields``
        limits the hit fields (None: all)."""
        check_bank_id(bank_id)
        limit = self._limit(limit)
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim == 1 and arr.size:
            arr = arr[None, :]
        if arr.ndim != 2 or (arr.size and arr.shape[1] != self.dim):
            raise ValueError(f"query vectors must have shape (n, {self.dim}), got {arr.shape}")
        if arr.shape[0] == 0:
            return []
        if not np.all(np.isfinite(arr)):
            raise ValueError("query vectors contain NaN or infinite values")
        if limit == 0:
            return [[] for _ in range(arr.shape[0])]
        expr = filter_expr(flt)
        keys, out = self._output(fields)
        res = self._read(bank_id, "units", lambda n: self.client.search(
            n, data=arr.tolist(), anns_field="embedding", limit=limit, filter=expr,
            output_fields=out, search_params={"metric_type": "COSINE"}), None)
        if res is None:
            return [[] for _ in range(arr.shape[0])]
        return self._hits(res, lambda d: d, keys)

    def search_lexical(self, bank_id: str, text: str, limit: int,
                       flt: UnitFilter | None = None, fields: Sequence[str] | None = None) -> list[Hit]:
        """BM25 over unit text plus its context; scores positive, best first. A query of
        nothing but stop words gives []."""
        check_bank_id(bank_id)
        limit = self._limit(limit)
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        query = analyze(text)
        if not query or limit == 0:
            return []  # nothing but stop words: BM25 has nothing to match
        expr = filter_expr(flt)
        keys, out = self._output(fields)
        res = self._read(bank_id, "units", lambda n: self.client.search(
            n, data=[query], anns_field="sparse", limit=limit, filter=expr,
            output_fields=out, search_params={"metric_type": "BM25"}), None)
        if not res:
            return []
        # Lite returns BM25 negated (best = most negative), a server positive: abs() fits both.
        hits = self._hits(res, abs, keys)[0]
        hits.sort(key=lambda h: -h.score)  # stable: keeps the engine's order among ties
        return hits

    def search_time(self, bank_id: str, start: datetime, end: datetime, limit: int,
                    flt: UnitFilter | None = None, fields: Sequence[str] | None = None) -> list[Hit]:
        """Units whose occurrence interval overlaps [start, end] (a unit with one end uses it
        for both; one with no occurrence time uses its mention time); score 0. When more than
        ``limit`` overlap, those whose interval middle is nearest the query's middle are kept
        (ties by id), in that order."""
        check_bank_id(bank_id)
        limit = self._limit(limit)
        if not isinstance(start, datetime) or not isinstance(end, datetime):
            raise ValueError("start and end must be datetimes")
        s, e = _to_us(start), _to_us(end)
        if s > e:
            raise ValueError(f"start {start} is after end {end}")
        if limit == 0:
            return []
        expr = f"(t_start <= {e}) and (t_end >= {s})"
        extra = filter_expr(flt)
        if extra:
            expr = f"{expr} and {extra}"
        mid2 = s + e  # twice the middle: integer arithmetic
        keys, out = self._output(fields)

        def run(name: str) -> list[Hit]:
            cands = self._query_all(name, expr, ["id", "t_start", "t_end"])
            cands.sort(key=lambda r: (abs(int(r["t_start"]) + int(r["t_end"]) - mid2), r["id"]))
            ids = [r["id"] for r in cands[:limit]]
            if not keys:
                return [Hit(id=i, score=0.0) for i in ids]
            return [Hit(id=r["id"], score=0.0, fields=_raw_unit_fields(r, keys))
                    for r in self._get_rows(name, ids, ["id", *out])]

        return self._read(bank_id, "units", run, [])


def _is_missing(exc: Exception) -> bool:
    msg = str(exc).lower()
    return ("not exist" in msg or "not found" in msg) and "collection" in msg
