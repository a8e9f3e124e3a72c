"""The MilvusStore: the VectorStore on Milvus, assembled from its parts."""

from __future__ import annotations

from memlane.stores.milvus.search import Search
from memlane.stores.milvus.tree_records import TreeRecords
from memlane.stores.milvus.unit_records import UnitRecords


class MilvusStore(Search, UnitRecords, TreeRecords):
    """The VectorStore on Milvus (Lite file, Lite server or a Milvus server).

    ``MilvusStore(settings, dim)`` opens ``settings.milvus_target()``: Milvus Lite under
    ``settings.data_dir`` by default (the directory is created), else the server URI in
    ``settings.store.milvus_uri`` with ``settings.store.milvus_token``. One collection set per bank (units,
    chunks, entities; see the module docstring for the measurements behind that) plus a global
    banks collection. Thread-safe: reads run concurrently, writes are serialised.

    ``flush_writes`` (default: True on Milvus Lite, False on a server) flushes the collections a
    write call touched before it returns, which keeps Lite searches off its slow memtable path.
    """

    def __enter__(self) -> MilvusStore:
        return self
