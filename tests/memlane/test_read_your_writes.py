"""Read-your-writes: where facts resolve in the background (background.tree, as under
`memlane serve`), a recall that starts after a retain returned sees that retain's
supersessions: it runs the bank's queued fact resolution at once and waits for it
(memlane/background.py ``settle``), reporting the wait."""

from __future__ import annotations

from memlane.engine import Memory
from tests.memlane.test_facts import MOVES, _by_text


def _superseded(unit) -> bool:
    return any(r.get("superseded_by") for r in unit.metadata.get("facts", []))


def _engine(settings, embedder, extractor, **background) -> Memory:
    settings.background.tree = True
    settings.background.mode = "thread"
    # a long quiet delay: without the recall's settle the job would not have run yet
    settings.background.delay_s = 60.0
    settings.background.max_delay_s = 120.0
    for k, v in background.items():
        setattr(settings.recall, k, v)
    return Memory(settings, embedder=embedder, extractor=extractor)


def test_a_recall_right_after_a_retain_sees_its_supersession(settings, embedder, extractor):
    memory = _engine(settings, embedder, extractor)
    try:
        memory.retain("ana", MOVES)
        nurse = _by_text(memory, "ana")["I work as a nurse and I love it."]
        assert not _superseded(nurse)  # queued, not run: the delay holds it
        result = memory.recall("ana", "What is Ana's job now?", planner="off")
        assert result.timings_ms.get("facts_wait", 0.0) > 0.0
        nurse = _by_text(memory, "ana")["I work as a nurse and I love it."]
        assert _superseded(nurse)  # resolved before the recall read the bank
        # the next recall has nothing to wait for
        again = memory.recall("ana", "What is Ana's job now?", planner="off")
        assert "facts_wait" not in again.timings_ms
    finally:
        memory.close()


def test_the_wait_is_bounded(settings, embedder, extractor):
    memory = _engine(settings, embedder, extractor, read_your_writes_s=0.0)
    try:
        memory.retain("ana", MOVES)
        memory.recall("ana", "What is Ana's job now?", planner="off")
        nurse = _by_text(memory, "ana")["I work as a nurse and I love it."]
        assert not _superseded(nurse)  # a zero bound: the recall did not wait
    finally:
        memory.close()
