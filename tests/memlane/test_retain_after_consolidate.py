"""A consolidated bank given its documents again as unchanged turns whose input stamp differs
(another reader's turns, a path that stamped them otherwise) writes nothing: the retain's plan
extracts them again and finds every memory saying what it said, since the metadata fact
resolution wrote on them (its facts and their decisions) is not the extractor's. The tree, the
supersessions and the facts stay as consolidation left them. Real engine and Milvus Lite."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from derived_state import differences, snapshot
from fixtures import write_jsonl_fixture
from job_move_history import BANK, TURNS, rows

from memlane.ingest import load_conversations
from memlane.records import Level
from memlane.retain.plan import INPUT

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _without_stamps(state: dict) -> dict:
    """The snapshot less each memory's input stamp (what a retain of other turns restamps)."""
    units = {
        i: {**u, "metadata": {k: v for k, v in u["metadata"].items() if k != INPUT}}
        for i, u in state["units"].items()
    }
    return {**state, "units": units}


def _unit(memory, words: str):
    (unit,) = [u for page in memory.store.iter_units(BANK) for u in page if words in u.text]
    return unit


@pytest.mark.parametrize("folded", [False, True], ids=["resolved", "resolved-slot-folded"])
def test_unchanged_turns_stamped_otherwise_keep_a_consolidated_bank(memory, tmp_path, folded):
    (conv,) = load_conversations(write_jsonl_fixture(tmp_path / "dana.jsonl", rows()))
    memory.retain(BANK, [(conv.document_id, conv.turns)])
    memory.consolidate(BANK, now=NOW)
    junior = _unit(memory, "junior accountant")
    analyst = _unit(memory, "financial analyst")
    assert junior.superseded_by == analyst.id  # the new job superseded the old one's fact
    if folded:
        # a bank consolidated before resolution kept the extractor's slot beside its facts:
        # the slot only inside metadata["facts"]
        units = [u for page in memory.store.iter_units(BANK, with_embedding=True) for u in page]
        memory.store.upsert_units(
            BANK,
            [
                u.model_copy(update={"metadata": {k: v for k, v in u.metadata.items() if k != "slot"}})
                for u in units
                if "facts" in u.metadata and "slot" in u.metadata
            ],
        )
        memory.derived.evict(BANK)
    before = snapshot(memory, BANK)
    levels = {lv: sum(1 for n in memory.store.list_tree_nodes(BANK) if n.level == lv) for lv in Level}

    # the same turns with one more metadata key: another input stamp, the same memories
    again = [t.model_copy(update={"metadata": {**t.metadata, "export": "2"}}) for t in conv.turns]
    report = memory.retain(BANK, [(conv.document_id, again)])

    assert (report.units, report.unchanged, report.removed) == (0, TURNS, 0)
    assert report.stale == {"tree_sessions": 0, "facts": 0}
    after = snapshot(memory, BANK)
    assert differences(_without_stamps(after), _without_stamps(before)) == []
    assert levels[Level.session] == 7 and levels[Level.profile] == 1
    assert {lv: sum(1 for n in memory.store.list_tree_nodes(BANK) if n.level == lv) for lv in Level} == levels
    assert memory.store.get_units(BANK, [junior.id])[0].superseded_by == analyst.id
