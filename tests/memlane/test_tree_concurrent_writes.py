"""Consolidation racing with writes to the bank it consolidates (the soak's doctor finding:
``tree_containment`` on a session node, tests/serving/test_soak.py).

Consolidation reads the bank and builds its nodes outside the bank's lease (a slow LLM never
blocks a retain) and writes them under it. A retain in between that says a document again
rewrites its memories under the same ids (ids are positional: memlane/ids.py) with the time it
was said again; the nodes the build made from the old memories must not be written over that,
and a node left so by an older version must be repaired by the next consolidation.

Real engine, real Milvus Lite: the retain runs from consolidation's ``progress`` callback,
which the build calls after each level, before it writes: the exact interleaving of a
retain request served while the service's background tree job runs, made deterministic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.engine import Memory
from memlane.records import Level, Turn
from memlane.settings import Settings
from memlane.tree.invariants import tree_problems
from memlane.tree.nodes import node_id

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
LATER = datetime(2025, 1, 1, tzinfo=UTC)  # every window below is closed by then
SAID = {
    "doc-a": "Ana flew to Lisbon with Ben for a conference.",
    "doc-b": "Ben flew to Kyoto with Eli for a conference.",
}


def _doc(doc: str, at: datetime) -> tuple[str, list[Turn]]:
    turn = Turn(
        document_id=doc, session_id="s1", turn_id="s1:1", index=0, speaker="Ana", text=SAID[doc], timestamp=at
    )
    return doc, [turn]


def _times(m: Memory, bank: str) -> dict[str, datetime]:
    return {u.id: u.mentioned_at for page in m.store.iter_units(bank) for u in page}


def _memory(tmp_path, embedder, extractor) -> Memory:
    m = Memory(Settings(data_dir=tmp_path / "data"), embedder=embedder, extractor=extractor)
    m.create_bank("b")
    m.retain("b", [_doc("doc-a", T0)])
    m.retain("b", [_doc("doc-b", T0 + timedelta(hours=1))])
    return m


def test_a_retain_during_consolidation_leaves_no_node_short_of_its_children(tmp_path, embedder, extractor):
    with _memory(tmp_path, embedder, extractor) as m:
        again = T0 + timedelta(minutes=10)
        retained: list[Level] = []

        def retain_meanwhile(level: Level, n: int) -> None:
            # after the build read the bank and made its sessions, before it writes them: doc-a
            # said again ten minutes later, its memory rewritten under the same id
            if level == Level.session and not retained:
                retained.append(level)
                m.retain("b", [_doc("doc-a", again)])

        m.consolidate("b", now=LATER, progress=retain_meanwhile)
        assert retained
        times = _times(m, "b")
        assert again in times.values()
        nodes = m.tree.nodes("b")
        assert tree_problems(nodes, times) == []
        assert m.banks.doctor("b").findings == []
        session = next(n for n in nodes if n.key == "doc-a|s1")
        assert session.start == session.end == again
        # what a consolidation after the retain writes: nothing more
        report = m.consolidate("b", now=LATER)
        assert sum(report.written.values()) == 0 and report.removed == 0


def test_consolidation_repairs_a_node_whose_child_was_said_again_at_another_time(
    tmp_path, embedder, extractor
):
    """A session node left with its memory's old time (by the race above, before it was
    fixed): same children, same texts, so the same signature; the next consolidation writes it
    again from its children's times instead of keeping it."""
    with _memory(tmp_path, embedder, extractor) as m:
        m.consolidate("b", now=LATER)
        sid = node_id("b", Level.session, "doc-a|s1")
        (node,) = [n for n in m.store.list_tree_nodes("b", with_embedding=True) if n.id == sid]
        short = T0 - timedelta(minutes=10)
        m.store.upsert_tree_nodes("b", [node.model_copy(update={"start": short, "end": short})])
        assert tree_problems(m.tree.nodes("b"), _times(m, "b")) != []

        report = m.consolidate("b", now=LATER)
        assert report.written["session"] == 1
        assert tree_problems(m.tree.nodes("b"), _times(m, "b")) == []
        assert m.banks.doctor("b").findings == []
