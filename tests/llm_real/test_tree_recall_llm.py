"""The tree and recall through the real model: TiMem's consolidation of every level, the
planner, Engram's adjudicator, the abstention gate and multi-hop decomposition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from tree_samples import TREE_ITEMS, TREE_SHAPE

from memlane.engine import Memory
from memlane.records import Level, Turn
from memlane.tree.invariants import tree_problems
from tests.llm_real.conftest import llm_settings

pytestmark = pytest.mark.llm_real

LATER = datetime(2025, 1, 1, tzinfo=UTC)  # every window of TREE_ITEMS is closed by then
LEVELS = {"simple": (1, 2, 5), "hybrid": (1, 2, 3, 5), "complex": (1, 2, 3, 4, 5)}


@pytest.fixture(scope="module")
def ana(local_llm, tmp_path_factory, embedder, extractor):
    """A bank of TREE_ITEMS with its tree consolidated by the model."""
    tmp = tmp_path_factory.mktemp("tree")
    s = llm_settings(tmp, local_llm, tree={"consolidator": "llm"}, facts={"resolve": "rules"})
    m = Memory(s, embedder=embedder, extractor=extractor)
    m.retain_items("ana", TREE_ITEMS, document_id="chat")
    report = m.consolidate("ana", now=LATER)
    yield m, report
    m.close()


def test_every_level_is_consolidated_by_the_model_or_falls_back_with_the_error(ana, local_llm):
    m, report = ana
    nodes = m.tree.nodes("ana")
    assert report.nodes == TREE_SHAPE
    times = {u.id: u.mentioned_at for page in m.store.iter_units("ana") for u in page}
    assert tree_problems(nodes, times) == []
    fell_back = [n for n in nodes if n.consolidator == "rules"]
    assert report.fallbacks == len(fell_back)
    for n in nodes:
        assert n.text.strip()
        if n.consolidator == "rules":
            assert n.metadata["llm_error"]
        else:
            assert n.consolidator == f"llm:{local_llm.alias}" and "llm_error" not in n.metadata
    assert {n.level for n in nodes} == set(Level) - {Level.unit}
    again = m.consolidate("ana", now=LATER)  # nothing changed: nothing is rewritten, no model call
    assert sum(again.written.values()) == 0 and again.fallbacks == 0
    assert m.banks.doctor("ana").errors == []


def test_the_planner_plans_or_falls_back_to_the_rules(ana):
    m, _ = ana
    for query in ("Where does Ana live?", "How did Ana's plans change between May 6 and May 14?"):
        plan = m.recall("ana", query, planner="llm").plan["plan"]
        if plan["planner"] == "llm":
            assert plan["complexity"] in LEVELS and tuple(plan["levels"]) == LEVELS[plan["complexity"]]
        else:
            assert plan["planner"] == "rules" and plan["reasons"][-1].startswith("llm failed")


def test_the_abstention_gate_decides_or_falls_back_and_memories_stay(ana):
    m, _ = ana
    for query in ("Who looks after Pixel while Ana is away?", "What did Zanzibarov say about the marathon?"):
        res = _recall_gated(m, query)
        assert res.memories  # abstaining never hides what was recalled
        assert res.abstain_signals["gate"] in ("llm", "fallback")
        if res.abstain:
            assert res.abstain_reason and res.abstain_reason.strip()


def _recall_gated(m, query):
    m.settings.facts.abstain = "llm"
    try:
        return m.recall("ana", query)
    finally:
        m.settings.facts.abstain = "rules"


def test_decomposition_splits_or_falls_back_and_recall_answers(ana):
    m, _ = ana
    res = m.recall("ana", "Who will look after the dog that Ana adopted in Porto?", decompose="llm")
    assert res.memories
    assert all(isinstance(q, str) and q.strip() for q in res.subqueries)
    assert len(res.subqueries) <= 4


T0 = datetime(2024, 6, 3, 9, tzinfo=UTC)


def _turn(doc, text):
    return Turn(
        document_id=doc,
        session_id=doc,
        turn_id=f"{doc}:0",
        index=0,
        speaker="Ana",
        text=text,
        timestamp=T0 + timedelta(hours=5),
    )


def test_the_adjudicator_supersedes_or_keeps_both_and_never_deletes(local_llm, tmp_path, embedder, extractor):
    """Two homes said at the same instant: an ambiguous pair only the adjudicator decides."""
    s = llm_settings(tmp_path, local_llm, tree={"consolidator": "rules"}, facts={"resolve": "llm"})
    with Memory(s, embedder=embedder, extractor=extractor) as m:
        m.retain("ana", [("x", [_turn("x", "I live in Bristol.")]), ("y", [_turn("y", "I live in Leeds.")])])
        before = m.store.count_units("ana")
        report = m.consolidate("ana")
        units = {u.text.split(": ", 1)[-1]: u for b in m.store.iter_units("ana") for u in b}
        assert m.store.count_units("ana") == before  # nothing deleted, whatever the verdict
        bristol, leeds = units["I live in Bristol."], units["I live in Leeds."]
        superseded = [u for u in (bristol, leeds) if u.superseded_by]
        if superseded:
            [old] = superseded
            new = leeds if old is bristol else bristol
            assert old.superseded_by == new.id and new.invalid_at is None and report.facts["superseded"] == 1
        else:  # kept both valid: the model said they do not conflict, or its reply failed
            assert bristol.invalid_at is None and leeds.invalid_at is None
        assert m.banks.doctor("ana").errors == []
