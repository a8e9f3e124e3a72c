"""Big banks: the HNSW path of BankIndex's dense search against the exact search of the same
index (seeded clustered vectors above the threshold), filters, deletes and replacements,
switching at the threshold, and bulk load against row-by-row upsert."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlane.interfaces import UnitFilter
from memlane.recall.index import BankIndex
from memlane.records import FactType, MemoryUnit

T0 = datetime(2025, 1, 1, tzinfo=UTC)
DIM = 32
N = 3000
WORDS = ["apple", "river", "violin", "garden", "marathon", "pottery", "bakery", "museum"]


def clustered(n: int, seed: int = 1) -> np.ndarray:
    """Unit vectors around 40 centres (real embeddings have neighbourhoods; random ones do not)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM))
    x = centres[rng.integers(0, 40, n)] + 0.5 * rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_units(vecs: np.ndarray, prefix: str = "u") -> list[MemoryUnit]:
    return [
        MemoryUnit(
            id=f"{prefix}{i}",
            bank_id="b",
            text=f"{WORDS[i % 8]} {WORDS[(i // 8) % 8]} note {i}",
            embedding=v.tolist(),
            mentioned_at=T0 + timedelta(hours=i),
            fact_type=FactType.experience if i % 5 == 0 else FactType.world,
            tags=["even"] if i % 2 == 0 else ["odd"],
            document_id=f"d{i % 3}",
            chunk_id=f"c{i // 8}",
        )
        for i, v in enumerate(vecs)
    ]


def ann_and_exact(units: list[MemoryUnit]) -> tuple[BankIndex, BankIndex]:
    ann = BankIndex(DIM, ann_threshold=1000, ann_background=False)
    exact = BankIndex(DIM)  # default threshold: far above N
    ann.upsert(units)
    exact.upsert(units)
    return ann, exact


def overlap(a, b) -> float:
    return len({h.id for h in a} & {h.id for h in b}) / max(1, len(b))


@pytest.fixture(scope="module")
def data():
    return make_units(clustered(N)), clustered(50, seed=9)


def test_ann_agrees_with_exact_above_threshold(data):
    units, queries = data
    ann, exact = ann_and_exact(units)
    scores = []
    for q in queries:
        got, want = ann.search_dense(q, 50, chunk_prior=0.5), exact.search_dense(q, 50, chunk_prior=0.5)
        assert ann.ann_active and not exact.ann_active
        scores.append(overlap(got, want))
        # Re-scored exactly: a hit found by both has the same score.
        want_scores = {h.id: h.score for h in want}
        for h in got:
            if h.id in want_scores:
                assert h.score == pytest.approx(want_scores[h.id], abs=1e-5)
    assert np.mean(scores) >= 0.99


def test_chunk_prior_hits_are_found_through_their_chunk(data):
    units, queries = data
    ann, exact = ann_and_exact(units)
    q = queries[0]
    # A heavy prior ranks by chunk centroid: units far from the query itself come first.
    want = exact.search_dense(q, 40, chunk_prior=4.0)
    got = ann.search_dense(q, 40, chunk_prior=4.0)
    assert overlap(got, want) >= 0.95


def test_filters_oversample_and_fall_back_to_exact(data):
    units, queries = data
    ann, exact = ann_and_exact(units)
    for flt in (
        UnitFilter(tags=["even"]),  # half the rows: through the graph
        UnitFilter(fact_types=[FactType.experience]),  # a fifth
        UnitFilter(document_id="d1", tags=["even"]),  # a sixth
        UnitFilter(mentioned_until=T0 + timedelta(hours=40)),  # 40 rows: exact over them
    ):
        for q in queries[:10]:
            got, want = ann.search_dense(q, 30, flt), exact.search_dense(q, 30, flt)
            assert len(got) == len(want)
            assert overlap(got, want) >= 0.9, flt
            ids = {h.id for h in got}
            assert ids <= set(exact.candidates(list(ids), flt))


def test_deletes_and_replacements_stay_in_step(data):
    units, queries = data
    ann, exact = ann_and_exact(units)
    q = queries[3]
    ann.search_dense(q, 10)
    assert ann.ann_active
    top = [h.id for h in ann.search_dense(q, 10)]
    ann.remove(top[:5])
    exact.remove(top[:5])
    got = ann.search_dense(q, 10)
    assert not {h.id for h in got} & set(top[:5])
    assert overlap(got, exact.search_dense(q, 10)) >= 0.9
    # A replacement that moves a unit onto the query itself: found first, once.
    moved = units[1234].model_copy(update={"embedding": (q / np.linalg.norm(q)).tolist()})
    ann.upsert([moved])
    exact.upsert([moved])
    got = ann.search_dense(q, 10)
    assert got[0].id == moved.id and [h.id for h in got].count(moved.id) == 1
    assert got[0].score == pytest.approx(exact.search_dense(q, 1)[0].score, abs=1e-5)
    # New units are found through the graph.
    new = make_units(clustered(5, seed=4), prefix="new")
    ann.upsert(new)
    hit = ann.search_dense(np.asarray(new[2].embedding), 1)
    assert hit[0].id == "new2"


def test_many_deletes_rebuild_and_stay_correct(data):
    units, queries = data
    ann, exact = ann_and_exact(units)
    ann.search_dense(queries[0], 10)
    gone = [u.id for u in units[: N // 3]]
    ann.remove(gone)
    exact.remove(gone)
    ann.upsert(units[:10])  # a write after the deletes: too many dead rows, the graph goes
    exact.upsert(units[:10])
    assert len(ann) == len(exact) == N - N // 3 + 10
    for q in queries[:10]:
        assert overlap(ann.search_dense(q, 20), exact.search_dense(q, 20)) >= 0.95
    assert ann.ann_active  # rebuilt over the live rows by the search


def test_threshold_switches_between_exact_and_graph(data):
    units, queries = data
    idx = BankIndex(DIM, ann_threshold=len(units) + 1, ann_background=False)
    idx.upsert(units)
    idx.search_dense(queries[0], 5)
    assert not idx.ann_active
    extra = make_units(clustered(1, seed=7), prefix="x")
    idx.upsert(extra)
    idx.search_dense(queries[0], 5)
    assert idx.ann_active
    idx.remove(["x0"])
    exact = BankIndex(DIM)
    exact.upsert(units)
    assert [h.id for h in idx.search_dense(queries[1], 10)] == [
        h.id for h in exact.search_dense(queries[1], 10)
    ]


def test_background_build_answers_exactly_meanwhile(data):
    units, queries = data
    idx = BankIndex(DIM, ann_threshold=1000)
    idx.upsert(units)
    exact = BankIndex(DIM)
    exact.upsert(units)
    first = idx.search_dense(queries[0], 10)  # starts the build; exact until it lands
    assert overlap(first, exact.search_dense(queries[0], 10)) >= 0.9
    for _ in range(200):
        if idx.ann_active:
            break
        import time

        time.sleep(0.05)
    assert idx.ann_active


def test_bad_threshold_is_refused():
    with pytest.raises(ValueError, match="ann_threshold"):
        BankIndex(DIM, ann_threshold=0)


def _state(idx: BankIndex) -> tuple:
    rows, lexical = idx.rows, idx.lexical
    n = rows.n
    return (
        rows.ids,
        rows.pos,
        rows.vec[:n].tolist(),
        {k: np.nan_to_num(c[:n], nan=-1.0).tolist() for k, c in rows.cols.items()},
        rows.fields,
        rows.tags,
        rows.docs,
        lexical.terms,
        {t: (list(p), list(f)) for t, (p, f) in lexical.postings.items()},
        dict(+lexical.df),
        rows.alive_n,
        rows.alive_len,
    )


def test_bulk_load_equals_row_by_row_upsert():
    units = make_units(clustered(500, seed=3))
    bulk, rows = BankIndex(DIM), BankIndex(DIM)
    bulk.bulk_load(units[:300])
    bulk.upsert(units[200:500])  # >= BULK_MIN: the bulk path, replacing 100
    for u in units[:300]:
        rows.upsert([u])
    for lo in range(200, 500, 10):
        rows.upsert(units[lo : lo + 10])  # < BULK_MIN: row by row
    assert _state(bulk) == _state(rows)
    q = clustered(1, seed=8)[0]
    assert bulk.search_dense(q, 20) == rows.search_dense(q, 20)
    assert bulk.search_lexical("apple river", 20) == rows.search_lexical("apple river", 20)


def test_compaction_leaves_the_state_of_a_fresh_index_of_the_survivors():
    units = make_units(clustered(1200, seed=4))
    idx = BankIndex(DIM)
    idx.upsert(units)
    idx.remove([u.id for i, u in enumerate(units) if i % 3])  # 800 of 1200 gone: compacts
    fresh = BankIndex(DIM)
    fresh.upsert([u for i, u in enumerate(units) if i % 3 == 0])
    assert idx.rows.n == 400
    assert _state(idx) == _state(fresh)
    q = clustered(1, seed=9)[0]
    assert idx.search_dense(q, 20, chunk_prior=0.5) == fresh.search_dense(q, 20, chunk_prior=0.5)


def test_bulk_load_refuses_units_without_embeddings():
    units = make_units(clustered(3))
    units[1] = units[1].model_copy(update={"embedding": None})
    idx = BankIndex(DIM)
    with pytest.raises(ValueError, match="u1"):
        idx.bulk_load(units)
    assert len(idx) == 0


def test_the_setting_defaults_to_the_index_default(monkeypatch):
    from memlane.recall.index import DEFAULT_ANN_THRESHOLD
    from memlane.settings import Settings

    assert Settings().recall.ann_threshold == DEFAULT_ANN_THRESHOLD
    monkeypatch.setenv("MEMLANE_RECALL__ANN_THRESHOLD", "5000")
    assert Settings().recall.ann_threshold == 5000


def test_rows_hold_the_unit_fields():
    from memlane.units import CANDIDATE_FIELDS, unit_fields

    units = make_units(clustered(70, seed=5))
    units[3] = units[3].model_copy(
        update={"occurred_start": datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC), "invalid_at": T0}
    )
    idx = BankIndex(DIM)
    idx.bulk_load(units)
    got = idx.candidates([u.id for u in units])
    assert got == {u.id: unit_fields(u, CANDIDATE_FIELDS) for u in units}


def prior_only_bank(n_mates: int = 7) -> tuple[list[MemoryUnit], np.ndarray, str]:
    """The clustered units, plus a chunk ``cP`` whose mates lie on a query direction and one
    unit (``lone``) orthogonal to it: ``lone`` ranks high only through its chunk's centroid."""
    units = make_units(clustered(N))
    rng = np.random.default_rng(11)
    q = rng.standard_normal(DIM).astype(np.float32)
    q /= np.linalg.norm(q)
    lone = rng.standard_normal(DIM).astype(np.float32)
    lone -= (lone @ q) * q  # orthogonal to the query: its own similarity is 0
    lone /= np.linalg.norm(lone)
    mates = q + 0.05 * rng.standard_normal((n_mates, DIM)).astype(np.float32)
    mates /= np.linalg.norm(mates, axis=1, keepdims=True)
    extra = make_units(np.vstack([mates, lone[None, :]]), prefix="p")
    for u in extra:
        u.chunk_id = "cP"
    return units + extra, q, extra[-1].id


def test_graph_path_finds_a_unit_raised_only_by_its_chunk():
    """The chunk prior through the chunk graph (no product over every centroid): a unit whose
    own similarity is 0, below thousands of others, is found through its chunk, with the
    exact search's ranking and scores."""
    units, q, lone = prior_only_bank()
    ann, exact = ann_and_exact(units)
    got = ann.search_dense(q, 10, chunk_prior=1.0)
    assert ann.ann_active
    want = exact.search_dense(q, 10, chunk_prior=1.0)
    assert lone in {h.id for h in want}
    assert [h.id for h in got] == [h.id for h in want]
    assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    # ... and not because the unit graph offered it: only its chunk did.
    assert ann._ann is not None
    assert ann.rows.pos[lone] not in set(ann._ann.units.search(q, 200, 256).tolist())


def test_chunks_written_after_the_graph_are_found_through_it():
    """A chunk written after the graphs were built (and a chunk that gains a row) reaches the
    chunk graph at the next search."""
    units, q, lone = prior_only_bank()
    head = [u for u in units if u.chunk_id != "cP"]
    tail = [u for u in units if u.chunk_id == "cP"]
    ann, exact = ann_and_exact(head)
    ann.search_dense(q, 10, chunk_prior=1.0)  # builds the graphs without cP
    assert ann.ann_active
    ann.upsert(tail[:4])  # cP: a new chunk, half its mates
    exact.upsert(tail[:4])
    ann.search_dense(q, 10, chunk_prior=1.0)
    ann.upsert(tail[4:])  # cP gains the rest, the lone unit among them
    exact.upsert(tail[4:])
    got, want = ann.search_dense(q, 10, chunk_prior=1.0), exact.search_dense(q, 10, chunk_prior=1.0)
    assert lone in {h.id for h in got}
    assert [h.id for h in got] == [h.id for h in want]


def test_the_exact_path_is_unchanged_below_the_threshold():
    """Below the threshold no graph is built, chunk graph included."""
    units, q, lone = prior_only_bank()
    idx = BankIndex(DIM, ann_background=False)
    idx.upsert(units)
    got = idx.search_dense(q, 10, chunk_prior=1.0)
    assert not idx.ann_active and idx._ann is None
    assert lone in {h.id for h in got}
