"""The store of record on Milvus: banks, memory units, source chunks and entities.

The package, by job: ``connection`` (client, shared Lite server, collection names), ``schema``,
``collections`` (create/open/load, batched row I/O), ``codec`` (rows <-> model objects, on
:mod:`memlane.units`), ``records`` (banks, revisions, operations, chunks, entities),
``unit_records``, ``search`` and ``store`` (:class:`MilvusStore`, all of them together);
``layout`` (per-bank collections or shared partition-key collections: where a bank's rows live)
and ``migrate`` (moving a store between the two; docs/milvus-layout.md).

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
Milvus server, which caps collections (65,536 per instance), the default is the partition-key
layout instead (``memlane.stores.milvus.layout``; limits and measurements in
docs/milvus-layout.md).

Other facts verified here (and relied on below):

* BM25 distances come back negated from Milvus Lite (best first, most negative); a Milvus
  server returns them positive. Scores are reported as ``abs(distance)``, right for both.
* Writes land in Lite's memtable before the RPC returns, so reads see them; collections are
  created with ``consistency_level="Strong"`` so a Milvus server waits for the write timestamp
  too (read-your-writes on both).
* Rows still in Lite's memtable are searched by rebuilding a brute-force index per query:
  13k unflushed rows cost 0.4-1.2 s per dense or BM25 search against 18 ms / 11 ms once
  flushed, and flushing a 20-row batch costs 8-11 ms. So on Milvus Lite every write call ends
  with a flush of the units collection it touched (``flush_writes``), and of the collections no
  search reads (chunks, entities, tree, revisions) once every few dozen writes
  (``UNSEARCHED_FLUSH_WRITES`` in ``collections``); never on a server, where flushes are
  rate-limited and segments seal by themselves.
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

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlane.stores.milvus.connection import collection_names
    from memlane.stores.milvus.store import MilvusStore
    from memlane.units import HIT_FIELDS as UNIT_HIT_FIELDS
    from memlane.units import NONE_TIME_US, escape_string, unit_from_fields
    from memlane.units import milvus_expr as filter_expr

# The package's names are imported on first use, so that its modules that read Milvus Lite's
# files without a client (lite_files, lite_banks) do not import pymilvus, and the pandas it
# imports, with it (0.5-1 s of an unknown bank's ``memlane recall``).
_LAZY = {
    "MilvusStore": ("memlane.stores.milvus.store", "MilvusStore"),
    "collection_names": ("memlane.stores.milvus.connection", "collection_names"),
    "unit_from_fields": ("memlane.units", "unit_from_fields"),
    "escape_string": ("memlane.units", "escape_string"),
    "filter_expr": ("memlane.units", "milvus_expr"),
    "NONE_TIME_US": ("memlane.units", "NONE_TIME_US"),
    "UNIT_HIT_FIELDS": ("memlane.units", "HIT_FIELDS"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value


__all__ = [
    "MilvusStore",
    "unit_from_fields",
    "collection_names",
    "escape_string",
    "filter_expr",
    "NONE_TIME_US",
    "UNIT_HIT_FIELDS",
]
