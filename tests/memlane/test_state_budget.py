"""The budget of the per-bank state a process derives from the store (memlane/derived.py): past
``recall.state_max_banks`` or ``recall.state_max_mb`` the least recently used banks are
evicted, never the bank in hand; a bank held at the store's revision is not loaded again. On a
real engine over Milvus Lite: retains into many small banks stay within the budget."""

from __future__ import annotations

import numpy as np
import pytest

from memlane.derived import BYTES_PER_MEMORY, DerivedState
from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore
from memlane.stores.sparse_graph import SparseGraphStore
from tests.memlane.test_milvus_store import DIM, unit


@pytest.fixture
def store(tmp_path):
    s = MilvusStore(Settings(data_dir=tmp_path / "data"), dim=DIM)
    for b in range(8):
        s.upsert_units(f"b{b}", [unit(f"b{b}", f"u{i}", seed=b * 10 + i) for i in range(b + 1)])
    yield s
    s.close()


def _state(store, **budget) -> DerivedState:
    return DerivedState(store, SparseGraphStore(), DIM, **budget)


def test_the_least_recently_used_banks_leave_past_the_bank_bound(store):
    state = _state(store, max_banks=3)
    for b in range(5):
        state.ensure(f"b{b}")
        assert state.held_banks() <= 3
    assert [b for b in (f"b{i}" for i in range(5)) if state.held(b)] == ["b2", "b3", "b4"]
    assert state.budget_evictions == 2
    state.ensure("b2")  # used again: now the most recent
    state.ensure("b5")
    assert [b for b in (f"b{i}" for i in range(6)) if state.held(b)] == ["b2", "b4", "b5"]
    # a bank held at the store's revision is answered from memory, not loaded again
    state.last_refresh.clear()
    state.ensure("b4")
    assert "b4" not in state.last_refresh and state.budget_evictions == 3


def test_the_byte_bound_counts_memories_and_keeps_the_bank_in_hand(store):
    # b7 holds 8 memories, b6 7, b5 6: a budget of 10 memories holds b5 alone, then b7 alone
    state = _state(store, max_bytes=10 * BYTES_PER_MEMORY)
    state.ensure("b5")
    assert state.held_bytes() == 6 * BYTES_PER_MEMORY
    state.ensure("b6")
    assert not state.held("b5") and state.held("b6")
    state.max_bytes = 2 * BYTES_PER_MEMORY  # below any bank: the one in hand stays, alone
    state.ensure("b7")
    assert [state.held(b) for b in ("b5", "b6", "b7")] == [False, False, True]
    # searching an evicted bank loads it again, from the store
    hits = state.search_dense("b6", np.asarray([unit("b6", "x", seed=60).embedding]), 1)[0]
    assert [h.id for h in hits] == ["u0"] and state.held("b6") and not state.held("b7")


def test_an_engine_retaining_into_many_banks_stays_within_its_budget(tmp_path, embedder, extractor):
    from memlane.engine import Memory

    settings = Settings(data_dir=tmp_path / "data", recall={"state_max_banks": 4})
    with Memory(settings, embedder=embedder, extractor=extractor) as memory:
        held = []
        for b in range(12):
            memory.retain_items(
                f"user{b}", [{"content": f"User {b} adopted a cat called Tom{b}.", "speaker": "u"}]
            )
            held.append(memory.derived.held_banks())
        assert max(held) <= 4 and held[-1] == 4
        assert memory.derived.budget_evictions == 8
        # an evicted bank is recalled from the store, whole
        found = memory.recall("user0", "What is the cat called?")
        assert "Tom0" in found.memories[0].unit.text
        assert memory.derived.held("user0") and memory.derived.held_banks() == 4


def test_the_trees_cached_for_recall_count_in_the_same_budget(store):
    """The tree stage's cache (memlane/tree/recall.py) is part of the one budget: its bytes add
    to the state held, taking in a tree makes its bank the most recent, and evicting a bank
    drops its tree too."""
    from types import SimpleNamespace

    from memlane.tree.recall import NODE_BYTES, TreeRecall
    from tests.memlane.test_store_layout import node

    for b in ("b0", "b1"):
        store.upsert_tree_nodes(b, [node(b, f"{b}-n{i}", [f"u{i}"], seed=i) for i in range(3)])
    state = _state(store, max_banks=2)
    tree = TreeRecall(store, SimpleNamespace(dim=DIM), Settings(), budget=state)
    state.ensure("b2")
    before = state.held_bytes()
    index = tree.index("b0", "r1")
    # three nodes: vectors, texts and ids at least (NODE_BYTES each for the objects)
    assert index.nbytes >= 3 * (DIM * 4 + NODE_BYTES)
    assert state.held_bytes() == before + index.nbytes and state.held_banks() == 2
    tree.index("b1", "r1")  # a third bank (b1's tree): b2, the least recent, leaves
    assert not state.held("b2") and state.held_banks() == 2
    tree.index("b0", "r1")  # a hit on b0's cached tree: b0 is now the most recent
    state.ensure("b3")  # so b1's tree, the least recent state, goes
    assert tree.held_bytes() == index.nbytes and state.held_banks() == 2
    assert state.budget_evictions == 2 and not state.held("b0")  # (b0: a tree, no index)
