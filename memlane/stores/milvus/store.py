"""The MilvusStore: the VectorStore on Milvus, assembled from its parts."""

from __future__ import annotations

from memlane.stores.milvus.search import Search
from memlane.stores.milvus.tree_records import TreeRecords
from memlane.stores.milvus.unit_records import UnitRecords


class MilvusStore(Search, UnitRecords, TreeRecords):
    """The VectorStore on Milvus (Lite file, Lite server or a Milvus server).

    ``MilvusStore(settings, dim)`` opens ``settings.milvus_target()``: Milvus Lite under
    ``settings.data_dir`` by default (the directory is created), else the server URI in
    ``settings.store.milvus_uri`` with ``settings.store.milvus_token``. Banks' rows live in the store's layout
    (``settings.store.layout``, :mod:`memlane.stores.milvus.layout`): one collection set per bank
    (units, chunks, entities, tree; Milvus Lite's default, see the package docstring for the
    measurements) or collections shared with ``bank_id`` as the partition key (a server's
    default); banks, revisions and operations are global collections in both. Thread-safe: reads run concurrently, writes are serialised.

    ``flush_writes`` (default: True on Milvus Lite, False on a server) flushes the collections a
    write call touched before it returns (those no search reads every few dozen writes), which
    keeps Lite searches off its slow memtable path.
    """

    def __enter__(self) -> MilvusStore:
        return self
