"""The in-process bank index against hand-computed BM25, cosine and filter cases."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlane.interfaces import UnitFilter
from memlane.recall.index import BankIndex
from memlane.records import FactType, MemoryUnit

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def unit(uid, text, vec, *, days=0, fact_type=FactType.world, tags=(), invalid=None, doc="d", chunk=None):
    v = np.asarray(vec, dtype=np.float32)
    return MemoryUnit(
        id=uid,
        bank_id="b",
        text=text,
        embedding=(v / np.linalg.norm(v)).tolist(),
        mentioned_at=T0 + timedelta(days=days),
        fact_type=fact_type,
        tags=list(tags),
        invalid_at=invalid,
        document_id=doc,
        chunk_id=chunk or f"chunk-{uid}",
    )


def test_bm25_matches_the_formula():
    idx = BankIndex(2)
    idx.upsert(
        [
            unit("a", "apple banana", [1, 0]),
            unit("b", "apple apple cherry", [0, 1]),
            unit("c", "durian", [1, 1]),
        ]
    )
    hits = idx.search_lexical("apples", 10)
    # N=3, df(appl)=2, dl: a=2, b=3, c=1, avgdl=2
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    score_a = idf * 1 * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / 2))
    score_b = idf * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 3 / 2))
    assert [h.id for h in hits] == ["b", "a"]
    assert hits[0].score == pytest.approx(score_b)
    assert hits[1].score == pytest.approx(score_a)
    assert idx.search_lexical("what did you", 10) == []


def test_dense_ranks_by_cosine_and_respects_limit():
    idx = BankIndex(2)
    idx.upsert([unit("a", "x", [1, 0]), unit("b", "y", [0.6, 0.8]), unit("c", "z", [0, 1])])
    hits = idx.search_dense(np.array([1, 0], dtype=np.float32), 2)
    assert [h.id for h in hits] == ["a", "b"]
    assert [h.score for h in hits] == pytest.approx([1.0, 0.6])


def test_chunk_prior_adds_the_similarity_to_the_chunk_centroid():
    idx = BankIndex(2)
    # "b" alone is far from the query, but its chunk ("a" and "b") is about it; "c" is a
    # chunk of its own, a little closer to the query than "b".
    idx.upsert(
        [
            unit("a", "x", [1, 0], chunk="k1"),
            unit("b", "y", [0, 1], chunk="k1"),
            unit("c", "z", [0.2, 1], chunk="k2"),
        ]
    )
    q = np.array([1, 0], dtype=np.float32)
    assert [h.id for h in idx.search_dense(q, 3)] == ["a", "c", "b"]
    hits = idx.search_dense(q, 3, chunk_prior=0.5)
    centroid_k1 = np.array([1, 1]) / math.sqrt(2)
    c = np.array([0.2, 1]) / np.linalg.norm([0.2, 1])
    assert [h.id for h in hits] == ["a", "b", "c"]
    assert [h.score for h in hits] == pytest.approx(
        [1 + 0.5 * centroid_k1[0], 0 + 0.5 * centroid_k1[0], c[0] + 0.5 * c[0]], abs=1e-6
    )
    # A write changes the centroids: with "a" gone, "b"'s chunk is "b" alone.
    idx.remove(["a"])
    assert [h.id for h in idx.search_dense(q, 3, chunk_prior=0.5)] == ["c", "b"]


def test_upsert_replaces_and_remove_forgets():
    idx = BankIndex(2)
    idx.upsert([unit("a", "old words", [1, 0]), unit("b", "other", [0, 1])])
    idx.upsert([unit("a", "new words", [0, 1])])
    assert len(idx) == 2
    assert idx.search_lexical("old", 5) == []
    assert [h.id for h in idx.search_lexical("new", 5)] == ["a"]
    assert idx.search_dense(np.array([0, 1], dtype=np.float32), 1)[0].score == pytest.approx(1.0)
    idx.remove(["a"])
    assert len(idx) == 1
    assert [h.id for h in idx.search_dense(np.array([0, 1], dtype=np.float32), 5)] == ["b"]


def test_compaction_ranks_like_a_fresh_index_of_the_survivors():
    units = [unit(f"u{i}", f"word{i % 7} common " + "pad " * (i % 5), [1, i]) for i in range(1500)]
    idx = BankIndex(2)
    idx.upsert(units)
    idx.remove([u.id for i, u in enumerate(units) if i % 3])  # 1000 of 1500 gone: compacts
    fresh = BankIndex(2)
    fresh.upsert([u for i, u in enumerate(units) if i % 3 == 0])
    assert len(idx) == len(fresh) == 500
    for q in ("word3", "common pad", "word6 pad"):
        got, want = idx.search_lexical(q, 30), fresh.search_lexical(q, 30)
        assert [h.id for h in got] == [h.id for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want])
    q = np.array([1, 40], dtype=np.float32)
    assert [h.id for h in idx.search_dense(q, 10)] == [h.id for h in fresh.search_dense(q, 10)]


def test_filters_types_tags_validity_and_document():
    idx = BankIndex(2)
    idx.upsert(
        [
            unit("w", "tea", [1, 0], tags=["a"]),
            unit("e", "tea", [1, 0], fact_type=FactType.experience, tags=["a", "b"], doc="x"),
            unit("gone", "tea", [1, 0], invalid=T0 + timedelta(days=5)),
            unit("late", "tea", [1, 0], days=10),
        ]
    )
    ids = lambda flt: sorted(h.id for h in idx.search_lexical("tea", 10, flt))  # noqa: E731
    assert ids(None) == ["e", "gone", "late", "w"]
    assert ids(UnitFilter()) == ["e", "late", "w"]
    assert ids(UnitFilter(fact_types=[FactType.experience])) == ["e"]
    assert ids(UnitFilter(tags=["b", "z"])) == ["e"]
    assert ids(UnitFilter(tags=["a", "b"], tags_match="all")) == ["e"]
    assert ids(UnitFilter(document_id="x")) == ["e"]
    assert ids(UnitFilter(as_of=T0 + timedelta(days=2))) == ["e", "gone", "w"]


def test_time_search_overlap_and_candidates():
    idx = BankIndex(2)
    idx.upsert(
        [unit("jan1", "a", [1, 0]), unit("jan20", "b", [1, 0], days=19), unit("mar", "c", [1, 0], days=60)]
    )
    start = (T0 + timedelta(days=15)).timestamp()
    end = (T0 + timedelta(days=25)).timestamp()
    hits = idx.search_time(start, end, 10)
    assert [h.id for h in hits] == ["jan20"]
    assert hits[0].fields["mentioned_at"] == int((T0 + timedelta(days=19)).timestamp())
    cands = idx.candidates(["mar", "nope", "jan1"], None)
    assert set(cands) == {"mar", "jan1"} and cands["mar"]["text"] == "c"
