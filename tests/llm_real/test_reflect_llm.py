"""CARA through the real model: reflect with a disposition, the opinions it forms, their
reassessment when evidence arrives, the observations of entities and background merging."""

from __future__ import annotations

import pytest
from fixtures import write_jsonl_fixture

from memlane.engine import Memory
from memlane.ingest import load_conversations
from memlane.llm.errors import LLMError, LLMOutputError
from memlane.records import FactType
from memlane.reflect.opinions import OpinionDraft
from tests.llm_real.conftest import DAY1, DAY2, llm_settings

pytestmark = pytest.mark.llm_real

STEPS = {0.6, 0.7, 0.5, 0.4}  # 0.6 after neutral, reinforce (+a), weaken (-a), contradict (-2a); a = 0.1


def _retain(memory, tmp_path, rows, doc):
    path = write_jsonl_fixture(tmp_path / f"{doc}.jsonl", rows)
    convs = load_conversations(path, format="jsonl")
    return memory.retain("ana", [(doc, c.turns) for c in convs])


def _units(memory, fact_type=None):
    units = [u for b in memory.store.iter_units("ana") for u in b]
    return [u for u in units if fact_type is None or u.fact_type == fact_type]


def test_reflect_answers_in_the_banks_voice_and_stores_what_it_forms(
    local_llm, tmp_path, embedder, extractor
):
    s = llm_settings(tmp_path, local_llm)
    with Memory(s, embedder=embedder, extractor=extractor) as m:
        m.create_bank(
            "ana", name="Ana", background="I am a vet in Lisbon.", disposition={"skepticism": 5, "empathy": 4}
        )
        _retain(m, tmp_path, DAY1, "d1")
        before = sorted(u.id for u in _units(m))
        try:
            res = m.reflect("ana", "What do you think of Pixel?", max_tokens=400, budget="low")
        except LLMOutputError as exc:
            # No fallback for an answer: the one-line reason, and nothing was written.
            assert "ReflectReply" in str(exc)
            assert sorted(u.id for u in _units(m)) == before
            return
        assert res.answer.strip() and not res.abstain
        shown = {r.unit.id for r in res.memories}
        assert shown and set(res.memory_ids) <= shown  # citations resolve to memories it was shown
        stored = {u.id: u for u in _units(m, FactType.opinion)}
        assert {o.id for o in res.opinions} == set(stored)  # every opinion it formed, and only those
        for op in stored.values():
            assert op.text.strip() and 0.0 <= op.confidence <= 1.0 and len(op.history) == 1
        assert m.banks.doctor("ana").errors == []


def test_evidence_reassesses_related_opinions_and_refreshes_observations(
    local_llm, tmp_path, embedder, extractor
):
    s = llm_settings(tmp_path, local_llm, background={"mode": "sync", "reflect": True})
    with Memory(s, embedder=embedder, extractor=extractor) as m:
        m.create_bank("ana", name="Ana")
        _retain(m, tmp_path, DAY1, "d1")
        [op] = m.reflection.form_opinions(
            m.banks.get("ana"),
            [
                OpinionDraft(
                    statement="I think Pixel is a well behaved dog.", confidence=0.6, entities=["Pixel"]
                )
            ],
            [],
            "seed",
        )
        client = m.reflection.llm("consolidation")
        asked = client.usage["requests"]
        _retain(m, tmp_path, DAY2, "d2")  # mentions Pixel: the opinion is related
        assert client.usage["requests"] > asked  # the model was asked (assessment, observations)
        [after] = _units(m, FactType.opinion)
        assert after.id == op.id and after.confidence in STEPS
        new_ids = {u.id for u in _units(m) if u.document_id == "d2"}
        if after.confidence == 0.6:  # neutral (or a failed assessment): no change recorded
            assert len(after.history) == 1
        else:
            assert [h.confidence for h in after.history] == [0.6, after.confidence]
            assert after.history[-1].evidence_id in new_ids
        facts = [u for u in _units(m) if u.fact_type in (FactType.world, FactType.experience)]
        for obs in _units(m, FactType.observation):
            [eid] = obs.entity_ids
            about = {u.id for u in facts if eid in u.entity_ids}
            assert obs.text.strip() and set(obs.source_fact_ids) <= about and obs.proof_count == len(about)
        assert m.scheduler.errors == []
        assert m.banks.doctor("ana").errors == []


def test_background_merging_keeps_a_biography(local_llm, tmp_path, embedder, extractor):
    s = llm_settings(tmp_path, local_llm)
    with Memory(s, embedder=embedder, extractor=extractor) as m:
        m.create_bank("ana", name="Ana", background="I am a vet in Lisbon.")
        try:
            bank = m.reflection.merge_background("ana", "I moved to Porto and adopted a beagle.")
        except LLMOutputError:
            assert m.banks.get("ana").background == "I am a vet in Lisbon."  # untouched
            return
        assert bank.background.strip() and m.banks.get("ana").background == bank.background


def test_reflect_with_the_server_down_names_it_and_writes_nothing(tmp_path, embedder, extractor):
    from cluster.local import free_port

    class Down:
        base_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
        alias = "smollm2-135m-instruct"

    s = llm_settings(tmp_path, Down())
    with Memory(s, embedder=embedder, extractor=extractor) as m:
        m.create_bank("ana", name="Ana")
        _retain(m, tmp_path, DAY1, "d1")
        before = sorted(u.id for u in _units(m))
        with pytest.raises(
            LLMError, match=r"reflect LLM at http://127\.0\.0\.1:\d+/v1 failed after 1 attempts: ConnectError"
        ):
            m.reflect("ana", "How is Pixel?")
        assert sorted(u.id for u in _units(m)) == before
