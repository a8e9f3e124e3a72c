"""Whether a Milvus Lite directory stores a bank, read from Lite's own files without a client.

The store answers "is there a bank X" with one point lookup, but opening it costs more than
the answer: an unknown bank's ``memlane recall`` took 1.3-1.5 s of CPU, most of it importing
pymilvus (and the pandas it imports) and starting Lite's in-process server; told from the
files, 0.53-0.57 s (4 runs each, 2-core machine, Dec 2026). A directory no process holds
(Lite's ``LOCK``) has every row of its banks collection in the Parquet files its manifest
lists: Lite flushes its memtable when it closes, and a write cut short is left in its
write-ahead log, which is then not empty. So the bank ids in those files, read with pyarrow
alone (0.12-0.16 s of CPU with its import), say that a bank is not stored. The layout is
Milvus Lite 3.2's (pinned in pyproject.toml): a manifest of another format, a non-empty log
or a file that cannot be read answers "cannot tell", and the caller opens the store as
before.
"""

from __future__ import annotations

import json
from pathlib import Path

from memlane.stores.milvus.lite_files import SCHEMA

# milvus_lite/storage/manifest.py: the format whose file lists are read here.
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 2


def collection_dir(lite_dir: Path, name: str, db: str = "default") -> Path:
    """The folder of collection ``name`` of database ``db`` in a Lite directory (Lite keeps
    the default database's collections under ``collections``, the others' under
    ``databases/<db>/collections``)."""
    root = lite_dir if db in ("", "default") else lite_dir / "databases" / db
    return root / "collections" / name


def bank_stored(lite_dir: Path, prefix: str, bank_id: str, db: str = "default") -> bool | None:
    """Whether the banks collection (``<prefix>_banks``) of the Lite directory ``lite_dir`` has a
    row for ``bank_id``: False when it has none (or no banks collection at all), True when a
    row was written (a deleted bank's row counts until Lite compacts it away), None when the
    files cannot tell. Only meaningful while no process holds the directory."""
    col = collection_dir(Path(lite_dir), f"{prefix}_banks", db)
    if not (col / SCHEMA).is_file():
        return False  # no banks collection: this store (prefix, database) holds no bank
    try:
        wal = col / "wal"
        if wal.is_dir() and any(f.stat().st_size for f in wal.iterdir()):
            return None  # rows not yet flushed into the files below
        manifest = json.loads((col / MANIFEST).read_text())
        if manifest.get("manifest_format_version") != MANIFEST_FORMAT:
            return None
        files = [
            col / "partitions" / partition / rel
            for partition, lists in manifest["partitions"].items()
            for rel in lists["data_files"]
        ]
        if not files:
            return False
        import pyarrow.parquet as pq  # not pyarrow.dataset: that one imports pandas (0.3 s)

        for path in files:
            ids = pq.ParquetFile(path).read(columns=["id"]).column("id").to_pylist()
            if bank_id in ids:
                return True
        return False
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        # a file compacted away meanwhile, a manifest or Parquet file of another shape
        # (pyarrow's ArrowInvalid is a ValueError)
        return None
