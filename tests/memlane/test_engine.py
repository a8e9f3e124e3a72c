"""Integration tests of the engine on real Milvus Lite, igraph, MiniLM and spaCy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fixtures import locomo_fixture_data, write_jsonl_fixture, write_locomo_fixture

from memlane.engine import Memory
from memlane.errors import BankNotFound, InvalidInput
from memlane.records import FactType


def _fixture_turns(sample_id: str) -> dict[str, str]:
    """turn id -> text of one fixture sample, read from the fixture data itself."""
    sample = next(s for s in locomo_fixture_data() if s["sample_id"] == sample_id)
    return {
        t["dia_id"]: t["text"]
        for k, v in sample["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
        for t in v
    }


def _snapshot(memory: Memory, bank: str) -> dict:
    units = {
        u.id: (u.text, tuple(u.source_turns), tuple(sorted(u.entity_ids)), len(u.links))
        for batch in memory.store.iter_units(bank)
        for u in batch
    }
    stats = memory.banks.stats(bank)
    return {"units": units, "chunks": stats["chunks"], "entities": stats["entities"], "graph": stats["graph"]}


def test_retain_writes_one_memory_per_turn_and_is_idempotent(memory, tmp_path):
    path = write_locomo_fixture(tmp_path / "fx.json")
    report = memory.retain_file("fx", path)
    n_turns = len(_fixture_turns("fx-1")) + len(_fixture_turns("fx-2"))
    assert report.turns == n_turns == 20
    assert report.units == n_turns
    first = _snapshot(memory, "fx")
    assert len(first["units"]) == n_turns
    units = [u for batch in memory.store.iter_units("fx") for u in batch]
    for doc in ("fx-1", "fx-2"):
        assert sorted(t for u in units if u.document_id == doc for t in u.source_turns) == sorted(
            _fixture_turns(doc)
        )
    assert first["chunks"] >= 5  # one per session at least
    assert first["entities"] >= 4  # the four speakers at least
    assert first["graph"]["units"] == n_turns

    memory.retain_file("fx", path)
    assert _snapshot(memory, "fx") == first


def test_entities_include_speakers_and_named_things(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    names = {e.name for e in memory.store.list_entities("fx")}
    assert {"Noor", "Felix", "Marta", "Olu"} <= names
    assert "Dumpling" in names or "Tartu" in names
    noor = next(e for e in memory.store.list_entities("fx") if e.name == "Noor")
    assert noor.mention_count >= 5  # Noor speaks 5 turns in fx-1 and is named in none of Felix's


def test_recall_ranks_the_evidence_turn_first(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    res = memory.recall("fx", "What pet did Noor adopt?", max_tokens=500)
    assert res.memories[0].unit.source_turns == ["D2:3"]
    assert "Dumpling" in res.memories[0].unit.text
    res = memory.recall("fx", "What did Marta buy at the market?", max_tokens=500)
    top3 = [m.unit.source_turns[0] for m in res.memories[:3]]
    assert "D2:3" in top3


def test_recall_packs_to_the_token_budget(memory, tmp_path, embedder):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    small = memory.recall("fx", "allotment", max_tokens=40)
    assert 0 < small.tokens <= 40
    assert small.tokens == sum(embedder.count_tokens([m.unit.text for m in small.memories]))
    big = memory.recall("fx", "allotment", max_tokens=5000)
    assert len(big.memories) > len(small.memories)
    assert big.tokens <= 5000


def test_trace_reports_channel_ranks_and_boosts(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    res = memory.recall("fx", "Dumpling the tortoise", trace=True)
    top = res.memories[0].trace
    assert top["channels"]["lexical"]["rank"] == 1
    assert "semantic" in top["channels"]
    assert set(top["boosts"]) == {"recency", "temporal", "proof", "salience"}
    assert top["final"] == pytest.approx(res.memories[0].score)
    ranks = [m.trace["rrf"]["score"] for m in res.memories]
    assert ranks[0] == max(ranks)


def test_temporal_channel_finds_memories_in_the_queried_period(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    as_of = datetime(2024, 3, 5, tzinfo=UTC)
    res = memory.recall("fx", "What happened last week?", as_of=as_of, trace=True)
    assert res.query_interval is not None
    temporal = [m for m in res.memories if "temporal" in m.trace["channels"]]
    assert temporal
    # Last week of 5 March 2024 is 26 Feb - 3 Mar: fx-1 session 3 (2 March) lies in it.
    assert temporal[0].unit.source_turns[0].startswith("D3:")
    assert all(m.unit.mentioned_at <= as_of for m in res.memories)


def test_reference_time_resolves_relative_times_without_filtering(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    ref = datetime(2024, 2, 20, tzinfo=UTC)  # after fx-1's session 2, before its session 3
    by_ref = memory.recall("fx", "What happened last week?", reference_time=ref, max_tokens=100_000)
    by_as_of = memory.recall("fx", "What happened last week?", as_of=ref, max_tokens=100_000)
    # Both resolve "last week" against 20 February 2024 (Monday 12 Feb .. Sunday 18 Feb) ...
    assert by_ref.query_interval == by_as_of.query_interval
    assert by_ref.query_interval[0] == datetime(2024, 2, 12, tzinfo=UTC)
    # ... but only as_of hides what was said after it.
    later = [m for m in by_ref.memories if m.unit.mentioned_at > ref]
    assert later
    assert all(m.unit.mentioned_at <= ref for m in by_as_of.memories)
    assert len(by_ref.memories) == len(by_as_of.memories) + len(later)


def test_include_chunks_returns_the_source_text(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    res = memory.recall("fx", "tortoise called Dumpling", include_chunks=True, max_chunk_tokens=400)
    assert res.chunks
    assert "Also, I adopted a tortoise called Dumpling." in res.chunks[0].text
    assert res.chunk_tokens <= 400


def test_type_and_tag_filters(memory, tmp_path):
    rows = [
        {
            "speaker": "Memlane",
            "text": "I booked the dentist for Ana.",
            "timestamp": "2025-01-02T10:00:00Z",
            "session_id": "s1",
        },
        {
            "speaker": "Ana",
            "text": "Thanks, the dentist is on Friday.",
            "timestamp": "2025-01-02T10:01:00Z",
            "session_id": "s1",
        },
    ]
    path = write_jsonl_fixture(tmp_path / "a.jsonl", rows)
    memory.create_bank("agent", name="Memlane")
    memory.retain_file("agent", path, tags=["health"])
    res = memory.recall("agent", "dentist", types=["experience"])
    assert [m.unit.text for m in res.memories] == ["Memlane: I booked the dentist for Ana."]
    assert all(m.unit.fact_type is FactType.experience for m in res.memories)
    assert len(memory.recall("agent", "dentist", tags=["health"]).memories) == 2
    assert memory.recall("agent", "dentist", tags=["work"]).memories == []


def test_invalidated_memory_is_hidden_now_but_answers_as_of(memory, tmp_path):
    rows = [
        {
            "speaker": "Ana",
            "text": "I drink my coffee black.",
            "timestamp": "2025-01-02T10:00:00Z",
            "session_id": "s1",
        },
        {
            "speaker": "Ana",
            "text": "These days I take oat milk in my coffee.",
            "timestamp": "2025-03-01T10:00:00Z",
            "session_id": "s2",
        },
    ]
    memory.retain_file("ana", write_jsonl_fixture(tmp_path / "a.jsonl", rows))
    old = next(m.unit for m in memory.recall("ana", "coffee").memories if "black" in m.unit.text)
    new = next(m.unit for m in memory.recall("ana", "coffee").memories if "oat" in m.unit.text)
    memory.forget.invalidate("ana", old.id, superseded_by=new.id, at=datetime(2025, 3, 1, 10, tzinfo=UTC))
    now = [m.unit.text for m in memory.recall("ana", "coffee").memories]
    assert now == ["Ana: These days I take oat milk in my coffee."]
    then = memory.recall("ana", "coffee", as_of=datetime(2025, 2, 1, tzinfo=UTC)).memories
    assert [m.unit.id for m in then] == [old.id]
    assert then[0].unit.superseded_by == new.id  # kept, never deleted


def test_delete_document_cascades_and_leaves_other_documents(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    before = memory.banks.stats("fx")
    counts = memory.forget.delete_document("fx", "fx-1")
    assert counts["units"] == len(_fixture_turns("fx-1"))
    assert counts["chunks"] >= 3
    units = [u for b in memory.store.iter_units("fx") for u in b]
    assert {u.document_id for u in units} == {"fx-2"}
    names = {e.name for e in memory.store.list_entities("fx")}
    assert "Noor" not in names and "Felix" not in names  # orphans removed
    assert {"Marta", "Olu"} <= names
    after = memory.banks.stats("fx")
    assert after["graph"]["units"] == before["graph"]["units"] - counts["units"]
    assert all(m.unit.document_id == "fx-2" for m in memory.recall("fx", "allotment").memories)


def test_graph_is_rebuilt_from_milvus_when_the_snapshot_is_gone(settings, embedder, extractor, tmp_path):
    path = write_locomo_fixture(tmp_path / "fx.json")
    with Memory(settings, embedder=embedder, extractor=extractor) as m:
        m.retain_file("fx", path)
        stats = m.banks.stats("fx")["graph"]
        expected = [x.unit.id for x in m.recall("fx", "glacier thesis").memories]
    for snap in settings.graph_dir.rglob("*"):
        if snap.is_file():
            snap.unlink()
    with Memory(settings, embedder=embedder, extractor=extractor) as m:
        assert m.banks.stats("fx")["graph"] == stats
        assert [x.unit.id for x in m.recall("fx", "glacier thesis").memories] == expected


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"query": "   "}, "query"),
        ({"query": "x", "max_tokens": 0}, "max_tokens"),
        ({"query": "x", "max_tokens": -5}, "max_tokens"),
        ({"query": "x", "budget": "huge"}, "budget"),
        ({"query": "x", "types": ["gossip"]}, "types"),
    ],
)
def test_bad_recall_requests_name_the_field(memory, kwargs, field):
    memory.create_bank("b")
    with pytest.raises(InvalidInput, match=field):
        memory.recall("b", **kwargs)


def test_unknown_bank_and_bad_bank_id(memory):
    with pytest.raises(BankNotFound, match="nope"):
        memory.recall("nope", "hello")
    with pytest.raises(InvalidInput, match="bank id"):
        memory.recall("../etc", "hello")


def test_disposition_out_of_range_is_rejected_and_nothing_changes(memory):
    memory.create_bank("b", background="I like tea.")
    with pytest.raises(InvalidInput, match="skepticism"):
        memory.create_bank("b", disposition={"skepticism": 9})
    with pytest.raises(InvalidInput, match="bias_strength"):
        memory.create_bank("b", disposition={"bias_strength": 1.5})
    bank = memory.banks.get("b")
    assert bank.disposition.skepticism == 3 and bank.background == "I like tea."


def test_bad_files_write_nothing(memory, tmp_path):
    from memlane.ingest import InputError

    good = {"speaker": "A", "text": "hello", "timestamp": "2025-01-01T00:00:00Z", "session_id": "s"}
    bad_time = write_jsonl_fixture(tmp_path / "t.jsonl", [good, {**good, "timestamp": "the day after"}])
    with pytest.raises(InputError, match="line 2.*timestamp"):
        memory.retain_file("b", bad_time)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"sample_id": "x", "conversation": ')
    with pytest.raises(InputError):
        memory.retain_file("b", broken)
    assert memory.banks.list_all() == []  # not even the bank was created


def test_delete_bank_removes_everything(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    memory.create_bank("other")
    memory.banks.delete("fx")
    assert [b.bank_id for b in memory.banks.list_all()] == ["other"]
    assert memory.store.count_units("fx") == 0
    assert memory.store.list_entities("fx") == []
    with pytest.raises(BankNotFound):
        memory.recall("fx", "allotment")
    with pytest.raises(BankNotFound):
        memory.banks.delete("fx")


def test_a_second_engine_sees_writes_through_the_revision_token(settings, embedder, extractor, tmp_path):
    rows = [
        {
            "speaker": "Ana",
            "text": "My cat is called Mochi.",
            "timestamp": "2025-01-02T10:00:00Z",
            "session_id": "s1",
        }
    ]
    more = [
        {
            "speaker": "Ana",
            "text": "I bought a kayak for the lake.",
            "timestamp": "2025-02-02T10:00:00Z",
            "session_id": "s2",
        }
    ]
    with (
        Memory(settings, embedder=embedder, extractor=extractor) as writer,
        Memory(settings, embedder=embedder, extractor=extractor) as reader,
    ):
        writer.retain_file("ana", write_jsonl_fixture(tmp_path / "a.jsonl", rows))
        assert [m.unit.text for m in reader.recall("ana", "kayak").memories] == [
            "Ana: My cat is called Mochi."
        ]
        writer.retain_file("ana", write_jsonl_fixture(tmp_path / "b.jsonl", more))
        top = reader.recall("ana", "kayak").memories[0].unit.text
        assert top == "Ana: I bought a kayak for the lake."
        writer.forget.delete_document("ana", "b")
        assert "kayak" not in " ".join(m.unit.text for m in reader.recall("ana", "kayak").memories)


def test_milvus_search_backend_gives_the_same_top_hits(tmp_path, embedder, extractor):
    from memlane.settings import Settings

    path = write_locomo_fixture(tmp_path / "fx.json")
    tops = {}
    for backend in ("memory", "milvus"):
        # The chunk prior needs chunk centroids, which only the in-process index keeps.
        # The fused order: the two backends' search, compared (the learned ranker reads features
        # only the in-process index keeps: each memory's vector and its BM25 parts).
        settings = Settings(
            data_dir=tmp_path / backend,
            store={"search_backend": backend},
            recall={"chunk_prior": 0.0, "ranker": "fused"},
        )
        with Memory(settings, embedder=embedder, extractor=extractor) as m:
            m.retain_file("fx", path)
            tops[backend] = [
                [x.unit.id for x in m.recall("fx", q).memories[:3]]
                for q in ("What pet did Noor adopt?", "Marta's choir festival", "glacier thesis")
            ]
    # The best hit is the same, and the next two share at least one: the in-process index
    # scores BM25 of a memory's text and of its context apart (recall.lexical_context_weight:
    # a reply no longer inherits its neighbour's words whole), Milvus one BM25 over both, so
    # near-ties below the first may swap in and out of the top three.
    assert [t[0] for t in tops["memory"]] == [t[0] for t in tops["milvus"]]
    assert all(len(set(a) & set(b)) >= 2 for a, b in zip(tops["memory"], tops["milvus"]))


def test_search_backends_agree_on_llm_end_only_units(tmp_path, embedder, extractor):
    """Units with an end and no start (the LLM extractor writes them for "finished X on ...")
    are [end, end] on both backends: the temporal channel finds the same units in the same
    order whether recall searches in process or on Milvus. In-process search used
    [mentioned_at, end], which for these units is reversed and matched nothing."""
    from datetime import datetime

    from memlane.records import MemoryUnit
    from memlane.settings import Settings

    def at(d: int, end: bool = False) -> datetime:
        return datetime(2024, 3, d, 23, 59, 59, tzinfo=UTC) if end else datetime(2024, 3, d, tzinfo=UTC)

    facts = [  # (id, text, occurred_start, occurred_end, mentioned_at)
        ("kayak", "Ana finished restoring the kayak.", None, at(10, True), at(20)),
        ("grant", "Ana submitted the grant proposal.", None, at(11, True), at(25)),
        ("thesis", "Ana handed in her thesis.", None, at(9, True), at(28)),
        ("plan", "Ana will finish the mural by the deadline.", None, at(12, True), at(2)),
        ("late", "Ana finished the marathon training.", None, at(27, True), at(29)),
        ("pottery", "Ana started a pottery class.", at(10), None, at(26)),
        ("trip", "Ana was in Porto for a conference.", at(8), at(11, True), at(21)),
        ("tea", "Ana likes green tea.", None, None, at(10)),
    ]
    vectors = embedder.embed([f[1] for f in facts])
    units = [
        MemoryUnit(
            id=i,
            bank_id="ana",
            text=t,
            occurred_start=s,
            occurred_end=e,
            mentioned_at=m,
            embedding=v.tolist(),
        )
        for (i, t, s, e, m), v in zip(facts, vectors)
    ]
    temporal, tops = {}, {}
    for backend in ("memory", "milvus"):
        settings = Settings(  # the fused order, as above
            data_dir=tmp_path / backend, store={"search_backend": backend}, recall={"ranker": "fused"}
        )
        with Memory(settings, embedder=embedder, extractor=extractor) as m:
            m.create_bank("ana")
            m.store.upsert_units("ana", units)
            m.store.bump_revision("ana")
            res = m.recall("ana", "What did Ana do on March 10, 2024?", channels=["temporal"], trace=True)
            ranked = sorted((x.trace["channels"]["temporal"]["rank"], x.unit.id) for x in res.memories)
            temporal[backend] = [uid for _, uid in ranked]
            tops[backend] = [x.unit.id for x in res.memories]
    assert temporal["memory"] == temporal["milvus"]
    assert tops["memory"] == tops["milvus"]
    # The channel searches March 10 plus a day and a half on each side (to Mar 12 noon).
    # Inside the day: kayak (end 23:59:59), pottery (start), tea (open: its mention), trip
    # (Mar 8-11), by the distance of their middles to the day's middle (ties by id); then
    # thesis (a second before the day) and grant (a day after). The plan ends Mar 12 23:59,
    # outside, though it was mentioned on Mar 2: its mention is not its occurrence.
    assert temporal["memory"] == ["kayak", "pottery", "tea", "trip", "thesis", "grant"]


def test_auto_created_bank_has_no_owner_so_no_experience(memory, tmp_path):
    rows = [
        {
            "speaker": "priya",
            "text": "I walked the dog.",
            "timestamp": "2025-01-02T10:00:00Z",
            "session_id": "s1",
        }
    ]
    memory.retain_file("priya", write_jsonl_fixture(tmp_path / "p.jsonl", rows))
    assert memory.banks.get("priya").name == ""
    assert [m.unit.fact_type for m in memory.recall("priya", "dog").memories] == [FactType.world]
