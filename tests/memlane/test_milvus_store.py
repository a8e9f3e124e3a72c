"""MilvusStore against real Milvus Lite (a file under tmp_path, and one `milvus-lite server`)
and against the local Milvus server (Milvus 2.3.5, started once per test session: tests/conftest.py):
every test that takes ``store`` runs on both backends and both layouts."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memlane.interfaces import UnitFilter, VectorStore
from memlane.records import (
    Bank,
    Chunk,
    Disposition,
    Entity,
    FactType,
    Link,
    LinkType,
    MemoryUnit,
    OpinionChange,
)
from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore, collection_names, escape_string, filter_expr, unit_from_fields

DIM = 8
# the server prefix it shares with the other modules of 8-dim stores (tests/conftest.py)
SERVER_COLLECTIONS = "dim-8"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def vec(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(DIM)
    return (v / np.linalg.norm(v)).tolist()


def unit(bank: str, uid: str, text: str | None = None, seed: int = 0, **kw) -> MemoryUnit:
    kw.setdefault("mentioned_at", day(0))
    return MemoryUnit(id=uid, bank_id=bank, text=text or f"memory {uid}", embedding=vec(seed), **kw)


def chunk(bank: str, cid: str, doc: str = "doc1", **kw) -> Chunk:
    return Chunk(
        chunk_id=cid,
        bank_id=bank,
        document_id=doc,
        session_id="s1",
        index=0,
        text=f"raw text of {cid}",
        started_at=day(0),
        **kw,
    )


@pytest.fixture(params=["per_bank", "partition_key"])
def layout(request) -> str:
    """Every store test runs on both tenant layouts (memlane/stores/milvus/layout.py)."""
    return request.param


@pytest.fixture
def store(backend_settings, backend, layout):
    s = MilvusStore(backend_settings(store={"layout": layout}), dim=DIM)
    assert s.layout.name == layout
    assert s.is_lite == (backend == "lite")
    yield s
    s.close()


def lite_only(store) -> None:
    if not store.is_lite:
        pytest.skip("Milvus Lite's own behaviour (its file lock, its flushes)")


def ids_of(hits) -> list[str]:
    return [h.id for h in hits]


# --------------------------------------------------------------------------- round trips
def test_implements_protocol(store):
    assert isinstance(store, VectorStore)


def test_unit_round_trip_every_field(store):
    full = MemoryUnit(
        id="u-1",
        bank_id="b1",
        text="Alice moved to Paris in May",
        fact_type=FactType.opinion,
        embedding=vec(1),
        occurred_start=datetime(2023, 5, 1, 8, 30, 15, 123456, UTC),
        occurred_end=datetime(2023, 5, 31, tzinfo=UTC),
        mentioned_at=datetime(2023, 6, 2, 10, 0, 0, 999999, UTC),
        confidence=0.7,
        document_id="doc-9",
        chunk_id="doc-9#3",
        source_turns=["t1", "t2"],
        entity_ids=["e:alice", "e:paris"],
        tags=["travel", "europe"],
        links=[
            Link(target_id="u-0", type=LinkType.causes, weight=0.25),
            Link(target_id="u-2", type=LinkType.semantic, weight=0.8),
        ],
        proof_count=4,
        source_fact_ids=["u-0"],
        history=[
            OpinionChange(at=day(3), confidence=0.6, reason="first", evidence_id="u-0"),
            OpinionChange(at=day(4), confidence=0.7),
        ],
        valid_from=day(1),
        invalid_at=day(400),
        superseded_by="u-9",
        metadata={"speaker": "bob", "nested": {"n": [1, 2.5, None, True]}},
    )
    plain = unit("b1", "u-2", seed=2)  # defaults everywhere: None times, no confidence
    store.upsert_units("b1", [full, plain])

    got = store.get_units("b1", ["u-2", "missing", "u-1"])
    assert [u.id for u in got] == ["u-2", "u-1"]  # order asked, unknown skipped
    assert got[1] == full.model_copy(update={"embedding": None})
    assert got[0] == plain.model_copy(update={"embedding": None})
    assert got[0].confidence is None and got[0].occurred_start is None

    with_vec = store.get_units("b1", ["u-1"], with_embedding=True)[0]
    assert np.allclose(with_vec.embedding, full.embedding, atol=1e-6)
    assert with_vec.model_copy(update={"embedding": None}) == full.model_copy(update={"embedding": None})


def test_hit_fields_and_unit_from_fields(store):
    u = unit(
        "b1",
        "u1",
        seed=1,
        occurred_start=day(2),
        confidence=0.5,
        tags=["x"],
        links=[Link(target_id="u0", type=LinkType.temporal, weight=0.5)],
        metadata={"a": 1},
    )
    store.upsert_units("b1", [u])
    hit = store.search_dense("b1", np.asarray([u.embedding]), 1)[0][0]
    f = hit.fields
    assert "embedding" not in f and "sparse" not in f and "t_start" not in f
    assert f["mentioned_at"] == int(day(0).timestamp())
    assert f["occurred_start"] == int(day(2).timestamp())
    assert f["occurred_end"] is None and f["invalid_at"] is None  # sentinels hidden
    assert f["confidence"] == 0.5
    assert f["links"] == [{"target_id": "u0", "type": "temporal", "weight": 0.5}]
    rebuilt = unit_from_fields("b1", hit.id, f)
    assert rebuilt == u.model_copy(update={"embedding": None})


def test_chunks_entities_banks_round_trip(store):
    ch = chunk("b1", "c1", turn_ids=["t1", "t2"], tags=["x"])
    ch2 = chunk("b1", "c2", doc="doc2")
    store.upsert_chunks("b1", [ch, ch2])
    assert store.get_chunks("b1", ["c2", "nope", "c1"]) == [ch2, ch]

    e1 = Entity(
        entity_id="e1",
        bank_id="b1",
        name="Alice",
        type="PERSON",
        aliases=["Al", "Ally"],
        mention_count=3,
        first_seen=day(1),
        last_seen=datetime(2024, 3, 1, 1, 2, 3, 456789, UTC),
    )
    e0 = Entity(entity_id="e0", bank_id="b1", name="Paris")
    store.upsert_entities("b1", [e1, e0])
    assert store.list_entities("b1") == [e0, e1]

    bank = Bank(
        bank_id="b2",
        name="Bob's bank",
        background='I am Bob.\nI like "quotes".',
        disposition=Disposition(skepticism=5, literalism=1, empathy=2, bias_strength=0.9),
    )
    store.upsert_bank(bank)
    assert store.get_bank("b2") == bank
    assert store.get_bank("unknown") is None
    # b1 was registered with a default profile by its first write
    assert [b.bank_id for b in store.list_banks()] == ["b1", "b2"]
    assert store.list_banks()[1] == bank


def test_upsert_is_idempotent_and_replaces(store):
    units = [unit("b1", f"u{i}", seed=i) for i in range(3)]
    chunks = [chunk("b1", "c1"), chunk("b1", "c2")]
    ents = [Entity(entity_id="e1", bank_id="b1", name="A")]
    for _ in range(2):
        store.upsert_units("b1", units)
        store.upsert_chunks("b1", chunks)
        store.upsert_entities("b1", ents)
        store.upsert_bank(Bank(bank_id="b1"))
    assert store.count_units("b1") == 3
    assert store.count_chunks("b1") == 2
    assert len(store.list_entities("b1")) == 1
    assert len(store.list_banks()) == 1
    # duplicates inside one call: the last copy wins, stored once
    store.upsert_units("b1", [unit("b1", "u9", "first words"), unit("b1", "u9", "zanzibar")])
    assert store.count_units("b1") == 4
    # a rewrite replaces text and its BM25 terms
    bm25 = store.capabilities.bm25  # Milvus 2.3 has none (test_bm25_ranks_rare_word_first)
    assert not bm25 or ids_of(store.search_lexical("b1", "zanzibar", 5)) == ["u9"]
    store.upsert_units("b1", [unit("b1", "u9", "quokka")])
    assert [u.text for u in store.get_units("b1", ["u9"])] == ["quokka"]
    assert not bm25 or store.search_lexical("b1", "zanzibar", 5) == []
    assert not bm25 or ids_of(store.search_lexical("b1", "quokka", 5)) == ["u9"]


def test_update_without_embedding_keeps_stored_vector(store):
    store.upsert_units("b1", [unit("b1", "u1", seed=5)])
    u = store.get_units("b1", ["u1"])[0]
    assert u.embedding is None
    u.invalid_at, u.superseded_by = day(9), "u2"
    store.upsert_units("b1", [u])
    back = store.get_units("b1", ["u1"], with_embedding=True)[0]
    assert back.invalid_at == day(9) and back.superseded_by == "u2"
    assert np.allclose(back.embedding, vec(5), atol=1e-6)
    new = MemoryUnit(id="u3", bank_id="b1", text="no vector", mentioned_at=day(0))
    with pytest.raises(ValueError, match="no embedding"):
        store.upsert_units("b1", [new])
    assert store.count_units("b1") == 1


def test_reopen_sees_everything(backend_settings, backend, layout):
    settings = backend_settings(store={"layout": layout})
    s1 = MilvusStore(settings, dim=DIM)
    s1.upsert_units("b1", [unit("b1", "u1", "persistent kiwi fact", seed=1)])
    s1.upsert_chunks("b1", [chunk("b1", "c1")])
    s1.close()
    s2 = MilvusStore(settings, dim=DIM)  # cold start: collections come back released
    try:
        assert s2.count_units("b1") == 1 and s2.count_chunks("b1") == 1
        if s2.capabilities.bm25:
            assert ids_of(s2.search_lexical("b1", "kiwi", 3)) == ["u1"]
        assert ids_of(s2.search_dense("b1", np.asarray([vec(1)]), 1)[0]) == ["u1"]
    finally:
        s2.close()
    with pytest.raises(ValueError, match="dim"):
        s3 = MilvusStore(settings, dim=DIM + 1)
        try:
            s3.count_units("b1")
        finally:
            s3.close()


LOCKED_CHILD = """
import sys
from memlane.settings import Settings
from memlane.errors import StoreUnavailable
from memlane.stores.milvus import MilvusStore
try:
    MilvusStore(Settings(data_dir=sys.argv[1]), dim=8)
except StoreUnavailable as exc:
    print("REFUSED:", exc)
else:
    print("OPENED")
"""


def test_second_process_gets_a_clear_error(store):
    lite_only(store)
    out = subprocess.run(
        [sys.executable, "-c", LOCKED_CHILD, str(store.settings.data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "REFUSED:" in out, out[-2000:]
    # it says why and what to do instead
    assert "opened by one process at a time" in out and "memlane serve" in out, out[-2000:]


# --------------------------------------------------------------------------- search
def test_dense_search_ranks_nearest_first(store):
    units = [unit("b1", f"u{i}", seed=100 + i) for i in range(30)]
    store.upsert_units("b1", units)
    rng = np.random.default_rng(7)
    targets = [4, 17, 29]
    queries = np.asarray(
        [np.asarray(vec(100 + t)) + rng.normal(0, 0.02, DIM) for t in targets], dtype=np.float32
    )
    res = store.search_dense("b1", queries, 5)
    assert len(res) == 3
    for t, hits in zip(targets, res):
        assert len(hits) == 5
        assert hits[0].id == f"u{t}"
        assert hits[0].score > 0.95
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
    # a 1-d vector is a batch of one
    assert store.search_dense("b1", np.asarray(vec(104)), 1)[0][0].id == "u4"
    assert store.search_dense("b1", np.zeros((0, DIM), dtype=np.float32), 5) == []


def test_bm25_ranks_rare_word_first(store):
    common = "the team met on monday to talk about the weekly plan"
    units = [unit("b1", f"u{i}", f"{common} item {i}", seed=i) for i in range(12)]
    units.append(unit("b1", "rare", f"{common} with a xylophone solo", seed=99))
    store.upsert_units("b1", units)
    if not store.capabilities.bm25:  # Milvus 2.3: the lexical channel is the in-process index's
        from memlane.stores.milvus.capabilities import CapabilityError

        with pytest.raises(CapabilityError, match=r"BM25 function .* this server is Milvus v2\.3\.5"):
            store.search_lexical("b1", "xylophone plan", 5)
        return
    hits = store.search_lexical("b1", "xylophone plan", 5)
    assert hits[0].id == "rare"
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score > hits[1].score
    assert store.search_lexical("b1", "   ", 5) == []
    assert store.search_lexical("b1", "nonexistentword", 5) == []


def test_time_search_overlap(store):
    units = [
        unit("b1", "jan1-10", occurred_start=day(0), occurred_end=day(9), mentioned_at=day(30)),
        unit("b1", "jan20-25", occurred_start=day(19), occurred_end=day(24), mentioned_at=day(30)),
        unit("b1", "mention-jan5", mentioned_at=day(4)),  # no occurrence: mention time
        unit("b1", "start-feb1", occurred_start=day(31), mentioned_at=day(40)),  # one end only
    ]
    store.upsert_units("b1", units)

    def found(a, b, limit=10):
        hits = store.search_time("b1", day(a), day(b), limit)
        assert all(h.score == 0.0 for h in hits)
        return set(ids_of(hits))

    assert found(7, 20) == {"jan1-10", "jan20-25"}
    assert found(3.5, 4.5) == {"jan1-10", "mention-jan5"}
    assert found(9, 9) == {"jan1-10"}  # touching the end counts as overlap
    assert found(10, 18) == set()
    assert found(31, 31) == {"start-feb1"}
    assert found(26, 30.5) == set()  # mentioned_at does not stand in when occurrence is set
    # over the limit: the interval middles nearest the query's middle (day 20) are kept:
    # jan20-25 (middle day 21.5), start-feb1 (31), jan1-10 (4.5), mention-jan5 (4)
    hits = store.search_time("b1", day(0), day(40), 2)
    assert ids_of(hits) == ["jan20-25", "start-feb1"]
    assert hits[0].fields["occurred_start"] == int(day(19).timestamp())
    with pytest.raises(ValueError, match="after"):
        store.search_time("b1", day(2), day(1), 5)


# --------------------------------------------------------------------------- filters
@pytest.fixture
def filtered(store):
    store.upsert_units(
        "b1",
        [
            unit("b1", "w", seed=1, fact_type="world", tags=["x"], document_id="d1", mentioned_at=day(0)),
            unit(
                "b1",
                "o",
                seed=2,
                fact_type="opinion",
                tags=["x", "y"],
                document_id="d2",
                mentioned_at=day(1),
                invalid_at=day(9),
                superseded_by="n",
            ),
            unit(
                "b1",
                "n",
                seed=3,
                fact_type="opinion",
                tags=["y"],
                document_id="d2",
                mentioned_at=day(9),
                valid_from=day(9),
            ),
            unit("b1", "e", seed=4, fact_type="experience", document_id="d1", mentioned_at=day(2)),
        ],
    )
    q = np.asarray([vec(1)], dtype=np.float32)

    def run(flt):
        dense = set(ids_of(store.search_dense("b1", q, 50, flt)[0]))
        timed = set(ids_of(store.search_time("b1", day(-10), day(100), 50, flt)))
        assert dense == timed  # both channels apply the same filter
        return dense

    return run


def test_filter_fact_types_and_validity(filtered):
    assert filtered(None) == {"w", "o", "n", "e"}  # no filter: invalidated units included
    assert filtered(UnitFilter()) == {"w", "n", "e"}  # only_valid by default
    assert filtered(UnitFilter(fact_types=[FactType.opinion])) == {"n"}
    assert filtered(UnitFilter(fact_types=[FactType.opinion], only_valid=False)) == {"o", "n"}
    assert filtered(UnitFilter(fact_types=[FactType.world, FactType.experience])) == {"w", "e"}
    assert filtered(UnitFilter(fact_types=[])) == {"w", "n", "e"}  # empty: no restriction


def test_filter_tags_any_all(filtered):
    assert filtered(UnitFilter(tags=["x", "y"], only_valid=False)) == {"w", "o", "n"}
    assert filtered(UnitFilter(tags=["x", "y"], tags_match="all", only_valid=False)) == {"o"}
    assert filtered(UnitFilter(tags=["y"], tags_match="all")) == {"n"}
    with pytest.raises(ValueError, match="tags_match"):
        filtered(UnitFilter(tags=["x"], tags_match="some"))


def test_filter_document_and_as_of(filtered):
    assert filtered(UnitFilter(document_id="d1")) == {"w", "e"}
    assert filtered(UnitFilter(document_id="d2", only_valid=False)) == {"o", "n"}
    # on day 5, "o" was still valid and "n" not yet mentioned
    assert filtered(UnitFilter(as_of=day(5))) == {"w", "o", "e"}
    # from day 9 on, "n" superseded "o" (invalid_at is exclusive)
    assert filtered(UnitFilter(as_of=day(9))) == {"w", "n", "e"}
    assert filtered(UnitFilter(as_of=day(1.5))) == {"w", "o"}
    assert filtered(UnitFilter(as_of=day(5), fact_types=[FactType.opinion])) == {"o"}


def test_filter_values_cannot_inject(filtered):
    assert filtered(UnitFilter(document_id='d1" or document_id != "')) == set()
    assert filtered(UnitFilter(tags=['x"]) or (1 == 1', "y\\"])) == set()
    expr = filter_expr(UnitFilter(document_id='a"b\\c\nd', only_valid=False))
    assert expr == '(document_id == "a\\"b\\\\c\\nd")'
    assert escape_string('say "hi"') == '"say \\"hi\\""'


def test_odd_values_round_trip_and_filter(store):
    odd = 'it\'s "odd" \\ doc\tid'
    u = unit("b1", "u\"1'\\", seed=1, document_id=odd, tags=['t"ag', "x\\y"])
    store.upsert_units("b1", [u, unit("b1", "plain", seed=2)])
    assert store.get_units("b1", [u.id]) == [u.model_copy(update={"embedding": None})]
    q = np.asarray([vec(1)])
    assert ids_of(store.search_dense("b1", q, 5, UnitFilter(document_id=odd))[0]) == [u.id]
    assert ids_of(store.search_dense("b1", q, 5, UnitFilter(tags=['t"ag']))[0]) == [u.id]
    assert store.delete_units("b1", [u.id]) == 1
    assert store.count_units("b1") == 1


# --------------------------------------------------------------------------- deletion
def test_delete_document_cascade(store):
    a1 = unit("b1", "a1", seed=1, document_id="A")
    a2 = unit("b1", "a2", seed=2, document_id="A")
    b1 = unit(
        "b1",
        "b1u",
        seed=3,
        document_id="B",
        links=[
            Link(target_id="a1", type=LinkType.semantic, weight=0.9),
            Link(target_id="x", type=LinkType.causes, weight=0.5),
        ],
    )
    store.upsert_units("b1", [a1, a2, b1])
    store.upsert_chunks("b1", [chunk("b1", "ca", doc="A"), chunk("b1", "cb", doc="B")])
    store.upsert_units("b2", [unit("b2", "a1", seed=1, document_id="A")])
    store.upsert_chunks("b2", [chunk("b2", "ca", doc="A")])

    assert store.delete_document("b1", "A") == {"units": 2, "chunks": 1}
    assert store.count_units("b1") == 1 and store.count_chunks("b1") == 1
    assert store.get_units("b1", ["a1", "a2"]) == []
    assert store.get_chunks("b1", ["ca", "cb"])[0].chunk_id == "cb"
    left = store.get_units("b1", ["b1u"], with_embedding=True)[0]
    assert [link.target_id for link in left.links] == ["x"]  # the dangling link is gone
    assert np.allclose(left.embedding, vec(3), atol=1e-6)
    # the other bank is untouched
    assert store.count_units("b2") == 1 and store.count_chunks("b2") == 1
    assert store.delete_document("b1", "A") == {"units": 0, "chunks": 0}
    assert store.delete_document("nobank", "A") == {"units": 0, "chunks": 0}


def test_delete_bank_cascade(store):
    for b in ("b1", "b2"):
        store.upsert_units(b, [unit(b, f"u{i}", f"lemur fact {i}", seed=i) for i in range(3)])
        store.upsert_chunks(b, [chunk(b, "c1")])
        store.upsert_entities(b, [Entity(entity_id="e1", bank_id=b, name="E")])
    store.delete_bank("b1")
    assert store.get_bank("b1") is None
    assert store.count_units("b1") == 0 and store.count_chunks("b1") == 0
    assert store.list_entities("b1") == []
    assert not store.capabilities.bm25 or store.search_lexical("b1", "lemur", 5) == []
    assert store.search_dense("b1", np.asarray([vec(0)]), 5) == [[]]
    assert [b.bank_id for b in store.list_banks()] == ["b2"]
    store.delete_bank("never-existed")  # no-op
    assert store.count_units("b2") == 3 and store.count_chunks("b2") == 1
    assert len(store.list_entities("b2")) == 1
    assert not store.capabilities.bm25 or len(store.search_lexical("b2", "lemur", 5)) == 3
    # the bank can be used again after deletion
    store.upsert_units("b1", [unit("b1", "new", seed=9)])
    assert store.count_units("b1") == 1


def test_delete_units_and_entities_count_existing(store):
    store.upsert_units("b1", [unit("b1", f"u{i}", seed=i) for i in range(3)])
    store.upsert_entities("b1", [Entity(entity_id=f"e{i}", bank_id="b1", name="E") for i in range(3)])
    assert store.delete_units("b1", ["u0", "u0", "ghost"]) == 1
    assert store.count_units("b1") == 2
    assert store.delete_entities("b1", ["e1", "ghost"]) == 1
    assert [e.entity_id for e in store.list_entities("b1")] == ["e0", "e2"]


def test_unknown_bank_reads_are_empty(store):
    assert store.search_dense("nobank", np.asarray([vec(0)]), 5) == [[]]
    assert not store.capabilities.bm25 or store.search_lexical("nobank", "anything", 5) == []
    assert store.search_time("nobank", day(0), day(1), 5) == []
    assert store.count_units("nobank") == 0 and store.count_chunks("nobank") == 0
    assert store.get_units("nobank", ["u1"]) == [] and store.get_chunks("nobank", ["c"]) == []
    assert store.list_entities("nobank") == [] and list(store.iter_units("nobank")) == []
    assert store.delete_units("nobank", ["u1"]) == 0
    assert store.get_bank("nobank") is None and store.list_banks() == []


# --------------------------------------------------------------------------- naming, errors
def test_odd_bank_ids_are_separate(store):
    banks = ["A.b-c_1", "a_b_c_1", "A_b_c_1", "x" * 128]
    names = [collection_names("memlane", b) for b in banks]
    flat = [n for d in names for n in d.values()]
    assert len(set(flat)) == len(flat)
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,254}", n) for n in flat)
    assert collection_names("memlane", banks[0]) == names[0]  # deterministic
    for i, b in enumerate(banks):
        store.upsert_units(b, [unit(b, f"u{j}", seed=j) for j in range(i + 1)])
    assert [store.count_units(b) for b in banks] == [1, 2, 3, 4]
    assert sorted(b.bank_id for b in store.list_banks()) == sorted(banks)
    with pytest.raises(ValueError, match="invalid bank id"):
        store.count_units("../etc")
    with pytest.raises(ValueError, match="invalid bank id"):
        collection_names("memlane", "-bad")


def test_bad_inputs_raise_clear_errors(store):
    bad = MemoryUnit(id="u1", bank_id="b1", text="t", embedding=[0.1] * (DIM - 1), mentioned_at=day(0))
    with pytest.raises(ValueError, match=f"dim is {DIM}"):
        store.upsert_units("b1", [bad])
    nan = MemoryUnit(id="u1", bank_id="b1", text="t", embedding=[float("nan")] * DIM, mentioned_at=day(0))
    with pytest.raises(ValueError, match="NaN"):
        store.upsert_units("b1", [nan])
    with pytest.raises(ValueError, match="belongs to bank"):
        store.upsert_units("b2", [unit("b1", "u1")])
    with pytest.raises(ValueError, match=r"shape \(n, 8\)"):
        store.search_dense("b1", np.ones((2, DIM + 1)), 5)
    with pytest.raises(ValueError, match="limit"):
        store.search_dense("b1", np.ones((1, DIM)), -1)
    with pytest.raises(ValueError, match="limit"):
        store.search_lexical("b1", "x", 20_000)
    with pytest.raises(ValueError, match="bytes"):
        store.upsert_units("b1", [unit("b1", "big", "x" * 70_000)])
    with pytest.raises(ValueError, match="JSON"):
        store.upsert_units("b1", [unit("b1", "m", metadata={"when": day(0)})])
    with pytest.raises(ValueError, match="collection_prefix"):
        MilvusStore(
            Settings(data_dir=store.settings.data_dir, store={"collection_prefix": "bad-prefix"}), dim=DIM
        )
    # nothing was written by the failed calls
    assert store.count_units("b1") == 0 and store.count_units("b2") == 0


def test_iter_units_pages(store):
    units = [unit("b1", f"u{i:02d}", seed=i) for i in range(23)]
    store.upsert_units("b1", units)
    pages = list(store.iter_units("b1", batch_size=5))
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    flat = [u.id for p in pages for u in p]
    assert flat == sorted(u.id for u in units)
    assert all(u.embedding is None for p in pages for u in p)
    pages = list(store.iter_units("b1", batch_size=10, with_embedding=True))
    got = {u.id: u for p in pages for u in p}
    assert np.allclose(got["u07"].embedding, units[7].embedding, atol=1e-6)
    with pytest.raises(ValueError, match="batch_size"):
        list(store.iter_units("b1", batch_size=0))


# --------------------------------------------------------------------------- concurrency
def test_concurrent_reads_and_writes(store):
    store.upsert_units("b1", [unit("b1", f"seed{i}", f"otter fact {i}", seed=i) for i in range(20)])
    errors: list[BaseException] = []

    def reader(k: int) -> None:
        try:
            for _ in range(8):
                assert len(store.search_dense("b1", np.asarray([vec(k)]), 5)[0]) == 5
                assert not store.capabilities.bm25 or len(store.search_lexical("b1", "otter", 5)) == 5
                assert len(store.get_units("b1", ["seed1", "seed2"])) == 2
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def writer(k: int) -> None:
        try:
            for j in range(5):
                store.upsert_units("b1", [unit("b1", f"w{k}-{j}-{i}", seed=i) for i in range(4)])
                store.upsert_chunks("b1", [chunk("b1", f"c{k}-{j}")])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    threads += [threading.Thread(target=writer, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors[:3]
    assert store.count_units("b1") == 20 + 2 * 5 * 4
    assert store.count_chunks("b1") == 2 * 5


# --------------------------------------------------------------------------- server mode
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_milvus_lite_server_mode(tmp_path, layout):
    exe = shutil.which("milvus-lite") or str(Path(sys.executable).parent / "milvus-lite")
    if not Path(exe).exists():
        pytest.skip("the milvus-lite console script is not installed")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "server", "--data-dir", str(tmp_path / "server"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                    pytest.fail(f"milvus-lite server did not start: {err[-500:]}")
                time.sleep(0.2)
        settings = Settings(
            data_dir=tmp_path / "client", store={"milvus_uri": f"http://127.0.0.1:{port}", "layout": layout}
        )
        store = MilvusStore(settings, dim=DIM)
        other = None
        try:
            assert store.is_lite
            store.upsert_bank(Bank(bank_id="srv", name="server bank"))
            store.upsert_units(
                "srv",
                [
                    unit("srv", "u1", "the narwhal surfaced", seed=1),
                    unit("srv", "u2", "a quiet afternoon", seed=2),
                ],
            )
            assert store.get_bank("srv").name == "server bank"
            assert store.count_units("srv") == 2
            hits = store.search_lexical("srv", "narwhal", 2)
            assert ids_of(hits) == ["u1"] and hits[0].score > 0
            assert store.search_dense("srv", np.asarray([vec(2)]), 1)[0][0].id == "u2"
            # a second client (as another process would be) sees the data ...
            other = MilvusStore(settings, dim=DIM)
            assert other.get_units("srv", ["u2"])[0].text == "a quiet afternoon"
            # ... and when it deletes the bank, the first client's cached collections are
            # noticed as gone: reads come back empty, writes recreate them
            other.delete_bank("srv")
            assert store.search_lexical("srv", "narwhal", 2) == []
            assert store.count_units("srv") == 0
            store.upsert_units("srv", [unit("srv", "u3", "back again", seed=3)])
            assert other.count_units("srv") == 1
            assert [b.bank_id for b in other.list_banks()] == ["srv"]
        finally:
            store.close()
            if other is not None:
                other.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_deferred_flushes_flush_each_written_collection_once_at_the_end(store):
    from memlane.stores.milvus.observe import add_observer, remove_observer

    flushes: list[int] = []

    def observe(operation: str, seconds: float, ok: bool, rows: int) -> None:
        if operation == "flush" and threading.current_thread() is me:
            flushes.append(1)

    lite_only(store)
    me = threading.current_thread()
    store.upsert_units("ana", [unit("ana", "u0")])  # the bank's collections exist first
    add_observer(observe)
    try:
        with store.deferred_flushes():
            for i in range(3):
                store.upsert_units("ana", [unit("ana", f"u{i + 1}", seed=i)])
            store.upsert_chunks("ana", [chunk("ana", "c1"), chunk("ana", "c2")])
            store.upsert_chunks("ana", [chunk("ana", "c3")])
            assert flushes == []  # nothing flushed inside the block
            # unflushed rows are read (Strong consistency): only searches get slower
            assert store.count_units("ana") == 4
        # the units once (searched); the chunks, which no search reads, wait for more writes
        assert len(flushes) == 1
        flushes.clear()
        store.upsert_units("ana", [unit("ana", "u9")])  # outside a block: flushed at once
        assert len(flushes) == 1
    finally:
        remove_observer(observe)


def test_a_collection_no_search_reads_is_flushed_once_every_so_many_writes(store):
    from memlane.stores.milvus.collections import UNSEARCHED_FLUSH_WRITES as N
    from memlane.stores.milvus.observe import add_observer, remove_observer

    flushes: list[int] = []

    def observe(operation: str, seconds: float, ok: bool, rows: int) -> None:
        if operation == "flush" and threading.current_thread() is me:
            flushes.append(1)

    lite_only(store)
    me = threading.current_thread()
    store.upsert_chunks("ana", [chunk("ana", "c0")])  # the bank's collections exist first
    add_observer(observe)
    try:
        for i in range(2 * N):
            store.upsert_chunks("ana", [chunk("ana", f"c{i + 1}")])
        assert len(flushes) == 2  # 2N writes: one flush per N, wherever the count began
        store.delete_chunks("ana", ["c1"])  # a deletion counts as a write too
        for i in range(N - 1):
            again = chunk("ana", f"c{i + 1}").model_copy(update={"text": f"again {i}"})
            store.upsert_chunks("ana", [again])
        assert len(flushes) == 3
    finally:
        remove_observer(observe)
    # every row reads back, flushed or not, the deleted one written again included
    got = {c.chunk_id: c.text for c in store.document_chunks("ana", "doc1")}
    assert len(got) == 2 * N + 1
    assert got["c1"] == "again 0" and got[f"c{N - 1}"] == f"again {N - 2}"
    assert got[f"c{N}"] == f"raw text of c{N}"


def test_the_client_does_not_ping_an_idle_lite_server(tmp_path):
    """pymilvus's own keepalive (a ping every 10 s, also between calls) makes Milvus Lite's
    server answer GOAWAY "too_many_pings", printed by gRPC on stderr of any process that waits
    a minute between calls (measured: 3 lines over 100 s idle with the defaults, none with
    these). A 100-s idle test costs CI too much, so the options the channel is made with are
    checked here."""
    from memlane.stores.milvus.connection import open_client, release_lite

    client, lite, _ = open_client(Settings(data_dir=tmp_path / "data"))
    try:
        options = client._get_connection()._grpc_options
        assert options["grpc.keepalive_permit_without_calls"] is False
        assert options["grpc.keepalive_time_ms"] >= 300_000  # gRPC servers' default policy: 5 min
    finally:
        client.close()
        release_lite(lite)
