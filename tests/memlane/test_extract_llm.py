"""The LLM extractor against a fake OpenAI-compatible server: valid, repaired and rejected
output, fallback to the rules per chunk, and a real retain with it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from fixtures import write_locomo_fixture
from llm_fake import FakeLLMServer, extraction_reply, turn_lines

from memlane.ingest import load_conversations
from memlane.llm import build_llm
from memlane.records import Bank, FactType, LinkType
from memlane.retain.chunking import chunk_turns
from memlane.retain.extract_llm import LLMExtractor, extraction_messages, facts_from_reply
from memlane.settings import Settings


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


@pytest.fixture(scope="module")
def chunks(tmp_path_factory):
    path = write_locomo_fixture(tmp_path_factory.mktemp("fx") / "fx.json")
    conv = load_conversations(path, format="locomo")[0]  # fx-1: Noor and Felix
    return chunk_turns("b", conv.document_id, conv.turns, 8)


def _llm(server, **kw):
    return build_llm(
        Settings(llm={"base_url": server.base_url, "model": "fake", "max_retries": 0}, **kw), "retain"
    )


NOOR = Bank(bank_id="b", name="Noor")
REPLY = {
    "facts": [
        {
            "what": "Noor signed the lease on an allotment by the railway bridge.",
            "when": "early February 2024",
            "where": "by the railway bridge",
            "who": ["Noor", "Felix"],
            "why": "to grow vegetables",
            "fact_type": "experience",
            "occurred_start": "2024-02-03",
            "occurred_end": "2024-02-03",
            "entities": [{"name": "allotment", "type": "LOC"}],
            "source_turn_ids": ["D1:1"],
        },
        {
            "what": "Noor plans to plant broad beans and sweet peas for Noor's grandmother.",
            "fact_type": "experience",
            "occurred_start": "2024-02",
            "occurred_end": None,
            "who": ["Noor"],
            "source_turn_ids": ["D1:3"],
            "causal_relations": [{"target_index": 0, "relation": "enables", "strength": 0.7}],
        },
    ]
}


def test_prompt_carries_turn_ids_dates_and_owner(chunks):
    msgs = extraction_messages(NOOR, chunks[0])
    assert msgs[0]["role"] == "system" and "what Noor did" in msgs[0]["content"]
    user = msgs[1]["content"]
    assert "Session date: 2024-02-03" in user and "Memory owner: Noor" in user
    assert "[D1:1] (2024-02-03 09:05) Noor: Felix, I finally signed" in user
    assert "(later, context only)" not in user  # the session's last chunk


def test_a_valid_reply_becomes_facts(chunks):
    facts = facts_from_reply(NOOR, chunks[0], json.dumps(REPLY), model="m")
    assert len(facts) == 2
    f0, f1 = facts
    assert f0.text.startswith("Noor signed the lease on an allotment by the railway bridge.")
    assert "Where: by the railway bridge." in f0.text and "Why: to grow vegetables." in f0.text
    assert f0.fact_type == FactType.experience
    assert f0.occurred_start == datetime(2024, 2, 3, tzinfo=UTC)
    assert f0.occurred_end == datetime(2024, 2, 3, 23, 59, 59, tzinfo=UTC)
    assert f0.source_turns == ["D1:1"] and "Noor: Felix, I finally signed" in f0.context
    assert f0.mentioned_at == chunks[0].turns[0].timestamp
    assert [m.surface for m in f0.mentions] == ["Noor", "Felix", "allotment"]
    # A year-month resolves to the month's first day; causal relations point back.
    assert f1.occurred_start == datetime(2024, 2, 1, tzinfo=UTC) and f1.occurred_end is None
    assert [(c.target, c.type, c.strength) for c in f1.causal] == [(0, LinkType.enables, 0.7)]
    assert f1.metadata["extractor"] == "llm" and f1.metadata["model"] == "m"


def test_without_an_owner_every_fact_is_world(chunks):
    facts = facts_from_reply(Bank(bank_id="b"), chunks[0], json.dumps(REPLY))
    assert {f.fact_type for f in facts} == {FactType.world}


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda r: r["facts"][0].update(source_turn_ids=["D9:9"]), "unknown source_turn_ids"),
        (lambda r: r["facts"][1]["causal_relations"][0].update(target_index=1), "not an earlier fact"),
        (lambda r: r["facts"][0].update(occurred_start="last spring"), "not an ISO date"),
        (lambda r: r["facts"][0].update(occurred_end="2024-01-01"), "before occurred_start"),
        (lambda r: r["facts"][0].update(fact_type="opinion"), "fact_type"),
        (lambda r: r.update(facts=[]), "facts"),
    ],
)
def test_invalid_replies_are_rejected_with_a_reason(chunks, mutate, reason):
    bad = json.loads(json.dumps(REPLY))
    mutate(bad)
    with pytest.raises(ValueError, match=reason):
        facts_from_reply(NOOR, chunks[0], json.dumps(bad))


def test_extractor_uses_the_model_and_repairs_once(server, chunks, extractor):
    bad = json.loads(json.dumps(REPLY))
    bad["facts"][0]["source_turn_ids"] = ["D1:99"]
    server.script = [json.dumps(bad), json.dumps(REPLY)]
    ext = LLMExtractor(_llm(server), extractor, concurrency=1)
    [facts] = ext.extract(NOOR, chunks[:1])
    assert [f.source_turns for f in facts] == [["D1:1"], ["D1:3"]]
    assert "unknown source_turn_ids ['D1:99']" in server.requests[1]["messages"][-1]["content"]
    assert ext.stats == {"llm": 1}


def test_rejected_or_failed_chunks_fall_back_to_the_rules(server, chunks, extractor):
    # Chunk 0: malformed twice (repair fails); chunk 1: the server errors; chunk 2: valid.
    def respond(body):
        user = body["messages"][1]["content"]
        if "[D1:1]" in user:
            return '{"facts": [{"what": "cut off'
        if "[D2:1]" in user:
            return {"status": 500}
        return extraction_reply(user, owner="Noor")

    server.responder = respond
    ext = LLMExtractor(_llm(server), extractor, concurrency=2)
    out = ext.extract(NOOR, chunks)
    rules = extractor.extract(NOOR, chunks[:2])
    assert [[f.text for f in fs] for fs in out[:2]] == [[f.text for f in fs] for fs in rules]
    assert all(f.metadata.get("extractor") != "llm" for fs in out[:2] for f in fs)
    assert len(out[2]) == 2 and all(f.metadata["extractor"] == "llm" for f in out[2])
    assert ext.stats == {"llm": 1, "fallback": 2}
    assert ext.reasons == {"LLMOutputError": 1, "LLMError": 1}
    # Every turn of the rejected chunks is still covered.
    assert {t for fs in out[:2] for f in fs for t in f.source_turns} == {
        t.turn_id for c in chunks[:2] for t in c.turns
    }


def test_retain_with_the_llm_extractor(server, settings, embedder, extractor, tmp_path):
    from memlane.engine import Memory

    server.responder = lambda body: extraction_reply(body["messages"][1]["content"])
    s = settings.model_copy(
        update={
            "llm": {"base_url": server.base_url, "model": "fake"},
            "retain": {"extractor": "llm"},
            "background": {"reflect": False},
        }
    )
    path = write_locomo_fixture(tmp_path / "fx.json")
    with Memory(s, embedder=embedder, extractor=LLMExtractor(build_llm(s, "retain"), extractor)) as memory:
        report = memory.retain_file("fx", path)
        assert report.chunks == 5 and report.units == 10  # two facts per chunk
        units = [u for batch in memory.store.iter_units("fx") for u in batch]
        assert all(u.metadata["extractor"] == "llm" for u in units)
        fx1 = [u for u in units if u.document_id == "fx-1"]
        second = [u for u in fx1 if u.source_turns == ["D2:2", "D2:3"]][0]
        first = [u for u in fx1 if u.source_turns == ["D2:1"]][0]
        assert any(l.type == LinkType.caused_by and l.target_id == first.id for l in second.links)
        assert second.occurred_start == datetime(2024, 2, 17, tzinfo=UTC)
        hits = memory.recall("fx", "What did Noor adopt?", max_tokens=200)
        assert any("Dumpling" in m.unit.text for m in hits.memories[:3])
        n = len(server.requests)
        memory.retain_file("fx", path)  # idempotent: same ids, same count
        # an unchanged document is not extracted again: no more calls to the model
        assert memory.store.count_units("fx") == 10 and len(server.requests) == n


def test_engine_builds_the_llm_extractor_from_settings(settings):
    from memlane.engine import Memory
    from memlane.errors import LLMNotConfigured

    with Memory(settings.model_copy(update={"retain": {"extractor": "llm"}})) as m:
        with pytest.raises(LLMNotConfigured, match="MEMLANE_LLM__BASE_URL"):
            _ = m.extractor
    s = settings.model_copy(
        update={"retain": {"extractor": "llm"}, "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "x"}}
    )
    with Memory(s) as m:
        assert isinstance(m.extractor, LLMExtractor) and m.extractor.fallback.name == "rules"


def test_eval_locomo_retains_through_the_llm(server, settings, embedder, extractor, tmp_path):
    from evals.locomo import run_locomo
    from memlane.engine import Memory

    def respond(body):
        # An extraction prompt gets its valid extraction; any other prompt (the tree's
        # consolidation: no turn lines) gets extraction-shaped JSON without facts, which its
        # schema rejects. (extraction_reply raised on those prompts: the fake answered 500, and
        # each node's call waited out the client's three retries, 3.5 s of backoff, before
        # falling back: most of this test's minute.)
        text = body["messages"][1]["content"] if len(body["messages"]) > 1 else ""
        return extraction_reply(text) if turn_lines(text) else json.dumps({"facts": []})

    server.responder = respond
    s = settings.model_copy(
        update={
            "llm": {"base_url": server.base_url, "model": "fake"},
            "retain": {"extractor": "llm"},
            "background": {"reflect": False},
        }
    )
    path = write_locomo_fixture(tmp_path / "fx.json")
    ext = LLMExtractor(build_llm(s, "retain"), extractor)
    with Memory(s, embedder=embedder, extractor=ext) as memory:
        report = run_locomo(memory, path, ks=(5,), progress=False)
        assert memory.store.count_units("fx-1") == 6  # 3 chunks x 2 LLM facts (bank = sample id)
    extraction = [r for r in server.requests if r["messages"][0]["content"].startswith("You extract")]
    assert ext.stats == {"llm": 5} and len(extraction) == 5
    # the eval consolidates each bank's tree with the configured LLM too (the fake answers it
    # with extraction JSON, so every node falls back to the extractive consolidator)
    assert len(server.requests) > 5
    assert report  # scored over the LLM-extracted units
