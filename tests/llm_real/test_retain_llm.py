"""Retain through the real model: schema-constrained extraction, the per-chunk fallback with
its error recorded, deferred extraction replacing the episode, and the client's timeout and
concurrency settings, against llama.cpp's server."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from fixtures import write_locomo_fixture

from memlane.engine import Memory
from memlane.ids import unit_id
from memlane.ingest import load_conversations
from memlane.llm import build_llm
from memlane.retain.chunking import chunk_turns
from memlane.retain.extract_llm import LLMExtractor
from tests.llm_real.conftest import llm_settings

pytestmark = pytest.mark.llm_real


@pytest.fixture(scope="module")
def noor(tmp_path_factory):
    """fx-1 of the LoCoMo-shaped fixture: Noor and Felix, 10 turns in 3 sessions."""
    path = write_locomo_fixture(tmp_path_factory.mktemp("fx") / "fx.json")
    return load_conversations(path, format="locomo")[0]


def _sessions(conv, *sessions):
    """``conv`` cut to the turns of ``sessions`` (one chunk a session here): each reply of the
    model takes up to ~25 s on 2 cores, so a test pays only for the chunks its check needs."""
    return dataclasses.replace(conv, turns=[t for t in conv.turns if t.session_id in sessions])


def _units(m, bank):
    return [u for batch in m.store.iter_units(bank) for u in batch]


def _check_bank(m, bank, conv):
    """What holds whatever the model said: every memory is the model's (extractor "llm") or the
    rules' with the model's error beside it, cites only turns of its document, has an id of its
    chunk's sequence; every chunk is stored (nothing lost); the doctor finds nothing."""
    turn_ids = {t.turn_id for t in conv.turns}
    units = _units(m, bank)
    assert units, "a retained document always leaves memories (the rules at worst)"
    chunks = {
        c.chunk.chunk_id
        for c in chunk_turns(bank, conv.document_id, conv.turns, m.settings.retain.chunk_max_turns)
    }
    per_chunk: dict[str, list] = {}
    for u in units:
        assert u.text.strip()
        assert set(u.source_turns) <= turn_ids, (u.text, u.source_turns)
        if u.metadata.get("extractor") != "llm":
            assert u.metadata.get("llm_error"), f"a fallback memory without the model's error: {u.text!r}"
        per_chunk.setdefault(u.chunk_id, []).append(u.id)
    assert set(per_chunk) <= chunks
    for cid, ids in per_chunk.items():
        assert sorted(ids) == sorted(unit_id(bank, conv.document_id, cid, i) for i in range(len(ids)))
    docs = m.browse.list_documents(bank)
    assert docs[conv.document_id]["chunks"] == len(chunks)
    report = m.banks.doctor(bank)
    assert report.errors == [], [f.as_dict() for f in report.errors]
    return units


def test_llm_extraction_writes_valid_facts_or_the_rules_with_the_error(local_llm, tmp_path, embedder, noor):
    """MEMLANE_RETAIN__EXTRACTOR=llm: the engine's own wiring (the LLM extractor of the retain
    role, its concurrency and token limit from the settings, the rules as its fallback), then
    what its extraction writes. One test for both: each retained the fixture's chunks through
    the same extractor, and each chunk costs a model reply of up to ~25 s on 2 cores."""
    from memlane.retain.extract_rules import RuleExtractor

    noor = _sessions(noor, "session_1", "session_2")  # two chunks: both requests at once
    s = llm_settings(
        tmp_path, local_llm, llm={"concurrency": 2}, retain={"extractor": "llm", "defer_llm": False}
    )
    with Memory(s, embedder=embedder) as m:
        llm_ext = m.extractor
        assert isinstance(llm_ext, LLMExtractor) and isinstance(llm_ext.fallback, RuleExtractor)
        assert (llm_ext.concurrency, llm_ext.max_tokens) == (2, s.llm.extract_max_tokens)
        m.create_bank("noor", name="Noor")
        report = m.retain("noor", [(noor.document_id, noor.turns)])
        units = _check_bank(m, "noor", noor)
        assert report.units == len(units)
        assert sum(llm_ext.stats.values()) == report.chunks  # each chunk: the model's or the rules'
        assert llm_ext.stats["llm"] + llm_ext.stats["fallback"] == report.chunks
        assert llm_ext.llm.usage["requests"] >= report.chunks  # every chunk went to the model
        # The same document again: greedy decoding gives the same replies, so the same memories
        # under the same ids, replaced in one write.
        m.retain("noor", [(noor.document_id, noor.turns)])
        again = _check_bank(m, "noor", noor)
        assert sorted((u.id, u.text) for u in again) == sorted((u.id, u.text) for u in units)


def test_deferred_extraction_replaces_the_episode(local_llm, tmp_path, embedder, extractor, noor):
    s = llm_settings(
        tmp_path, local_llm, retain={"extractor": "llm", "defer_llm": True}, background={"mode": "thread"}
    )
    llm_ext = LLMExtractor(build_llm(s, "retain"), extractor, max_tokens=s.llm.extract_max_tokens)
    with Memory(s, embedder=embedder, extractor=llm_ext) as m:
        m.create_bank("noor", name="Noor")
        items = [
            {
                "content": t.text,
                "speaker": t.speaker,
                "timestamp": t.timestamp.isoformat(),
                "session_id": t.session_id,
            }
            for t in noor.turns
        ]
        report = m.retain_items("noor", items, document_id="chat")
        assert report.deferred == 1
        episode = _units(m, "noor")
        assert episode and {u.metadata.get("extractor") for u in episode} == {None}  # the rules, at once
        m.wait_background()
        after = _units(m, "noor")
        assert after
        # the model's facts replaced the episode wholesale, or its chunks fell back with the reason
        assert all(u.metadata.get("extractor") == "llm" or u.metadata.get("llm_error") for u in after)
        assert llm_ext.stats["llm"] + llm_ext.stats["fallback"] == report.chunks
        assert m.browse.list_documents("noor")["chat"]["chunks"] == report.chunks
        assert m.banks.doctor("noor").errors == []
        assert m.recall("noor", "tortoise").memories  # still recallable


def test_a_reply_cut_at_max_tokens_falls_back_per_chunk(local_llm, tmp_path, embedder, extractor, noor):
    """12 tokens cannot hold an extraction: the JSON is cut, the repair is cut, the rules write."""
    s = llm_settings(tmp_path, local_llm, retain={"extractor": "llm", "defer_llm": False})
    llm_ext = LLMExtractor(build_llm(s, "retain"), extractor, max_tokens=12)
    with Memory(s, embedder=embedder, extractor=llm_ext) as m:
        m.create_bank("noor", name="Noor")
        m.retain("noor", [(noor.document_id, noor.turns)])
        units = _check_bank(m, "noor", noor)
    assert llm_ext.stats == {"fallback": 3}
    assert dict(llm_ext.reasons) == {"LLMOutputError": 3}
    assert all("LLMOutputError" in u.metadata["llm_error"] for u in units)
    assert llm_ext.llm.usage["requests"] == 6  # one repair round per chunk, then the rules


def test_the_timeout_is_honoured_and_nothing_is_lost(local_llm, tmp_path, embedder, extractor, noor):
    """A reply later than llm.timeout_s: the attempt and its one retry time out, the rules write."""
    s = llm_settings(
        tmp_path,
        local_llm,
        llm={"timeout_s": 0.05, "max_retries": 1, "backoff_s": 0.0},
        retain={"extractor": "llm", "defer_llm": False},
    )
    # 20 tokens: the server finishes the requests this client gave up on; keep that short
    llm_ext = LLMExtractor(build_llm(s, "retain"), extractor, max_tokens=20)
    with Memory(s, embedder=embedder, extractor=llm_ext) as m:
        m.create_bank("noor", name="Noor")
        m.retain("noor", [(noor.document_id, noor.turns)])
        units = _check_bank(m, "noor", noor)
    assert llm_ext.stats == {"fallback": 3}
    assert all("timed out after 0.05s" in u.metadata["llm_error"] for u in units)
    assert llm_ext.llm.usage["retries"] == 3 and llm_ext.llm.usage["requests"] == 0


def test_requests_in_flight_stay_within_the_concurrency_setting(local_llm, tmp_path, extractor, noor):
    """Four extraction threads, ``llm.concurrency`` 2: the client never has more than two
    requests at the server (counted around the real HTTP call)."""
    s = llm_settings(tmp_path, local_llm, llm={"concurrency": 2})
    llm = build_llm(s, "retain")
    inflight, peak, lock = [0], [0], threading.Lock()
    post = llm._http.post

    def counted(*args, **kwargs):
        with lock:
            inflight[0] += 1
            peak[0] = max(peak[0], inflight[0])
        try:
            return post(*args, **kwargs)
        finally:
            with lock:
                inflight[0] -= 1

    llm._http.post = counted
    from memlane.records import Bank

    items = chunk_turns("noor", noor.document_id, noor.turns, 2)  # 5+ chunks of two turns
    assert len(items) >= 4
    ext = LLMExtractor(llm, extractor, concurrency=4, max_tokens=40)
    facts = ext.extract(Bank(bank_id="noor", name="Noor"), items)
    assert len(facts) == len(items)
    assert peak[0] == 2
