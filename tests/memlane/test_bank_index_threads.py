"""A bank index's searches run side by side (issue 38, item 4): the lexical search does not
wait for a dense one, a write waits for the searches in flight and they never see half of it,
and searches that need the HNSW graphs start one build between them."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from memlane.recall import dense as dense_module
from memlane.recall.index import BankIndex
from tests.memlane.test_ann_index import DIM, clustered, make_units

WAIT = 10.0


def _hold_exact_search(monkeypatch, idx: BankIndex) -> tuple[threading.Event, threading.Event]:
    """Make the index's exact dense search signal ``inside`` and wait for ``release``."""
    inside, release = threading.Event(), threading.Event()
    exact = idx.dense.exact

    def slow_exact(*args, **kwargs):
        inside.set()
        assert release.wait(WAIT)
        return exact(*args, **kwargs)

    monkeypatch.setattr(idx.dense, "exact", slow_exact)
    return inside, release


def test_lexical_search_runs_while_a_dense_search_is_in_flight(monkeypatch):
    idx = BankIndex(DIM)
    idx.upsert(make_units(clustered(300)))
    inside, release = _hold_exact_search(monkeypatch, idx)
    with ThreadPoolExecutor(2) as pool:
        dense = pool.submit(idx.search_dense, clustered(1, seed=5)[0], 5)
        assert inside.wait(WAIT)
        # The dense search holds its read; the lexical and time searches share it.
        lexical = pool.submit(idx.search_lexical, "apple river", 5)
        assert lexical.result(timeout=WAIT)
        assert not dense.done()
        release.set()
        assert len(dense.result(timeout=WAIT)) == 5


def test_a_write_waits_for_the_searches_in_flight(monkeypatch):
    idx = BankIndex(DIM)
    units = make_units(clustered(300))
    idx.upsert(units[:200])
    inside, release = _hold_exact_search(monkeypatch, idx)
    with ThreadPoolExecutor(2) as pool:
        dense = pool.submit(idx.search_dense, clustered(1, seed=5)[0], 300)
        assert inside.wait(WAIT)
        write = pool.submit(idx.upsert, units[200:])
        assert not write.done()  # held back by the search
        release.set()
        assert len(dense.result(timeout=WAIT)) == 200  # the search saw none of the write
        write.result(timeout=WAIT)
    assert len(idx) == 300


def test_searches_beside_writes_see_whole_writes():
    """Searches of every kind on threads while another thread writes batches of 10 (upserts,
    replacements, removals) through the graph path: no error, every search sees a whole
    number of batches, and the end state ranks as a fresh index of the same units."""
    units = make_units(clustered(1500, seed=2))
    idx = BankIndex(DIM, ann_threshold=1000)  # the graph builds in the background meanwhile
    idx.upsert(units[:1000])
    queries = clustered(20, seed=6)
    stop = threading.Event()
    errors: list[BaseException] = []
    seen: list[int] = []

    def search(k: int) -> None:
        try:
            while not stop.is_set():
                q = queries[k % len(queries)]
                hits = idx.search_dense(q, 20, chunk_prior=0.5)
                assert len(hits) == 20 and len({h.id for h in hits}) == 20
                idx.search_lexical("apple garden", 20)
                idx.search_time(0.0, 2e9, 20)
                seen.append(len(idx.unit_ids()) % 10)
                k += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=search, args=(k,), daemon=True) for k in range(3)]
    for t in threads:
        t.start()
    for lo in range(1000, 1500, 10):
        idx.upsert([*units[lo : lo + 10], units[lo - 500]])  # 10 new, 1 replaced
        idx.remove([u.id for u in units[lo - 400 : lo - 390]])
        idx.upsert(units[lo - 400 : lo - 390])  # back again
    stop.set()
    for t in threads:
        t.join(WAIT)
    assert not errors, errors[0]
    assert seen and set(seen) == {0}  # never half a batch
    fresh = BankIndex(DIM)
    fresh.upsert(units)
    for q in queries[:5]:
        got = {h.id for h in idx.search_dense(q, 10)}
        want = {h.id for h in fresh.search_dense(q, 10)}
        assert len(got & want) >= 9


def test_searches_that_need_the_graphs_build_them_once(monkeypatch):
    """``ann_background=False``: the first search builds the graphs (its read released, the
    graphs published under the write lock); the searches beside it answer exactly meanwhile,
    and nobody builds twice."""
    idx = BankIndex(DIM, ann_threshold=1000, ann_background=False)
    builds: list[int] = []
    build = dense_module.AnnGraphs.build

    def counted(dim, vectors, *args, **kwargs):
        # Only builds over this index's rows count: a background build of an earlier test's
        # index (a daemon thread) may still reach the patched method.
        if np.shares_memory(vectors, idx.rows.vec):
            builds.append(1)
        return build(dim, vectors, *args, **kwargs)

    monkeypatch.setattr(dense_module.AnnGraphs, "build", counted)
    idx.upsert(make_units(clustered(2000)))
    qs = clustered(8, seed=3)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda q: idx.search_dense(q, 10, chunk_prior=0.5), qs))
    assert all(len(r) == 10 for r in results)
    assert idx.ann_active and len(builds) == 1
    exact = BankIndex(DIM)
    exact.upsert(make_units(clustered(2000)))
    agree = [
        len({h.id for h in idx.search_dense(q, 10)} & {h.id for h in exact.search_dense(q, 10)}) / 10
        for q in qs
    ]
    assert np.mean(agree) >= 0.95
