"""The store's two tenant layouts (memlane/stores/milvus/layout.py): bank isolation on both,
the recorded layout, and the migration between them (engine function and CLI), on Milvus Lite
and (isolation and migration) on the local Milvus server, for real."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from memlane.records import Entity, Level, Link, TreeNode
from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore
from memlane.stores.milvus.layout import MARKER_ID
from memlane.stores.milvus.migrate import bank_counts, migrate_layout
from tests.memlane.test_milvus_store import DIM, chunk, day, unit, vec

# the server prefix it shares with the other modules of 8-dim stores (tests/conftest.py)
SERVER_COLLECTIONS = "dim-8"


def _settings(tmp_path, layout: str = "auto") -> Settings:
    return Settings(data_dir=tmp_path / "data", store={"layout": layout}, models={"embedding_dim": DIM})


@pytest.fixture(params=["per_bank", "partition_key"])
def store(backend_settings, backend, request):
    s = MilvusStore(backend_settings(store={"layout": request.param}, models={"embedding_dim": DIM}), dim=DIM)
    yield s
    s.close()


def node(bank: str, nid: str, children: list[str], seed: int = 0) -> TreeNode:
    return TreeNode(
        id=nid,
        bank_id=bank,
        level=Level.session,
        key=f"doc|{nid}",
        start=day(0),
        end=day(1),
        text=f"session {nid} of {bank}",
        embedding=vec(seed),
        children=children,
        source_turns=[f"t-{bank}"],
        consolidator="test",
    )


def fill(s: MilvusStore, bank: str, word: str) -> None:
    """The same ids in every bank (units u0-u2, chunk c1, entity e1, node n1, document doc1),
    the bank's own word in its texts."""
    s.upsert_units(
        bank,
        [
            unit(bank, f"u{i}", f"{word} fact {i}", seed=i, document_id="doc1", chunk_id="c1")
            for i in range(3)
        ],
    )
    s.upsert_chunks(bank, [chunk(bank, "c1").model_copy(update={"text": f"{word} chunk"})])
    s.upsert_entities(bank, [Entity(entity_id="e1", bank_id=bank, name=word.title())])
    s.upsert_tree_nodes(bank, [node(bank, "n1", ["u0", "u1"], seed=1)])


def test_banks_with_the_same_ids_never_cross(store):
    fill(store, "left", "walrus")
    fill(store, "right", "pelican")
    for bank, word, other in (("left", "walrus", "pelican"), ("right", "pelican", "walrus")):
        assert [u.text for u in store.get_units(bank, ["u0", "u1", "u2"])] == [
            f"{word} fact {i}" for i in range(3)
        ]
        if store.has_lexical:  # not on Milvus 2.3 (no BM25)
            assert store.search_lexical(bank, other, 5) == []
            assert {h.fields["bank_id"] for h in store.search_lexical(bank, word, 5)} == {bank}
        dense = store.search_dense(bank, np.asarray([vec(1)]), 10)[0]
        assert sorted(h.id for h in dense) == ["u0", "u1", "u2"]
        assert all(h.fields["text"].startswith(word) for h in dense)
        assert len(store.search_time(bank, day(-1), day(2), 10)) == 3
        assert store.list_unit_ids(bank) == ["u0", "u1", "u2"]
        assert store.get_chunks(bank, ["c1"])[0].text == f"{word} chunk"
        assert [e.name for e in store.list_entities(bank)] == [word.title()]
        assert [n.text for n in store.list_tree_nodes(bank)] == [f"session n1 of {bank}"]
        assert store.document_counts(bank) == {"doc1": {"units": 3, "chunks": 1}}
        assert bank_counts(store, bank) == {"units": 3, "chunks": 1, "entities": 1, "tree": 1}
    # deletes in one bank leave the other's rows of the same ids alone
    assert store.delete_units("left", ["u0"]) == 1
    assert store.delete_entities("left", ["e1"]) == 1
    assert store.delete_tree_nodes("left", ["n1"]) == 1
    assert store.list_unit_ids("right") == ["u0", "u1", "u2"]
    assert [e.entity_id for e in store.list_entities("right")] == ["e1"]
    assert len(store.list_tree_nodes("right")) == 1
    assert store.delete_document("left", "doc1") == {"units": 2, "chunks": 1}
    assert store.document_counts("right") == {"doc1": {"units": 3, "chunks": 1}}
    store.delete_bank("left")
    assert bank_counts(store, "left") == {"units": 0, "chunks": 0, "entities": 0, "tree": 0}
    assert bank_counts(store, "right") == {"units": 3, "chunks": 1, "entities": 1, "tree": 1}
    assert [b.bank_id for b in store.list_banks()] == ["right"]


def test_links_pruned_in_one_bank_only(store):
    for b in ("x", "y"):
        u0 = unit(b, "u0", seed=0)
        u1 = unit(b, "u1", seed=1, links=[Link(target_id="u0", type="semantic", weight=0.5)])
        store.upsert_units(b, [u0, u1])
    store.delete_units("x", ["u0"])
    assert store.get_units("x", ["u1"])[0].links == []
    assert [ln.target_id for ln in store.get_units("y", ["u1"])[0].links] == ["u0"]


# --------------------------------------------------------------------------- recorded layout
def test_auto_on_lite_records_per_bank_and_a_mismatch_is_a_clear_error(tmp_path):
    with MilvusStore(_settings(tmp_path), dim=DIM) as s:
        assert s.layout.name == "per_bank" and s.recorded_layout() == "per_bank"
        s.upsert_units("b1", [unit("b1", "u1", seed=1)])
    with pytest.raises(
        ValueError, match=r"holds the per_bank layout.*memlane store migrate --to partition_key"
    ):
        MilvusStore(_settings(tmp_path, "partition_key"), dim=DIM)
    with MilvusStore(_settings(tmp_path, "per_bank"), dim=DIM) as s:
        assert s.count_units("b1") == 1


def test_a_fresh_store_records_the_layout_asked_and_auto_follows_it(tmp_path):
    with MilvusStore(_settings(tmp_path, "partition_key"), dim=DIM) as s:
        s.upsert_units("b1", [unit("b1", "u1", seed=1)])
    with MilvusStore(_settings(tmp_path), dim=DIM) as s:  # auto on Lite, but recorded wins
        assert s.layout.name == "partition_key" and s.count_units("b1") == 1


def test_a_store_from_before_the_record_is_per_bank(tmp_path):
    with MilvusStore(_settings(tmp_path), dim=DIM) as s:
        s.upsert_units("b1", [unit("b1", "u1", seed=1)])
        s._delete_ids(s._operations, [MARKER_ID])  # as a store written before layouts
        assert s.recorded_layout() is None and s.stored_layout() == "per_bank"
    with pytest.raises(ValueError, match="holds the per_bank layout"):
        MilvusStore(_settings(tmp_path, "partition_key"), dim=DIM)


# --------------------------------------------------------------------------- migration
def snapshot(s: MilvusStore) -> dict:
    """Everything a reader sees of the store's banks."""
    out: dict = {"banks": [(b.bank_id, b.name) for b in s.list_banks()]}
    for b, _ in out["banks"]:
        units = [u for page in s.iter_units(b, with_embedding=True) for u in page]
        out[b] = {
            "units": [u.model_dump() for u in units],
            "chunks": [c.model_dump() for page in s.iter_chunks(b) for c in page],
            "entities": [e.model_dump() for e in s.list_entities(b)],
            "tree": [n.model_dump() for n in s.list_tree_nodes(b, with_embedding=True)],
            "dense": [(h.id, round(h.score, 5)) for h in s.search_dense(b, np.asarray([vec(2)]), 5)[0]],
            # ids only: Milvus's BM25 statistics (document count, term frequencies) are the
            # collection's, so on the shared layout other banks' rows change the scores
            "bm25": [h.id for h in s.search_lexical(b, "fact", 5)] if s.capabilities.bm25 else None,
            "time": [h.id for h in s.search_time(b, day(-1), day(2), 5)],
        }
    return out


def test_migrate_three_banks_both_ways(backend_settings, backend):
    settings = backend_settings(models={"embedding_dim": DIM})
    with MilvusStore(settings, dim=DIM) as s:
        for b, word in (("ana", "walrus"), ("ben", "pelican"), ("cy", "otter")):
            fill(s, b, word)
        s.put_curated("model", "ana", "m1", {"text": "kept"})
        before = snapshot(s)
        # auto: per_bank on Milvus Lite, partition_key on a server
        first = s.layout.name
        assert first == ("per_bank" if backend == "lite" else "partition_key")
        source_units = s.layout.names("ana")["units"]
    other = "partition_key" if first == "per_bank" else "per_bank"
    seen: list[str] = []
    report = migrate_layout(settings, other, on_bank=lambda r, total: seen.append(r.bank_id))
    assert report.switched and report.source == first and seen == ["ana", "ben", "cy"]
    assert [b.counts for b in report.banks] == [{"units": 3, "chunks": 1, "entities": 1, "tree": 1}] * 3
    with MilvusStore(settings, dim=DIM) as s:
        assert s.layout.name == other
        assert snapshot(s) == before
        assert s.get_curated("model", "ana", "m1") == {"text": "kept"}
        # the old copy is kept until --drop-source
        assert s.client.has_collection(source_units)
        other_units = s.layout.names("ana")["units"]
        s.upsert_units("ben", [unit("ben", "u9", "written after the move", seed=9)])
        after_write = snapshot(s)
    # and back, removing the second copy; the first copy is rewritten, not merged
    report = migrate_layout(settings, first, drop_source=True)
    assert report.switched and report.dropped_source
    assert {b.bank_id: b.counts["units"] for b in report.banks} == {"ana": 3, "ben": 4, "cy": 3}
    with MilvusStore(settings, dim=DIM) as s:
        assert s.layout.name == first
        assert snapshot(s) == after_write
        assert not s.client.has_collection(other_units)


def test_migrate_is_resumable_by_bank_and_skips_verified_banks(tmp_path):
    settings = _settings(tmp_path)
    with MilvusStore(settings, dim=DIM) as s:
        for b in ("ana", "ben", "cy"):
            fill(s, b, "heron")
        before = snapshot(s)
    report = migrate_layout(settings, "partition_key", banks=["ben"])
    assert not report.switched and report.left == 2 and [b.status for b in report.banks] == ["copied"]
    with MilvusStore(settings, dim=DIM) as s:  # not switched: still the per-bank store
        assert s.layout.name == "per_bank" and snapshot(s) == before
    report = migrate_layout(settings, "partition_key")
    assert report.switched
    assert {b.bank_id: b.status for b in report.banks} == {"ana": "copied", "ben": "skipped", "cy": "copied"}
    with MilvusStore(settings, dim=DIM) as s:
        assert s.layout.name == "partition_key" and snapshot(s) == before
    again = migrate_layout(settings, "partition_key")
    assert again.source == "partition_key" and again.banks == []
    with pytest.raises(ValueError, match="unknown bank"):
        migrate_layout(settings, "per_bank", banks=["nobody"])
    with pytest.raises(ValueError, match="--to must be one of"):
        migrate_layout(settings, "sideways")


def test_migrate_cli(tmp_path):
    from cluster.cli import app

    data = tmp_path / "data"
    with MilvusStore(_settings(tmp_path), dim=DIM) as s:
        fill(s, "ana", "ibis")
    env = {"MEMLANE_MODELS__EMBEDDING_DIM": str(DIM)}
    bad = CliRunner().invoke(app, ["store", "migrate", "--to", "sideways", "--data-dir", str(data)], env=env)
    assert (
        bad.exit_code == 2
        and "--to must be one of" in bad.output
        and len(bad.output.strip().splitlines()) == 1
    )
    ok = CliRunner().invoke(
        app, ["store", "migrate", "--to", "partition_key", "--data-dir", str(data)], env=env
    )
    assert ok.exit_code == 0, ok.output
    assert "1 bank copied and verified" in ok.output and "switched" in ok.output
    with MilvusStore(_settings(tmp_path), dim=DIM) as s:
        assert s.layout.name == "partition_key" and s.list_unit_ids("ana") == ["u0", "u1", "u2"]
    unknown = CliRunner().invoke(
        app, ["store", "migrate", "--to", "per_bank", "--bank", "zed", "--data-dir", str(data)], env=env
    )
    assert unknown.exit_code == 2 and "unknown bank(s) zed" in unknown.output
    none = CliRunner().invoke(
        app, ["store", "migrate", "--to", "per_bank", "--data-dir", str(tmp_path / "x")], env=env
    )
    assert none.exit_code == 2 and "no store" in none.output
