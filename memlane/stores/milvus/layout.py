"""Where a bank's rows live: the two tenant layouts of the store.

* ``per_bank``: each bank has its own collections (units, chunks, entities, tree), named by
  :func:`memlane.stores.milvus.connection.collection_names`. Fastest on Milvus Lite, where a
  filter does not shrink a scan (see the package docstring), but a Milvus server caps the
  collections of a cluster (docs/milvus-layout.md), so it does not reach many banks there.
* ``partition_key``: all banks share one collection per kind, ``bank_id`` is the partition key
  (Milvus's multi-tenancy guidance for many tenants), every read of a bank carries the bank's
  filter, and a primary key is ``"<bank>:<id>"`` so two banks may hold the same item ids.

The store reads and writes through a :class:`Layout`: the one home of a bank's collection
names, of its filter and of its stored keys. Banks, revisions and operations are global
collections in both layouts.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from memlane.records import check_bank_id
from memlane.stores.milvus.connection import collection_names
from memlane.units import escape_string

LayoutName = Literal["per_bank", "partition_key"]
LAYOUTS: tuple[LayoutName, ...] = ("per_bank", "partition_key")
# The kinds of collection that hold a bank's rows (the tree's is created by consolidation).
BANK_COLLECTIONS = ("units", "chunks", "entities", "tree")
# Bank ids never contain ":" (check_bank_id), so the first ":" of a shared key ends the bank.
KEY_SEP = ":"
# A shared key is the bank id (<= 128 bytes), the separator and the item id.
KEY_EXTRA_BYTES = 129
# Partitions a partition-key collection hashes its banks into: Milvus's default, which its
# docs recommend keeping (64; at most 1,024; docs/milvus-layout.md). A bank filter prunes the
# other 63; more partitions prune more but cost segments per collection, and on Milvus Lite
# they prune nothing (it scans every row). Fixed when the collection is created.
NUM_PARTITIONS = 64
# The row of the operations collection that records the layout a store was written with.
MARKER_ID = "store:layout"


class Layout:
    """The per-bank layout (and the interface both layouts share)."""

    name: LayoutName = "per_bank"
    shared = False

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def names(self, bank_id: str) -> dict[str, str]:
        """The collection of each kind in :data:`BANK_COLLECTIONS` for the bank."""
        return collection_names(self.prefix, bank_id)

    def scope(self, bank_id: str, expr: str = "") -> str:
        """``expr`` restricted to the bank's rows ("" for all of them)."""
        return expr

    def key(self, bank_id: str, item_id: str) -> str:
        """The stored primary key of one of the bank's items."""
        return item_id

    def keys(self, bank_id: str, ids: Sequence[str]) -> list[str]:
        return [self.key(bank_id, i) for i in ids]

    def item_id(self, key: str) -> str:
        """The item id of a stored primary key (inverse of :meth:`key`)."""
        return key

    def stored_rows(self, bank_id: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows to write, ids turned into stored keys."""
        return rows

    def read_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows read, stored keys turned back into item ids."""
        return rows


class PartitionKeyLayout(Layout):
    """Shared collections, ``bank_id`` the partition key, keys ``"<bank>:<id>"``."""

    name: LayoutName = "partition_key"
    shared = True

    def names(self, bank_id: str) -> dict[str, str]:
        check_bank_id(bank_id)
        return {kind: f"{self.prefix}_pk_{kind}" for kind in BANK_COLLECTIONS}

    def scope(self, bank_id: str, expr: str = "") -> str:
        own = f"bank_id == {escape_string(check_bank_id(bank_id))}"
        return f"({own}) and ({expr})" if expr else own

    def key(self, bank_id: str, item_id: str) -> str:
        return f"{bank_id}{KEY_SEP}{item_id}"

    def item_id(self, key: str) -> str:
        return key.split(KEY_SEP, 1)[1]

    def stored_rows(self, bank_id: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**r, "id": self.key(bank_id, r["id"])} for r in rows]

    def read_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for r in rows:
            r = dict(r)
            if "id" in r:
                r["id"] = self.item_id(r["id"])
            out.append(r)
        return out


def make_layout(name: str, prefix: str) -> Layout:
    """The layout called ``name`` for collections of ``prefix``."""
    if name == "per_bank":
        return Layout(prefix)
    if name == "partition_key":
        return PartitionKeyLayout(prefix)
    raise ValueError(f"unknown store layout {name!r}: use one of {LAYOUTS}")
