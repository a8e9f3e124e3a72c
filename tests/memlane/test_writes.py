"""The one write path (memlane/writes.py) on real Milvus Lite: every kind of write bumps the
bank's revision exactly once, a second engine on the same store (another process's view, with
its own derived state) sees each write on its next recall, a write that raced another
process's write leaves this process's state stale so it reloads, and a failed write still
tells the others."""

from __future__ import annotations

from contextlib import nullcontext

import pytest

from memlane.engine import Memory
from memlane.errors import InvalidInput, NotFound
from memlane.records import FactType
from memlane.reflect.opinions import OpinionDraft


def _item(text: str, doc: str, day: int) -> dict:
    return {
        "content": text,
        "speaker": "Ana",
        "document_id": doc,
        "session_id": f"{doc}-s",
        "timestamp": f"2025-01-{day:02d}T10:00:00Z",
    }


class Counter:
    """Counts calls of one store method on one engine (the rest of the store is untouched)."""

    def __init__(self, monkeypatch, store, name: str) -> None:
        self.n = 0
        inner = getattr(store, name)

        def counted(*args, **kwargs):
            self.n += 1
            return inner(*args, **kwargs)

        monkeypatch.setattr(store, name, counted)

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


def _texts(memory: Memory, query: str, **options) -> list[str]:
    return [m.unit.text for m in memory.recall("ana", query, **options).memories]


@pytest.fixture
def pair(settings, embedder, extractor):
    """A writer engine and a reader engine on the same store, each with its own state."""
    with (
        Memory(settings, embedder=embedder, extractor=extractor) as writer,
        Memory(settings, embedder=embedder, extractor=extractor) as reader,
    ):
        yield writer, reader


def test_each_write_bumps_the_revision_once_and_another_engine_sees_it(pair, monkeypatch):
    import memlane.retain.pipeline as pipeline

    a, b = pair
    monkeypatch.setattr(pipeline, "BATCH_TURNS", 1)  # a retain of three turns: three batches
    bumps = Counter(monkeypatch, a.store, "bump_revision")

    a.create_bank("ana", name="Ana")
    assert bumps.take() == 0  # the profile is read from the store, not derived state
    report = a.retain_items(
        "ana",
        [
            _item("My cat is called Mochi.", "pets", 2),
            _item("Mochi sleeps on the radiator.", "pets", 3),
            _item("I bought a kayak for the lake.", "boat", 4),
        ],
    )
    assert report.units == 3 and bumps.take() == 2  # one write per document
    assert "Ana: I bought a kayak for the lake." in _texts(b, "kayak")

    a.retain_items("ana", [_item("I sold the kayak and bought a canoe.", "boat", 5)])
    assert bumps.take() == 1  # replacing a document (delete, then retain) is one write
    seen = _texts(b, "kayak canoe")
    assert "Ana: I sold the kayak and bought a canoe." in seen
    assert "Ana: I bought a kayak for the lake." not in seen

    [canoe] = [u for u in a.browse.list_memories("ana", document_id="boat")[0]]
    a.forget.invalidate("ana", canoe.id)
    assert bumps.take() == 1
    assert "Ana: I sold the kayak and bought a canoe." not in _texts(b, "canoe")

    [op] = a.reflection.form_opinions(
        a.banks.get("ana"),
        [OpinionDraft(statement="I think Mochi is the laziest cat.", confidence=0.7)],
        [],
        "q",
    )
    assert bumps.take() == 1
    assert _texts(b, "lazy cat", types=["opinion"]) == ["I think Mochi is the laziest cat."]

    a.forget.delete_memory("ana", op.id)
    assert bumps.take() == 1
    assert _texts(b, "lazy cat", types=["opinion"]) == []

    assert a.forget.delete_document("ana", "pets")["units"] == 2
    assert bumps.take() == 1
    assert "Mochi" not in " ".join(_texts(b, "Mochi the cat"))

    with pytest.raises(NotFound):
        a.forget.delete_document("ana", "pets")
    with pytest.raises(InvalidInput):
        a.forget.invalidate("ana", "no-such-unit")
    assert bumps.take() == 0  # writes that write nothing tell nobody

    a.banks.delete("ana")
    assert bumps.take() == 0  # the revision row goes with the bank
    assert b.store.get_revision("ana") == ""


def test_own_writes_update_the_state_in_place_and_a_race_marks_it_stale(pair, monkeypatch):
    a, b = pair
    a.retain_items("ana", [_item("My cat is called Mochi.", "pets", 2)])
    assert _texts(a, "Mochi") == ["Ana: My cat is called Mochi."]
    loads = Counter(monkeypatch, a.store, "iter_units")  # a reload reads every unit

    a.retain_items("ana", [_item("Mochi caught a mouse in the garden.", "mouse", 3)])
    assert "Ana: Mochi caught a mouse in the garden." in _texts(a, "mouse")
    assert loads.take() == 0  # this process's own write: no reload

    [unit] = a.browse.list_memories("ana", document_id="pets")[0]
    unit = a.store.get_units("ana", [unit.id], with_embedding=True)[0]
    unit.metadata = {"checked": True}
    # Writers of one bank take turns (the bank lease, memlane/leases.py), so this race needs
    # a writer without the lease: one whose lease expired while it was stalled. The stale
    # marking is the second line of defence behind the lease.
    monkeypatch.setattr(b.writer.leases, "hold", lambda bank_id: nullcontext())
    with a.writer.write("ana") as w:
        # Another process writes between this write's start and its end ...
        b.retain_items("ana", [_item("I bought a kayak for the lake.", "boat", 4)])
        w.units([unit])
    # ... so this process's state holds its own write but not the other one: it is marked
    # stale, and the next recall reloads it and sees both.
    assert "Ana: I bought a kayak for the lake." in _texts(a, "kayak")
    assert loads.take() >= 1
    assert a.browse.get_memory("ana", unit.id).metadata == {"checked": True}
    assert "Ana: I bought a kayak for the lake." in _texts(b, "kayak")


def test_a_failed_write_still_tells_the_others_and_reloads_here(pair, monkeypatch):
    a, b = pair
    a.retain_items("ana", [_item("My cat is called Mochi.", "pets", 2)])
    _texts(a, "Mochi"), _texts(b, "Mochi")
    before = a.store.get_revision("ana")
    [unit] = a.browse.list_memories("ana")[0]
    unit = a.store.get_units("ana", [unit.id], with_embedding=True)[0]
    unit.text = "Ana: My cat is called Miso."
    loads = Counter(monkeypatch, a.store, "iter_units")
    with pytest.raises(RuntimeError):
        with a.writer.write("ana") as w:
            w.units([unit])
            raise RuntimeError("the rest of the write failed")
    assert a.store.get_revision("ana") != before  # what was written is announced
    assert _texts(b, "Miso") == ["Ana: My cat is called Miso."]
    assert _texts(a, "Miso") == ["Ana: My cat is called Miso."]
    a.derived.wait_warm()  # evicted, so recall answered from the store and reloads in the background
    assert loads.take() >= 1  # this process's possibly half-updated state was reloaded


def test_retain_with_a_per_call_extractor(memory):
    class Marking:
        """The rules, with each fact marked as this extractor's."""

        name = "marking"

        def __init__(self, inner) -> None:
            self.inner = inner

        def extract(self, bank, chunks):
            facts = self.inner.extract(bank, chunks)
            for f in (f for per_chunk in facts for f in per_chunk):
                f.metadata = {**f.metadata, "by": "marking"}
            return facts

    configured = memory.retainer.extractor
    turns = memory.plan_items("ana", [_item("My cat is called Mochi.", "pets", 2)])["pets"][1]
    memory.retain("ana", [("pets", turns)], extractor=Marking(configured))
    later = memory.plan_items("ana", [_item("I bought a kayak.", "boat", 3)])["boat"][1]
    memory.retain("ana", [("boat", later)])
    assert memory.retainer.extractor is configured
    marks = {u.document_id: u.metadata.get("by") for u in memory.browse.list_memories("ana")[0]}
    assert marks == {"pets": "marking", "boat": None}


def test_plan_items_validates_and_groups_without_writing(memory):
    plan = memory.plan_items(
        "ana",
        [_item("One.", "d1", 2), _item("Two.", "d1", 3), {"content": "Three.", "tags": ["x"]}],
        tags=["t"],
    )
    assert {d: (tags, [t.text for t in turns]) for d, (tags, turns) in plan.items()} == {
        "d1": (["t"], ["One.", "Two."]),
        next(d for d in plan if d != "d1"): (["t", "x"], ["Three."]),
    }
    assert [t.turn_id for t in plan["d1"][1]] == ["d1-s:1", "d1-s:2"]
    with pytest.raises(InvalidInput, match="items.1.content"):
        memory.plan_items("ana", [_item("One.", "d1", 2), {"content": ""}])
    with pytest.raises(InvalidInput, match="tags"):
        memory.plan_items("ana", [_item("One.", "d1", 2)], tags=[" "])
    assert memory.banks.list_all() == [] and memory.store.get_revision("ana") == ""


def test_observations_lose_deleted_sources(memory):
    """The observation prune (memlane/reflect/observations.py) runs on every delete."""
    from memlane.records import MemoryUnit, now_utc
    from memlane.reflect.observations import observation_id

    memory.retain_items(
        "ana", [_item("My cat is called Mochi.", "pets", 2), _item("Mochi sleeps a lot.", "sleep", 3)]
    )
    facts = {u.document_id: u.id for u in memory.browse.list_memories("ana")[0]}
    vec = memory.embedder.embed(["Mochi is a cat who sleeps a lot."])[0].tolist()
    now = now_utc()
    obs = MemoryUnit(
        id=observation_id("ana", "mochi"),
        bank_id="ana",
        text="Mochi summary",
        fact_type=FactType.observation,
        embedding=vec,
        mentioned_at=now,
        valid_from=now,
        proof_count=2,
        source_fact_ids=list(facts.values()),
    )
    with memory.writer.write("ana") as w:
        w.units([obs])
    memory.forget.delete_document("ana", "sleep")
    kept = memory.browse.get_memory("ana", obs.id)
    assert kept.source_fact_ids == [facts["pets"]] and kept.proof_count == 1
    memory.forget.delete_memory("ana", facts["pets"])
    with pytest.raises(NotFound):
        memory.browse.get_memory("ana", obs.id)


def test_consolidation_writes_opinions_and_observations_in_one_write(
    settings, embedder, extractor, monkeypatch
):
    """A consolidation job after retain (sync mode) updates a related opinion and refreshes
    observations: one revision bump for all of it, and a second engine sees both."""
    import json

    from llm_fake import FakeLLMServer

    def answer(body: dict):
        system = body["messages"][0]["content"]
        if system.startswith("You hold an opinion"):
            return json.dumps({"verdict": "reinforce", "reason": "scripted"})
        if system.startswith("Write an objective summary"):
            return json.dumps({"summary": "Pixel is Ana's beagle."})
        if system.startswith("You maintain a first-person biography"):
            return json.dumps({"background": "I am a vet. I have a beagle."})
        return {"status": 400}

    with FakeLLMServer() as server:
        server.responder = answer
        s = settings.model_copy(
            update={
                "llm": {"base_url": server.base_url, "model": "fake", "max_retries": 0},
                "background": {"reflect": True, "mode": "sync"},
            }
        )
        with (
            Memory(s, embedder=embedder, extractor=extractor) as a,
            Memory(settings, embedder=embedder, extractor=extractor) as b,
        ):
            a.create_bank("ana", name="Ana", background="I am a vet.")
            a.retain_items("ana", [_item("I adopted a beagle called Pixel last week.", "pets", 2)])
            [op] = a.reflection.form_opinions(
                a.banks.get("ana"),
                [
                    OpinionDraft(
                        statement="I think Pixel is well behaved.", confidence=0.6, entities=["Pixel"]
                    )
                ],
                [],
                "q",
            )
            bumps = Counter(monkeypatch, a.store, "bump_revision")
            a.retain_items("ana", [_item("My beagle Pixel chewed my running shoes.", "more", 3)])
            assert bumps.take() == 2  # the retain, then its consolidation job
            assert a.browse.get_memory("ana", op.id).confidence == pytest.approx(0.7)
            assert "Pixel is Ana's beagle." in _texts(b, "Pixel", types=["observation"])

            merged = a.reflection.merge_background("ana", "I have a beagle.")
            assert merged.background == "I am a vet. I have a beagle." == b.banks.get("ana").background
            assert bumps.take() == 0  # the profile is not derived state
