"""What the Milvus behind a store can do, read once from its version string: the one home of
every difference between Milvus Lite and the servers the store runs on.

Checked against the servers here (Nov 2026): Milvus Lite 3.2.2 (``milvus_lite...``) has BM25
functions, sparse vectors and nullable fields; the ``milvus`` package's standalone Milvus 2.3.5
(``v2.3.5-lite``, ``cluster/milvus_server.py``) has none of them: it accepts a schema with a
BM25 function and silently drops it, then refuses the sparse field's index ("create index on
104 field is not supported"). BM25 functions, sparse vectors and nullable fields came with
Milvus 2.5 (2.4 had sparse vectors without the BM25 function).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memlane.errors import StoreCapabilityError
from memlane.stored_fields import JSON_LIST_KEY

_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


CapabilityError = StoreCapabilityError  # the name this module's callers use


@dataclass(frozen=True)
class Capabilities:
    """What a store's Milvus supports."""

    version: str
    is_lite: bool
    #: BM25 functions over an analysed VARCHAR and SPARSE_INVERTED_INDEX (Lite; Milvus 2.5+).
    bm25: bool
    #: Nullable scalar fields (Lite; Milvus 2.5+); without them an absent id is stored as "".
    nullable: bool
    #: A JSON field may hold a list at its top (Lite; Milvus 2.4+ as far as checked: 2.3 wants
    #: an object); without it a list is stored as ``{JSON_LIST_KEY: [...]}``.
    json_arrays: bool
    #: Upserts land in the partition a partition-key filter prunes to. Not on Milvus 2.3.5: an
    #: upserted row of bank "b3" was found by ``bank_id like "b3%"`` but not by ``bank_id ==
    #: "b3"`` (inserted rows were; checked here, Nov 2026), so there the shared layout keeps
    #: ``bank_id`` as a filtered field without partitions.
    partition_key_upsert: bool

    @classmethod
    def of(cls, version: str) -> Capabilities:
        """The capabilities of the Milvus that reports ``version`` (``get_server_version``)."""
        if version.startswith("milvus_lite"):
            return cls(
                version=version,
                is_lite=True,
                bm25=True,
                nullable=True,
                json_arrays=True,
                partition_key_upsert=True,
            )
        m = _VERSION_RE.match(version.strip())
        # A version string this code cannot read: assume a current server (the 2.5+ features);
        # its first create or search says otherwise in Milvus's own words.
        major, minor = (int(m.group(1)), int(m.group(2))) if m else (99, 0)
        modern = (major, minor) >= (2, 5)
        return cls(
            version=version,
            is_lite=False,
            bm25=modern,
            nullable=modern,
            json_arrays=(major, minor) >= (2, 4),
            partition_key_upsert=(major, minor) >= (2, 4),
        )

    @property
    def bank_index(self) -> str | None:
        """The scalar index on ``bank_id`` of a shared collection (None: none). On a server a
        bank filter then reads an index instead of comparing every row's string: Trie is
        Milvus 2.3's VARCHAR index (created here), INVERTED its successor from 2.4. Milvus Lite
        scans every row whatever the index. No measurement of the gain yet."""
        if self.is_lite:
            return None
        m = _VERSION_RE.match(self.version.strip())
        return "Trie" if m and (int(m.group(1)), int(m.group(2))) < (2, 4) else "INVERTED"

    def stored_rows(self, rows: list[dict[str, Any]], json_fields: frozenset[str]) -> list[dict[str, Any]]:
        """``rows`` as this Milvus stores them: lists in the JSON fields wrapped where JSON
        must be an object (read back by :func:`memlane.stored_fields.json_value`)."""
        if self.json_arrays:
            return rows
        return [
            {k: {JSON_LIST_KEY: v} if k in json_fields and isinstance(v, list) else v for k, v in r.items()}
            for r in rows
        ]

    def require_bm25(self, what: str) -> None:
        """Raise CapabilityError for ``what`` (a feature needing BM25) on a server without it."""
        if not self.bm25:
            raise CapabilityError(
                f"{what} needs Milvus's BM25 function (Milvus 2.5 or later, or Milvus Lite); "
                f"this server is Milvus {self.version}"
            )
