"""A collection whose creation a kill interrupted (folder, no schema.json) no longer blocks Milvus
Lite from creating it again (memlane/stores/milvus/lite_files.py), on the real Milvus Lite."""

from __future__ import annotations

import fcntl
import os

from memlane.engine import Memory
from memlane.stores.milvus.lite_files import remove_half_created_collections


def test_a_half_created_collection_is_removed_and_the_bank_retains(settings, embedder, extractor):
    memory = Memory(settings, embedder=embedder, extractor=extractor)
    memory.create_bank("kept")
    memory.retain_items("kept", [{"content": "Ada adopted a cat named Miso.", "document_id": "d"}])
    names = memory.store.layout.names("fresh")
    memory.close()
    lite = settings.data_dir / "milvus.db"
    kept = sorted(p.name for p in (lite / "collections").iterdir())
    # what a server killed between Lite's mkdir and its schema.json leaves behind
    for name in names.values():
        (lite / "collections" / name).mkdir(exist_ok=True)
        (lite / "collections" / name / "partial.bin").write_bytes(b"\0" * 8)
    orphans = {n for n in names.values() if n not in kept}
    assert orphans  # the fresh bank's own collections (the shared ones exist already)

    memory = Memory(settings, embedder=embedder, extractor=extractor)
    try:
        memory.retain_items("fresh", [{"content": "Ben sold his bike in May.", "document_id": "d"}])
        assert memory.store.count_units("fresh") == 1
        assert memory.store.count_units("kept") == 1  # complete collections untouched
        now = {p.name: (p / "schema.json").exists() for p in (lite / "collections").iterdir()}
        assert set(kept) <= set(now) and all(now.values())  # no folder Lite cannot see is left
    finally:
        memory.close()


def test_nothing_is_removed_while_another_process_holds_the_directory(tmp_path):
    lite = tmp_path / "milvus.db"
    (lite / "collections" / "half").mkdir(parents=True)
    fd = os.open(lite / "LOCK", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running Lite server holds it
        assert remove_half_created_collections(lite) == []
        assert (lite / "collections" / "half").is_dir()
    finally:
        os.close(fd)
    assert remove_half_created_collections(lite) == [str(lite / "collections" / "half")]
    assert not (lite / "collections" / "half").exists()
    assert remove_half_created_collections(tmp_path / "absent") == []
