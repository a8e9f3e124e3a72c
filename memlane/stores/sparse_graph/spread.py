"""Spreading activation over a bank's built graph view (memlane/stores/sparse_graph/store.py
documents the algorithm and its cost): the hops, sparse while they touch few vertices, and the
best-``limit`` cut."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from memlane.stores.sparse_graph.records import GATHER_MAX_FRACTION, SPARSE_HOP_FACTOR, View

#: The best-``limit`` cut over a dense hop's scores looks first at a sample of about this many
#: times ``limit`` of them: the sample's limit-th best is a floor under the cut, so only the
#: units at or above it are selected among (at 1M units ~490k positive scores were partitioned).
CUT_SAMPLE = 64


def _gather_rows(adj: sp.csr_matrix, idx: np.ndarray, out: np.ndarray) -> npt.NDArray[np.float64]:
    """What the active vertices ``idx`` (passing ``out`` per unit weight) send along their
    rows, summed per target vertex: the active rows taken out (in C) and multiplied
    transposed, so each target's terms are summed from 0 in the order of ``idx``, as
    np.bincount over the concatenated rows summed them (the same bits). At 1M units hop 2
    starts from ~60 vertices (the seeds' entities and neighbours) and reaches ~500k entries
    through the speaker hubs: building the position, target and weight arrays and counting
    them took 7.6-8.4 ms p50 of a spread, this 5.2-5.7 (the same lists)."""
    return np.asarray(adj[idx].T @ out, dtype=np.float64)


def _add_sparse(
    at: np.ndarray, val: np.ndarray, hit: np.ndarray, add: np.ndarray
) -> tuple[np.ndarray, npt.NDArray[np.float64]]:
    """The sparse sum (``at`` sorted, ``val``) plus the hop's ``add`` at ``hit`` (sorted):
    each vertex's earlier sum plus this hop's, as the dense total adds them."""
    if at.size == 0:
        return hit, add.copy()
    union = np.union1d(at, hit)
    acc = np.zeros(union.size)
    acc[np.searchsorted(union, at)] += val
    acc[np.searchsorted(union, hit)] += add
    return union, acc


def _positive_candidates(scores: np.ndarray, limit: int) -> np.ndarray:
    """Units (indices of ``scores``) with a positive score that may be among the best
    ``limit``: every one at least the ``limit``-th best of an evenly spaced sample of the
    scores, when the sample holds that many positive ones (any ``limit`` scores bound the
    ``limit``-th best from below, so the best ``limit`` and their ties are all kept)."""
    stride = scores.size // (CUT_SAMPLE * limit)
    if stride > 1:
        sample = scores[::stride]
        sample = sample[sample > 0]
        if sample.size >= limit:
            floor = -np.partition(-sample, limit - 1)[limit - 1]
            return np.flatnonzero(scores >= floor)
    return np.flatnonzero(scores > 0)


def _best(cand: np.ndarray, s: np.ndarray, limit: int, view: View) -> list[tuple[str, float]]:
    """The best ``limit`` of the units ``cand`` scored ``s``, best first, ties in vertex (time)
    order, as ``[(unit_id, score)]``."""
    if cand.size > limit:
        # The limit-th best score; everything scoring at least that is kept, so ties at the
        # cut are resolved by the deterministic sort below, not by the selection algorithm.
        # (Partitioning the negated scores at limit-1 measured 0.2 ms at 100k units, the
        # mirror-image partition at size-limit 1.8 ms: the hub makes most scores near-equal.)
        neg = -s
        kth = np.partition(neg, limit - 1)[limit - 1]
        keep = neg <= kth
        cand, s = cand[keep], s[keep]
    order = np.lexsort((cand, -s))[:limit]
    unit_names, slots = view.names.unit_names, view.unit_slots
    return [(unit_names[slots[i]], v) for i, v in zip(cand[order].tolist(), s[order].tolist())]


def spread(
    view: View, seeds: dict[str, float], *, hops: int, decay: float, limit: int
) -> list[tuple[str, float]]:
    """:meth:`SparseGraphStore.spread` over ``view`` (``hops`` >= 1, ``limit`` >= 1, ``decay``
    > 0, ``seeds`` not empty)."""
    n_units = view.n_units
    seed_idx: list[int] = []
    seed_act: list[float] = []
    for uid, given in seeds.items():
        i = view.vertex(uid)
        if i < 0:
            continue
        a = float(given)
        seed_idx.append(i)
        seed_act.append(a if math.isfinite(a) and a > 0 else 0.0)
    if not seed_idx:
        return []

    adj, inv_deg = view.adj, view.inv_deg
    indptr, indices, data = adj.indptr, adj.indices, adj.data
    size = adj.shape[0]
    gather_max = GATHER_MAX_FRACTION * adj.nnz
    # The sum of the hops so far: sparse (sorted vertices, their sums) until a hop spreads
    # over many vertices, then dense. The first dense hop's array becomes the total, the
    # sparse sums added to it: a + b == b + a in floating point, so the scores are the
    # bits the dense total always gave, without a zeroed pass and an addition over every
    # vertex (hop 2 at 1M units reaches ~490k of them through the speaker hubs).
    total: npt.NDArray[np.float64] | None = None
    sparse_at = np.zeros(0, np.int64)
    sparse_val = np.zeros(0)
    idx = np.asarray(seed_idx, np.int64)
    out = np.asarray(seed_act) * inv_deg[idx]  # what each active vertex passes per unit weight
    live = out > 0
    idx, out = idx[live], out[live]
    act: npt.NDArray[np.float64]
    for step in range(hops):
        if idx.size == 0:
            break
        starts = indptr[idx]
        lens = indptr[idx + 1] - starts
        work = int(lens.sum())
        if work <= gather_max:
            # Only the active rows: with 10 seeds hop 1 touches ~100 entries, not the matrix.
            if work * SPARSE_HOP_FACTOR < size:
                # Few entries: the hop's activation stays sparse (at `hit`, sorted), the
                # same sums in the same order as the dense hop, without its five passes
                # over every vertex (benchmarks/spread_hops.py at 1M units: a spread's p50
                # 9.7-10.0 ms against 17.4-18.1, the same lists).
                pos = np.arange(work) + np.repeat(starts - (np.cumsum(lens) - lens), lens)
                targets, weights = indices[pos], data[pos] * np.repeat(out, lens)
                hit, inv = np.unique(targets, return_inverse=True)
                val: npt.NDArray[np.float64] = np.bincount(inv, weights=weights)  # type: ignore[assignment]
                val *= decay
                if total is not None:
                    total[hit] += val
                else:
                    sparse_at, sparse_val = _add_sparse(sparse_at, sparse_val, hit, val)
                if step == hops - 1:
                    break
                nxt_hit = val * inv_deg[hit]
                live = nxt_hit != 0
                idx, out = hit[live], nxt_hit[live]
                continue
            act = _gather_rows(adj, idx, out)
        else:
            y = np.zeros(size)
            y[idx] = out
            act = adj @ y  # the matrix is symmetric, so a @ A == A @ a
        act *= decay
        last = step == hops - 1
        if not last:
            nxt = act * inv_deg
        if total is None:
            total = act
            total[sparse_at] += sparse_val
        else:
            total += act
        if last:
            break
        idx = np.flatnonzero(nxt)
        out = nxt[idx]

    if total is None:  # every hop sparse: the scores at the vertices reached
        units = sparse_at < n_units  # units only: entity vertices come after them
        reached, reached_val = sparse_at[units], sparse_val[units]
        keep = ~np.isin(reached, seed_idx) & (reached_val > 0)
        return _best(reached[keep], reached_val[keep], limit, view)
    scores = total[:n_units]  # units only: entity vertices come after them
    scores[seed_idx] = 0.0
    cand = _positive_candidates(scores, limit)
    return _best(cand, scores[cand], limit, view)
