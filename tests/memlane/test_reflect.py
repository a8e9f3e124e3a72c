"""CARA against a fake OpenAI-compatible server, on the real engine (Milvus Lite, MiniLM):
reflect, opinion formation, each reinforcement case with exact confidences, observation
refresh, the background worker and background merging."""

from __future__ import annotations

import json

import pytest
from fixtures import write_jsonl_fixture
from llm_fake import FakeLLMServer

from memlane.engine import Memory
from memlane.errors import InvalidInput, LLMNotConfigured
from memlane.records import Disposition, FactType
from memlane.reflect.disposition import system_message, verbalize
from memlane.reflect.opinions import OpinionDraft, updated_confidence

DAY1 = [
    {
        "speaker": "Ana",
        "text": "I adopted a beagle called Pixel last week.",
        "timestamp": "2025-03-10T09:00:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ben",
        "text": "Lovely! Is Pixel settling in?",
        "timestamp": "2025-03-10T09:01:00Z",
        "session_id": "s1",
    },
]
DAY2 = [
    {
        "speaker": "Ana",
        "text": "My beagle Pixel chewed my running shoes, but we walk every morning.",
        "timestamp": "2025-04-02T18:00:00Z",
        "session_id": "s2",
    },
]


class Model:
    """Scripted answers by request kind; ``verdict`` drives opinion assessments."""

    def __init__(self) -> None:
        self.verdict = "reinforce"
        self.reflect_reply: dict = {
            "answer": "I walk Pixel every morning [M1].",
            "cited": ["M1"],
            "opinions": [],
        }
        self.calls: dict[str, int] = {}
        self.structured_reply = json.dumps({"dog": "Pixel", "walks": True})

    def __call__(self, body: dict):
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        kind = (
            "assess"
            if system.startswith("You hold an opinion")
            else "observe"
            if system.startswith("Write an objective summary")
            else "merge"
            if system.startswith("You maintain a first-person biography")
            else "reflect"
            if user.startswith("Question:")
            else "other"
        )
        self.calls[kind] = self.calls.get(kind, 0) + 1
        if kind == "assess":
            return json.dumps({"verdict": self.verdict, "reason": "scripted"})
        if kind == "observe":
            n = user.count("\n- ")
            return json.dumps({"summary": f"Summary of {n} facts."})
        if kind == "merge":
            return json.dumps({"background": "I am a vet in Porto. I have a beagle."})
        if kind == "reflect":
            return json.dumps(self.reflect_reply)
        if user.startswith("Answer to structure:") or user.startswith("That reply was rejected"):
            self.calls["structured"] = self.calls.get("structured", 0) + 1
            return self.structured_reply
        return {"status": 400}


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        s.responder = s.model = Model()
        yield s


# How reflect's background work runs: after each retain, inline ("sync"), on the scheduler's
# thread ("thread"), or not at all ("off").
BACKGROUND = {
    "sync": {"reflect": True, "mode": "sync"},
    "thread": {"reflect": True},
    "off": {"reflect": False},
}


def _memory(settings, embedder, extractor, server, mode="sync"):
    s = settings.model_copy(
        update={
            "llm": {"base_url": server.base_url, "model": "fake", "max_retries": 0},
            "background": BACKGROUND[mode],
        }
    )
    return Memory(s, embedder=embedder, extractor=extractor)


def _retain(memory, tmp_path, rows, doc):
    path = write_jsonl_fixture(tmp_path / f"{doc}.jsonl", rows)
    from memlane.ingest import load_conversations

    convs = load_conversations(path, format="jsonl")
    return memory.retain("ana", [(doc, c.turns) for c in convs])


def _units(memory, fact_type):
    return [u for b in memory.store.iter_units("ana") for u in b if u.fact_type == fact_type]


def _entity(memory, name):
    return next(e.entity_id for e in memory.store.list_entities("ana") if e.name == name)


@pytest.mark.parametrize(
    "c, verdict, expected",
    [
        (0.6, "reinforce", 0.7),
        (0.6, "weaken", 0.5),
        (0.6, "contradict", 0.4),
        (0.6, "neutral", 0.6),
        (0.95, "reinforce", 1.0),
        (0.15, "contradict", 0.0),
        (0.05, "weaken", 0.0),
    ],
)
def test_confidence_updates(c, verdict, expected):
    assert updated_confidence(c, verdict, 0.1) == expected


def test_disposition_is_verbalized_into_the_system_message():
    from memlane.records import Bank

    bank = Bank(
        bank_id="b",
        name="Ana",
        background="I am a vet.",
        disposition=Disposition(skepticism=5, literalism=1, empathy=4, bias_strength=0.9),
    )
    text = system_message(bank)
    assert text.startswith("You are Ana") and "Your background: I am a vet." in text
    assert "highly skeptical" in text and "read between the lines" in text
    assert "empathetic" in text and "strongly shape" in text
    assert "lightly colour" in verbalize(Disposition(bias_strength=0.1))


def test_reflect_without_an_llm_names_the_setting(memory):
    memory.create_bank("ana", name="Ana")
    with pytest.raises(LLMNotConfigured, match="MEMLANE_LLM__BASE_URL"):
        memory.reflect("ana", "How is Pixel?")


def test_reflect_answers_cites_and_forms_opinions(settings, embedder, extractor, server, tmp_path):
    with _memory(settings, embedder, extractor, server, mode="off") as memory:
        memory.create_bank(
            "ana", name="Ana", background="I am a vet in Lisbon.", disposition={"skepticism": 5}
        )
        _retain(memory, tmp_path, DAY1, "d1")
        server.model.reflect_reply = {
            "answer": "Pixel is my beagle [M1].",
            "cited": ["M1", "[M1]", "M99"],
            "opinions": [
                {
                    "statement": "I think Pixel is a good dog.",
                    "confidence": 0.6,
                    "entities": ["Pixel", "Nobody"],
                }
            ],
        }
        res = memory.reflect("ana", "Tell me about Pixel", max_tokens=500, budget="low")
        assert res.answer == "Pixel is my beagle [M1]."
        assert res.memory_ids == [res.memories[0].unit.id]  # M1 once; M99 is not a memory
        # the cited memory gained salience (memlane/facts/salience.py); the others did not
        assert memory.browse.get_memory("ana", res.memory_ids[0]).metadata["salience"]["n"] == 1.0
        others = [m.unit.id for m in res.memories[1:]]
        assert others and all("salience" not in memory.browse.get_memory("ana", i).metadata for i in others)
        req = next(r for r in server.requests if r["messages"][-1]["content"].startswith("Question:"))
        assert "I am a vet in Lisbon." in req["messages"][0]["content"]
        assert "highly skeptical" in req["messages"][0]["content"]
        m1 = res.memories[0].unit
        when = (m1.occurred_start or m1.mentioned_at).date().isoformat()
        assert f"[M1] ({m1.fact_type.value}, {when}) {m1.text}" in req["messages"][1]["content"]
        assert set(res.timings_ms) >= {"recall", "llm", "opinions", "total"}

        [op] = res.opinions
        assert op.fact_type == FactType.opinion and op.confidence == 0.6
        assert op.entity_ids == [_entity(memory, "Pixel")]
        assert op.source_fact_ids == res.memory_ids
        assert [h.confidence for h in op.history] == [0.6]
        stored = _units(memory, FactType.opinion)
        assert [u.id for u in stored] == [op.id]
        again = memory.recall("ana", "good dog", types=["opinion"])
        assert [m.unit.id for m in again.memories] == [op.id]

        # Stating the same opinion again updates it (same id) and keeps the history.
        server.model.reflect_reply["opinions"][0]["confidence"] = 0.8
        res2 = memory.reflect("ana", "Is Pixel good?")
        assert res2.opinions[0].id == op.id and res2.opinions[0].confidence == 0.8
        assert [h.confidence for h in _units(memory, FactType.opinion)[0].history] == [0.6, 0.8]


def test_reflect_rejects_bad_options(settings, embedder, extractor, server):
    with _memory(settings, embedder, extractor, server, mode="off") as memory:
        memory.create_bank("ana", name="Ana")
        with pytest.raises(InvalidInput, match="budget"):
            memory.reflect("ana", "q", budget="huge")
        with pytest.raises(InvalidInput, match="colour"):
            memory.reflect("ana", "q", colour="red")
        with pytest.raises(InvalidInput, match="query must not be empty"):
            memory.reflect("ana", "  ")


@pytest.mark.parametrize(
    "verdict, expected", [("reinforce", 0.7), ("weaken", 0.5), ("contradict", 0.4), ("neutral", 0.6)]
)
def test_retained_evidence_updates_related_opinions(
    settings, embedder, extractor, server, tmp_path, verdict, expected
):
    with _memory(settings, embedder, extractor, server) as memory:
        memory.create_bank("ana", name="Ana")
        _retain(memory, tmp_path, DAY1, "d1")
        bank = memory.banks.get("ana")
        [op] = memory.reflection.form_opinions(
            bank,
            [OpinionDraft(statement="I think Pixel is well behaved.", confidence=0.6, entities=["Pixel"])],
            [],
            "seed",
        )
        server.model.verdict = verdict
        before = server.model.calls.get("assess", 0)
        _retain(memory, tmp_path, DAY2, "d2")  # mentions Pixel: a related opinion
        assert server.model.calls["assess"] == before + 1
        [after] = _units(memory, FactType.opinion)
        assert after.id == op.id and after.confidence == expected
        new_ids = {u.id for u in _units(memory, FactType.experience) if u.document_id == "d2"}
        if verdict == "neutral":
            assert len(after.history) == 1
        else:
            assert [h.confidence for h in after.history] == [0.6, expected]
            assert after.history[-1].reason == f"{verdict}: scripted"
            assert after.history[-1].evidence_id in new_ids


def test_unrelated_opinions_are_not_assessed(settings, embedder, extractor, server, tmp_path):
    with _memory(settings, embedder, extractor, server) as memory:
        memory.create_bank("ana", name="Ana")
        _retain(memory, tmp_path, DAY1, "d1")
        memory.reflection.form_opinions(
            memory.banks.get("ana"),
            [OpinionDraft(statement="I believe quantum computers will break RSA by 2040.", confidence=0.3)],
            [],
            "q",
        )
        _retain(memory, tmp_path, DAY2, "d2")
        assert server.model.calls.get("assess", 0) == 0
        assert _units(memory, FactType.opinion)[0].confidence == 0.3


def test_observations_are_refreshed_per_entity(settings, embedder, extractor, server, tmp_path):
    with _memory(settings, embedder, extractor, server, mode="thread") as memory:
        memory.create_bank("ana", name="Ana")
        _retain(memory, tmp_path, DAY1, "d1")
        memory.wait_background()
        pixel = _entity(memory, "Pixel")
        facts = [
            u
            for u in _units(memory, FactType.experience) + _units(memory, FactType.world)
            if pixel in u.entity_ids
        ]
        obs = {u.entity_ids[0]: u for u in _units(memory, FactType.observation)}
        assert set(obs) == {e.entity_id for e in memory.store.list_entities("ana")}
        first = obs[pixel]
        assert first.proof_count == len(facts) == 2
        assert sorted(first.source_fact_ids) == sorted(u.id for u in facts)
        assert first.text == "Summary of 2 facts." and first.metadata["entity"] == "Pixel"

        _retain(memory, tmp_path, DAY2, "d2")
        memory.wait_background()
        obs2 = {u.entity_ids[0]: u for u in _units(memory, FactType.observation)}
        assert obs2[pixel].id == first.id  # the same observation, rewritten
        assert obs2[pixel].proof_count == 3 and obs2[pixel].text == "Summary of 3 facts."
        assert memory.scheduler.errors == []
        hits = memory.recall("ana", "Pixel", types=["observation"])
        assert first.id in [m.unit.id for m in hits.memories]


def test_thread_mode_returns_before_the_jobs_and_close_flushes(
    settings, embedder, extractor, server, tmp_path
):
    memory = _memory(settings, embedder, extractor, server, mode="thread")
    memory.create_bank("ana", name="Ana")
    _retain(memory, tmp_path, DAY1, "d1")
    memory.close()  # runs the queued consolidation before the store closes
    reopened = Memory(settings, embedder=embedder, extractor=extractor)
    try:
        assert len(_units(reopened, FactType.observation)) == len(reopened.store.list_entities("ana"))
    finally:
        reopened.close()


def test_background_merging(settings, embedder, extractor, server):
    with _memory(settings, embedder, extractor, server, mode="off") as memory:
        memory.create_bank("ana", name="Ana")
        bank = memory.reflection.merge_background("ana", "I am a vet in Lisbon.")
        assert bank.background == "I am a vet in Lisbon." and not server.requests  # no model call
        bank = memory.reflection.merge_background("ana", "I moved to Porto and adopted a beagle.")
        assert bank.background == "I am a vet in Porto. I have a beagle."
        assert memory.banks.get("ana").background == bank.background
        [req] = server.requests
        assert "Current biography:\nI am a vet in Lisbon." in req["messages"][1]["content"]
        assert "New information:\nI moved to Porto" in req["messages"][1]["content"]
        assert "new information wins" in req["messages"][0]["content"]
        with pytest.raises(InvalidInput, match="must not be empty"):
            memory.reflection.merge_background("ana", " ")


def test_merging_into_a_background_needs_an_llm(memory):
    memory.create_bank("ana", name="Ana", background="I am a vet.")
    with pytest.raises(LLMNotConfigured, match="background merging"):
        memory.reflection.merge_background("ana", "I moved.")


SCHEMA = {
    "type": "object",
    "properties": {"dog": {"type": "string"}, "walks": {"type": "boolean"}},
    "required": ["dog", "walks"],
}


def test_reflect_gives_the_answer_as_the_callers_json_schema(settings, embedder, extractor, server, tmp_path):
    with _memory(settings, embedder, extractor, server, mode="off") as memory:
        memory.create_bank("ana", name="Ana")
        _retain(memory, tmp_path, DAY1, "d1")
        res = memory.reflect("ana", "Tell me about Pixel", response_schema=SCHEMA, form_opinions=False)
        assert res.answer == "I walk Pixel every morning [M1]."
        assert res.structured_output == {"dog": "Pixel", "walks": True}
        assert res.structured_output_error is None and "structured" in res.timings_ms
        asked = next(r for r in server.requests if r["messages"][-1]["content"].startswith("Answer to"))
        assert asked["response_format"]["json_schema"]["schema"] == SCHEMA  # the caller's schema, sent
        assert "Answer to structure: I walk Pixel every morning [M1]." in asked["messages"][-1]["content"]

        # A reply that does not follow the schema, also after the repair: the answer stands and
        # the error says why there is no structured output.
        server.model.structured_reply = json.dumps({"dog": 3})
        res = memory.reflect("ana", "Tell me about Pixel", response_schema=SCHEMA, form_opinions=False)
        assert res.answer == "I walk Pixel every morning [M1]." and res.structured_output is None
        assert "invalid response_schema after one repair" in (res.structured_output_error or "")
        assert "dog: 3 is not of type 'string'" in (res.structured_output_error or "")

        # Without a schema no second call is made.
        before = server.model.calls.get("structured", 0)
        res = memory.reflect("ana", "Tell me about Pixel", form_opinions=False)
        assert res.structured_output is None and server.model.calls.get("structured", 0) == before


def test_a_response_schema_that_is_no_json_schema_is_refused(settings, embedder, extractor, server):
    with _memory(settings, embedder, extractor, server, mode="off") as memory:
        memory.create_bank("ana", name="Ana")
        with pytest.raises(InvalidInput, match="response_schema: .*not a valid JSON Schema"):
            memory.reflect("ana", "Tell me about Pixel", response_schema={"type": "nothing-like-this"})
        assert not server.requests  # refused before any model call
