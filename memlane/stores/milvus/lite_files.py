"""Milvus Lite's data directory, mended before Lite opens it.

Milvus Lite 3.x creates a collection in two steps: ``mkdir <data>/collections/<name>``
(``exist_ok=False``), then ``schema.json`` inside it; ``has_collection`` looks for that file. A
process killed between the two (the crash test kills the Lite server at random times,
tests/pipelines/test_backfill_crash.py) leaves a folder Lite cannot see and cannot create again:
every later ``create_collection`` of that name fails with "[Errno 17] File exists", and the bank
is rejected on every retry (seen twice in 3 runs on 2026-11-25). Such a folder holds nothing Lite
could ever read, so it is removed before Lite opens the directory, and only while no other
process holds the directory (Lite's own ``LOCK`` file, flock'ed by the opener).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

# Milvus Lite 3.x's layout (milvus_lite/db.py): collections of the default database under
# <data>/collections, of other databases under <data>/databases/<db>/collections.
SCHEMA = "schema.json"
LOCK = "LOCK"


def _collection_roots(data: Path) -> list[Path]:
    roots = [data / "collections"]
    dbs = data / "databases"
    if dbs.is_dir():
        roots += [d / "collections" for d in sorted(dbs.iterdir()) if d.is_dir()]
    return [r for r in roots if r.is_dir()]


def remove_half_created_collections(data_dir: str | Path) -> list[str]:
    """Remove the collection folders of ``data_dir`` (a Lite ``milvus.db`` directory) that have
    no ``schema.json``; returns their paths. Does nothing when the directory does not exist or
    another process holds its lock (it may be creating one of them right now)."""
    data = Path(data_dir)
    if not data.is_dir():
        return []
    fd = os.open(data / LOCK, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return []  # held by a Lite instance: its folders are its own business
        removed = []
        for root in _collection_roots(data):
            for folder in sorted(root.iterdir()):
                if folder.is_dir() and not (folder / SCHEMA).exists():
                    shutil.rmtree(folder)
                    removed.append(str(folder))
                    log.warning("removed %s: a collection whose creation was interrupted", folder)
        return removed
    finally:
        os.close(fd)  # closing the descriptor releases the flock
