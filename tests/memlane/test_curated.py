"""Mental models and directives (memlane/curated/) on the real engine: Milvus Lite, MiniLM,
the rule extractor; the only double is the fake OpenAI-compatible server (LLM consolidation
and reflect)."""

from __future__ import annotations

import json

import pytest
from llm_fake import FakeLLMServer

from memlane.curated.directives import HEADING
from memlane.curated.touch import MODEL_RECALL_COSINE
from memlane.engine import Memory
from memlane.errors import BankNotFound, InvalidInput, NotFound

TRAVEL = [
    "Priya prefers trains to planes because she hates flying on short trips.",
    "Priya took the night train from Paris to Vienna last summer with her sister.",
    "Priya always books a window seat on the train to Edinburgh for the views.",
]
OTHER = [
    "Priya adopted a grey cat called Miso from the shelter in Leeds.",
    "Priya works as a pastry chef at a bakery in Leeds city centre.",
]
QUESTION = "How does Priya like to travel?"


def _items(texts, day=1):
    return [
        {"content": t, "speaker": "Priya", "timestamp": f"2025-03-{day:02d}T09:{i:02d}:00Z"}
        for i, t in enumerate(texts)
    ]


def _engine(settings, embedder, extractor, **update):
    # the tree's own background consolidation is not what these tests look at
    s = settings.model_copy(update={"background": {"tree": False}, **update})
    return Memory(s, embedder=embedder, extractor=extractor)


@pytest.fixture
def engine(settings, embedder, extractor):
    m = _engine(settings, embedder, extractor)
    m.create_bank("priya", name="")
    m.retain_items("priya", _items(TRAVEL + OTHER), document_id="chat-1")
    m.wait_background()
    yield m
    m.close()


def _units(memory, bank="priya"):
    return {u.id: u for b in memory.store.iter_units(bank) for u in b}


def test_a_model_is_answered_from_the_memories_its_question_recalls(engine):
    model, created = engine.curated.put_mental_model("priya", "travel", QUESTION)
    assert created and model.id == "travel" and model.question == QUESTION
    units = _units(engine)
    assert model.recalled == len(units) == 5  # a small bank: recall returns all of it
    assert model.consolidator == "rules"
    # every source is a memory of the bank, quoted with its own text and turns
    assert model.sources
    for s in model.sources:
        assert s.text == units[s.memory_id].text and s.turns == units[s.memory_id].source_turns
    lines = model.answer.splitlines()
    assert lines[0].startswith(
        f"{QUESTION} (from 5 memories, 01 Jun 2024 to 01 Mar 2025)"
    )  # "last summer": June 2024
    assert lines[1:] == [f"- {s.text}" for s in model.sources]
    train = [s for s in model.sources if "train" in s.text]
    assert len(train) >= 2  # the facts that answer it are quoted
    # stored: read back equal
    assert engine.curated.get_mental_model("priya", "travel") == model
    assert engine.curated.list_mental_models("priya") == [model]


def test_put_is_idempotent_and_a_new_question_is_answered_afresh(engine):
    first, _ = engine.curated.put_mental_model("priya", "travel", QUESTION)
    again, created = engine.curated.put_mental_model("priya", "travel", QUESTION)
    assert not created and again == first  # same refreshed_at: nothing was rewritten
    assert len(engine.store.list_curated("model", "priya")) == 1
    changed, created = engine.curated.put_mental_model("priya", "travel", "Where does Priya work?")
    assert not created and changed.created_at == first.created_at
    assert changed.refreshed_at > first.refreshed_at
    assert changed.question == "Where does Priya work?" and changed.answer.startswith(
        "Where does Priya work?"
    )


def test_bad_input_is_refused_naming_the_field(engine):
    with pytest.raises(InvalidInput, match="^model_id: String should match pattern"):
        engine.curated.put_mental_model("priya", "Travel Plans", QUESTION)
    with pytest.raises(InvalidInput, match="^question: Value error, question must not be empty"):
        engine.curated.put_mental_model("priya", "travel", "   ")
    with pytest.raises(BankNotFound):
        engine.curated.put_mental_model("nobody", "travel", QUESTION)
    with pytest.raises(NotFound, match="mental model 'nope' is not in bank 'priya'"):
        engine.curated.get_mental_model("priya", "nope")
    with pytest.raises(NotFound):
        engine.curated.delete_mental_model("priya", "nope")
    with pytest.raises(InvalidInput, match="^directive_id: "):
        engine.curated.put_directive("priya", "-x", "Be brief.")
    with pytest.raises(InvalidInput, match="^tags.0: "):
        engine.curated.put_directive("priya", "x", "Be brief.", tags=[""])
    assert engine.store.list_curated("model", "priya") == []
    assert engine.store.list_curated("directive", "priya") == []


def test_recall_returns_a_model_first_when_the_query_asks_its_question(engine):
    model, _ = engine.curated.put_mental_model("priya", "travel", QUESTION)
    hit = engine.recall("priya", "What are Priya's travel preferences?")
    [found] = hit.mental_models
    assert found.model == model and found.score >= MODEL_RECALL_COSINE
    assert hit.memories  # the memories still come, after it
    assert engine.recall("priya", "Where does Priya work?").mental_models == []


@pytest.mark.parametrize("backend", ["server"], indirect=True)
def test_a_model_written_by_another_engine_reaches_this_ones_recall(
    backend, backend_settings, embedder, extractor
):
    """Recall keeps a bank's models per revision: a model put or deleted through another engine
    (another process, a replica) on the same store moves the revision, and the next recall here
    answers with it, then without it."""
    settings = backend_settings(background={"tree": False})
    with Memory(settings, embedder=embedder, extractor=extractor) as here:
        here.create_bank("priya", name="")
        here.retain_items("priya", _items(TRAVEL + OTHER), document_id="chat-1")
        here.wait_background()
        query = "What are Priya's travel preferences?"
        assert here.recall("priya", query).mental_models == []
        before = here.store.get_revision("priya")
        with Memory(settings, embedder=embedder, extractor=extractor) as there:
            model, _ = there.curated.put_mental_model("priya", "travel", QUESTION)
            assert here.store.get_revision("priya") != before  # the model write moved it
            assert [m.model for m in here.recall("priya", query).mental_models] == [model]
            there.curated.delete_mental_model("priya", "travel")
        assert here.recall("priya", query).mental_models == []
        # and this engine's own writes, kept across recalls in between
        mine, _ = here.curated.put_mental_model("priya", "travel", QUESTION)
        assert [m.model for m in here.recall("priya", query).mental_models] == [mine]
        assert [m.model for m in here.recall("priya", query).mental_models] == [mine]


def test_a_retained_fact_near_the_question_refreshes_the_model(engine):
    model, _ = engine.curated.put_mental_model("priya", "travel", QUESTION)
    engine.retain_items("priya", _items(["We had pasta with tomato sauce for dinner tonight."], day=2))
    engine.wait_background()
    assert engine.curated.get_mental_model("priya", "travel") == model  # an unrelated fact: untouched

    ferry = "Priya now takes the ferry to Dublin whenever she travels to Ireland."
    engine.retain_items("priya", _items([ferry], day=3))
    engine.wait_background()
    after = engine.curated.get_mental_model("priya", "travel")
    assert after.refreshed_at > model.refreshed_at
    assert after.recalled == model.recalled + 2  # the ferry and the pasta memories
    assert [s.text for s in after.sources if ferry in s.text] == [f"Priya: {ferry}"]


def test_deleting_a_cited_memory_rewrites_the_model_without_it(engine):
    model, _ = engine.curated.put_mental_model("priya", "travel", QUESTION)
    gone = model.sources[0].memory_id
    engine.forget.delete_memory("priya", gone)
    engine.wait_background()
    after = engine.curated.get_mental_model("priya", "travel")
    assert gone not in [s.memory_id for s in after.sources]
    assert after.recalled == model.recalled - 1


def test_refresh_and_delete(engine):
    model, _ = engine.curated.put_mental_model("priya", "travel", QUESTION)
    again = engine.curated.refresh_mental_model("priya", "travel")
    assert again.refreshed_at > model.refreshed_at and again.sources == model.sources
    engine.curated.delete_mental_model("priya", "travel")
    assert engine.curated.list_mental_models("priya") == []
    with pytest.raises(NotFound):
        engine.curated.refresh_mental_model("priya", "travel")


def test_deleting_the_bank_deletes_its_models_and_directives(engine):
    engine.create_bank("other", name="")
    engine.curated.put_mental_model("priya", "travel", QUESTION)
    engine.curated.put_directive("priya", "no-ex", "Never mention her ex.")
    engine.curated.put_directive("other", "brief", "Be brief.")
    engine.banks.delete("priya")
    assert engine.store.list_curated("model", "priya") == []
    assert engine.store.list_curated("directive", "priya") == []
    engine.create_bank("priya", name="")  # the same id again starts empty
    assert engine.curated.list_mental_models("priya") == [] and engine.curated.list_directives("priya") == []
    assert [d.id for d in engine.curated.list_directives("other")] == ["brief"]  # other banks keep theirs


def test_directives_crud_is_idempotent(engine):
    d, created = engine.curated.put_directive("priya", "no-ex", "Never mention her ex.", tags=["family"])
    assert created and d.tags == ["family"]
    same, created = engine.curated.put_directive("priya", "no-ex", "Never mention her ex.", tags=["family"])
    assert not created and same == d
    new, created = engine.curated.put_directive("priya", "no-ex", "Never mention her ex, Tom.")
    assert not created and new.tags == [] and new.created_at == d.created_at
    assert engine.curated.list_directives("priya") == [new]
    engine.curated.delete_directive("priya", "no-ex")
    assert engine.curated.list_directives("priya") == []
    with pytest.raises(NotFound, match="directive 'no-ex' is not in bank 'priya'"):
        engine.curated.delete_directive("priya", "no-ex")


# with an LLM (the fake server) -----------------------------------------------------------------


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


def _llm_engine(settings, embedder, extractor, server):
    llm = {"base_url": server.base_url, "model": "fake", "max_retries": 0}
    return _engine(settings, embedder, extractor, llm=llm, background={"tree": False, "reflect": False})


def _by_kind(**replies):
    """A responder answering each kind of request (by its system message) from its own list;
    the recall planner's requests get a 400 (recall falls back to its rules)."""

    def respond(body):
        system = body["messages"][0]["content"]
        kind = (
            "summary"
            if '"summary"' in system
            else "reflect"
            if "Question:" in body["messages"][-1]["content"]
            else ""
        )
        queue = replies.get(kind)
        return queue.pop(0) if queue else {"status": 400}

    return respond


def test_reflect_carries_the_directives_in_scope(settings, embedder, extractor, server):
    server.responder = _by_kind(reflect=[json.dumps({"answer": "Trains.", "cited": [], "opinions": []})] * 2)
    with _llm_engine(settings, embedder, extractor, server) as m:
        m.create_bank("priya", name="Priya")
        # tagged, so the office-scoped reflect recalls them (with nothing to go on it would
        # abstain without asking the model: memlane/recall/abstain.py)
        m.retain_items("priya", _items(TRAVEL), tags=["office"])
        m.curated.put_directive("priya", "no-ex", "Never mention her ex.")
        m.curated.put_directive("priya", "kids", "Speak simply to the children.", tags=["kids"])
        m.curated.put_directive("priya", "work", "Keep work talk formal.", tags=["work", "office"])
        m.reflect("priya", QUESTION, tags=["office"])
        m.reflect("priya", QUESTION)
    asks = [r for r in server.requests if r["messages"][-1]["content"].startswith("Question:")]
    scoped, unscoped = (r["messages"][0]["content"] for r in asks)
    assert scoped.endswith(f"{HEADING}\n- Never mention her ex.\n- Keep work talk formal.")  # by id
    assert "children" not in scoped
    assert unscoped.endswith(f"{HEADING}\n- Never mention her ex.")
    assert "formal" not in unscoped and "children" not in unscoped


def test_the_llm_consolidator_writes_the_answer_and_falls_back_per_model(
    settings, embedder, extractor, server
):
    server.responder = _by_kind(summary=[json.dumps({"summary": "Priya loves trains and avoids planes."})])
    with _llm_engine(settings, embedder, extractor, server) as m:
        m.create_bank("priya", name="")
        m.retain_items("priya", _items(TRAVEL))
        server.requests.clear()
        model, _ = m.curated.put_mental_model("priya", "travel", QUESTION)
        assert model.consolidator == "llm:fake"
        assert model.answer == "Priya loves trains and avoids planes."
        [ask] = [r for r in server.requests if '"summary"' in r["messages"][0]["content"]]
        assert f"Question this answer is for: {QUESTION}" in ask["messages"][1]["content"]
        assert {s.memory_id for s in model.sources} == set(_units(m))
        fallback = m.curated.refresh_mental_model("priya", "travel")  # the model now answers garbage
        assert fallback.consolidator == "rules" and "llm_error" in fallback.metadata
        assert fallback.answer.startswith(f"{QUESTION} (from 3 memories")
