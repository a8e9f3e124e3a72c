"""The integrity checker (memlane/doctor.py) on a real engine over Milvus Lite and the local
Milvus server: a bank written through the engine is clean, and each corruption written behind
the engine's back is found by the check named for it, and by no other."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from memlane.errors import BankNotFound
from memlane.records import Chunk, Entity, FactType, Link, LinkType, MemoryUnit

# the server prefix it shares with the other modules of engines on 384-dim models (tests/conftest.py)
SERVER_COLLECTIONS = "engine-384"

ITEMS = [
    {"content": "Ana adopted a beagle called Pixel in Porto.", "speaker": "Ana", "session_id": "s1"},
    {"content": "Ben visited Ana in Porto in March.", "speaker": "Ben", "session_id": "s1"},
    {"content": "Ana started a pottery class with Carla.", "speaker": "Ana", "session_id": "s2"},
]


@pytest.fixture
def settings(backend_settings, backend):
    """Every test here on Milvus Lite and on the local Milvus server (tests/conftest.py)."""
    return backend_settings()


def _bank(memory, bank_id: str) -> list[MemoryUnit]:
    memory.create_bank(bank_id, name="")
    memory.retain_items(bank_id, ITEMS, document_id="chat")
    units = [u for batch in memory.store.iter_units(bank_id, with_embedding=True) for u in batch]
    assert len(units) >= 3
    return sorted(units, key=lambda u: u.id)


def _errors(report) -> set[str]:
    return {f.check for f in report.errors}


def _copy(unit: MemoryUnit, uid: str, **changes) -> MemoryUnit:
    return unit.model_copy(update={"id": uid, **changes})


def test_a_bank_written_through_the_engine_is_clean(memory):
    units = _bank(memory, "clean")
    report = memory.banks.doctor("clean")
    assert report.ok and report.findings == [], [f.as_dict() for f in report.findings]
    assert (
        report.counts["units"] == len(units) == report.counts["index_units"] == report.counts["graph_units"]
    )
    # ...and stays clean through the engine's own deletes, invalidation and a re-retain
    memory.forget.invalidate("clean", units[0].id, superseded_by=units[1].id)
    memory.forget.delete_memory("clean", units[2].id)
    memory.retain_items("clean", ITEMS, document_id="chat")  # idempotent re-retain
    memory.retain_items("clean", [{"content": "Ben moved to Lyon.", "speaker": "Ben"}], document_id="d2")
    memory.forget.delete_document("clean", "d2")
    again = memory.banks.doctor("clean")
    assert again.ok, [f.as_dict() for f in again.findings]
    assert again.counts["units"] == memory.store.count_units("clean")


def _dangling_chunk(m, b, u):
    m.store.upsert_units(b, [_copy(u[0], "x1", chunk_id="no-such-chunk")])


def _other_document(m, b, u):
    # a memory whose chunk is in another (existing) document than the memory says
    m.retain_items(b, [{"content": "Carla plays the oud.", "speaker": "Carla"}], document_id="elsewhere")
    m.store.upsert_units(b, [_copy(u[0], "x1", document_id="elsewhere")])


def _no_document(m, b, u):
    m.store.upsert_units(b, [_copy(u[0], "x1", chunk_id="", document_id="ghost-doc")])


def _dangling_link(m, b, u):
    m.store.upsert_units(b, [_copy(u[0], "x1", links=[Link(target_id="gone", type=LinkType.semantic)])])


def _dangling_entity(m, b, u):
    m.store.upsert_units(b, [_copy(u[0], "x1", entity_ids=["ent-nobody"])])


def _unnamed_entity(m, b, u):
    m.store.upsert_entities(b, [Entity(entity_id="ent-lonely", bank_id=b, name="Lonely")])


def _missing_source(m, b, u):
    m.store.upsert_units(
        b, [_copy(u[0], "x1", fact_type=FactType.observation, chunk_id="", source_fact_ids=[u[1].id, "gone"])]
    )


def _dangling_successor(m, b, u):
    m.store.upsert_units(b, [u[0].model_copy(update={"superseded_by": "gone"})])


def _cycle(m, b, u):
    m.store.upsert_units(
        b,
        [
            u[0].model_copy(update={"superseded_by": u[1].id}),
            u[1].model_copy(update={"superseded_by": u[2].id}),
            u[2].model_copy(update={"superseded_by": u[0].id}),
        ],
    )


def _orphan_chunk(m, b, u):
    at = datetime(2025, 1, 1, tzinfo=UTC)
    m.store.upsert_chunks(
        b,
        [
            Chunk(
                chunk_id="c-orphan",
                bank_id=b,
                document_id="chat",
                session_id="s9",
                index=0,
                text="hi",
                started_at=at,
            )
        ],
    )


CASES: list[tuple[str, Callable, str, int]] = [
    # (name, corruption, the check that must find it, ids it names)
    ("dangling chunk", _dangling_chunk, "unit_chunk", 1),
    ("chunk of another document", _other_document, "unit_chunk", 1),
    ("document without chunks", _no_document, "unit_document", 1),
    ("link to a deleted memory", _dangling_link, "links", 1),
    ("entity that does not exist", _dangling_entity, "entities", 1),
    ("entity nobody names", _unnamed_entity, "entities", 1),
    ("observation with a lost source", _missing_source, "sources", 1),
    ("successor that does not exist", _dangling_successor, "supersession", 1),
    ("superseded_by cycle", _cycle, "supersession", 3),
]


@pytest.mark.parametrize("name, corrupt, check, n", CASES, ids=[c[0] for c in CASES])
def test_each_corruption_is_found_by_its_check(memory, name, corrupt, check, n):
    bank = "b-" + name.replace(" ", "-")
    units = _bank(memory, bank)
    assert memory.banks.doctor(bank).ok
    corrupt(memory, bank, units)
    memory.store.bump_revision(bank)  # a writer that tells readers: the derived state reloads
    report = memory.banks.doctor(bank)
    assert _errors(report) == {check}, [f.as_dict() for f in report.findings]
    (finding,) = report.errors
    assert finding.count == n and len(finding.ids) == n


def test_a_write_that_skips_the_revision_leaves_the_derived_state_behind(memory):
    units = _bank(memory, "stale")
    memory.banks.doctor("stale")  # the index and graph are now held in this process
    memory.store.upsert_units("stale", [_copy(units[0], "x-unseen")])  # no revision bump
    report = memory.banks.doctor("stale")
    assert _errors(report) == {"derived"}
    assert all(f.ids == ["x-unseen"] for f in report.errors)
    assert {f.message.split(" disagrees")[0] for f in report.errors} == {
        "the derived graph",
        "the derived index",
    }


def test_an_orphan_chunk_is_a_warning_not_an_error(memory):
    units = _bank(memory, "orphan")
    _orphan_chunk(memory, "orphan", units)
    report = memory.banks.doctor("orphan")
    assert report.ok
    assert [(f.check, f.severity, f.ids) for f in report.findings] == [
        ("orphan_chunks", "warning", ["c-orphan"])
    ]


def test_an_unknown_bank_is_an_error(memory):
    with pytest.raises(BankNotFound):
        memory.banks.doctor("nobody")


# The temporal tree (memlane/tree): its invariants are checked by tree_problems -------------------
def _tree_bank(memory, bank_id: str):
    from tree_samples import TREE_ITEMS, TREE_SHAPE

    memory.create_bank(bank_id, name="Ana")
    memory.retain_items(bank_id, TREE_ITEMS, document_id="chat")
    memory.wait_background()  # the online consolidation after the retain, then ours: one tree
    memory.consolidate(bank_id)
    nodes = memory.tree.nodes(bank_id)
    assert {lv: sum(1 for n in nodes if n.level.name == lv) for lv in TREE_SHAPE} == TREE_SHAPE
    return {n.key: n for n in memory.store.list_tree_nodes(bank_id, with_embedding=True)}


def _uncovered_child(m, b, nodes):
    # the week of 6-8 May made to start after its first day's session began
    week = nodes["2024-W19"]
    m.store.upsert_tree_nodes(b, [week.model_copy(update={"start": week.start.replace(hour=12)})])
    return "tree_containment", [week.id]


def _lost_leaf(m, b, nodes):
    session = next(n for key, n in nodes.items() if key.endswith("|s2"))
    m.store.upsert_tree_nodes(b, [session.model_copy(update={"children": [*session.children, "u-gone"]})])
    return "tree_children", [session.id]


def _lost_child_node(m, b, nodes):
    day = nodes["2024-05-14"]
    m.store.upsert_tree_nodes(b, [day.model_copy(update={"children": [*day.children, "tn2_gone"]})])
    return "tree_children", [day.id]


def _second_profile(m, b, nodes):
    profile = nodes["profile"]
    m.store.upsert_tree_nodes(b, [profile.model_copy(update={"id": "tn5_another", "key": "profile-2"})])
    return "tree_levels", []


TREE_CASES = [
    ("a node whose interval does not cover a child", _uncovered_child),
    ("a session naming a memory that does not exist", _lost_leaf),
    ("a day naming a session that does not exist", _lost_child_node),
    ("two profiles", _second_profile),
]


def test_a_consolidated_tree_is_clean(memory):
    nodes = _tree_bank(memory, "tree-clean")
    report = memory.banks.doctor("tree-clean")
    assert report.ok and report.findings == [], [f.as_dict() for f in report.findings]
    assert report.counts["tree_nodes"] == len(nodes) == 9


@pytest.mark.parametrize("name, corrupt", TREE_CASES, ids=[c[0] for c in TREE_CASES])
def test_each_tree_corruption_is_named_by_its_check(memory, name, corrupt):
    bank = "t-" + name.replace(" ", "-")
    nodes = _tree_bank(memory, bank)
    check, ids = corrupt(memory, bank, nodes)
    report = memory.banks.doctor(bank)
    assert _errors(report) == {check}, [f.as_dict() for f in report.findings]
    if ids:  # the node at fault, by id
        assert [f.ids for f in report.errors] == [ids]
    else:  # a count per level names the level in its message
        assert [f.message for f in report.errors] == ["2 profile nodes, expected at most one"]


def test_the_cli_names_a_tree_corruption_and_exits_1(tmp_path, embedder, extractor):
    import json
    import subprocess
    import sys
    from pathlib import Path

    from memlane.engine import Memory
    from memlane.settings import Settings

    data = tmp_path / "data"
    with Memory(Settings(data_dir=data), embedder=embedder, extractor=extractor) as memory:
        nodes = _tree_bank(memory, "cli-tree")
        _, ids = _uncovered_child(memory, "cli-tree", nodes)
    exe = Path(sys.executable).with_name("memlane")
    out = subprocess.run(
        [str(exe), "doctor", "--bank", "cli-tree", "--data-dir", str(data), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1, out.stderr
    (bank,) = json.loads(out.stdout)["banks"]
    assert [(f["check"], f["ids"]) for f in bank["findings"]] == [("tree_containment", ids)]
    text = subprocess.run(
        [str(exe), "doctor", "--bank", "cli-tree", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert text.returncode == 1
    assert (
        f"error tree_containment: 1 tree node has an interval that does not cover a child's (ids: {ids[0]})"
        in text.stdout
    )
    assert "9 tree nodes" in text.stdout
