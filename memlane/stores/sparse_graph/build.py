"""Deriving a bank's canonical graph (the CSR matrix and its edge blocks) from its records."""

from __future__ import annotations

from itertools import chain

import numpy as np
import scipy.sparse as sp

from memlane.stores.sparse_graph.records import (
    CAUSAL,
    SEMANTIC,
    Names,
    UnitRecord,
    View,
)


def build_view(
    units: dict[str, UnitRecord],
    names: Names,
    n_unit_slots: int,
    n_ent_slots: int,
    version: int,
    sigma_s: float,
    k: int,
) -> View:
    """Derive the canonical graph of a node set: vectorised apart from one pass per field over
    the records. Measured (3 entities, 3.1 links per unit, k=2): 20 ms at 10k units, 0.3 s at
    100k (810k edges)."""
    ids = list(units)
    recs = list(units.values())
    n = len(ids)
    ts = np.fromiter((r.ts for r in recs), np.float64, n)
    # Canonical order (timestamp, id): rank ids with Python's C-level sort (code-point order, as
    # str comparison), then one numeric lexsort.
    id_rank = np.empty(n, np.int64)
    id_rank[sorted(range(n), key=ids.__getitem__)] = np.arange(n)
    order = np.lexsort((id_rank, ts))
    srecs = list(map(recs.__getitem__, order.tolist()))
    ts = ts[order]
    arange = np.arange(n, dtype=np.int64)
    unit_slots = np.fromiter((r.slot for r in srecs), np.int64, n)
    vertex_of_unit_slot = np.full(n_unit_slots, -1, np.int64)
    vertex_of_unit_slot[unit_slots] = arange

    # Temporal: pairs at most k places apart in time order.
    t_a, t_b, t_w = [], [], []
    for d in range(1, min(k, n - 1) + 1):
        t_a.append(arange[: n - d])
        t_b.append(arange[d:])
        t_w.append(np.exp(-(ts[d:] - ts[: n - d]) / sigma_s))
    temporal = concat_block(t_a, t_b, t_w)

    # Entity: bipartite unit <-> entity; entity vertices numbered in entity-id order.
    ent_counts = np.fromiter((len(r.entities) for r in srecs), np.int64, n)
    ent_flat = np.fromiter(chain.from_iterable(r.entities for r in srecs), np.int64, int(ent_counts.sum()))
    present = np.unique(ent_flat)
    present_names = [names.ent_names[s] for s in present.tolist()]
    if present.size:
        ent_slots = present[sorted(range(present.size), key=present_names.__getitem__)]
    else:
        ent_slots = present
    vertex_of_ent_slot = np.full(n_ent_slots, -1, np.int64)
    vertex_of_ent_slot[ent_slots] = n + np.arange(ent_slots.size)
    entity = (np.repeat(arange, ent_counts), vertex_of_ent_slot[ent_flat], np.ones(ent_flat.size))

    # Semantic and causal: declared links whose target is present, one edge per pair and family.
    l_counts = np.fromiter((len(r.link_targets) for r in srecs), np.int64, n)
    total = int(l_counts.sum())
    src = np.repeat(arange, l_counts)
    tgt_slots = np.fromiter(chain.from_iterable(r.link_targets for r in srecs), np.int64, total)
    tgt = vertex_of_unit_slot[tgt_slots]
    fam = np.fromiter(chain.from_iterable(r.link_families for r in srecs), np.int64, total)
    w = np.fromiter(chain.from_iterable(r.link_weights for r in srecs), np.float64, total)
    keep = tgt >= 0  # pending: target not in the bank (yet)
    a = np.minimum(src[keep], tgt[keep])
    b = np.maximum(src[keep], tgt[keep])
    # One int64 key per (family, a, b) (exact below ~1.5e9 units): one argsort of it measured
    # 20 ms at 300k links against 80 ms for a four-key lexsort.
    key = (fam[keep] * n + a) * n + b
    o = np.argsort(key, kind="stable")
    key, w = key[o], w[keep][o]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
    w = np.maximum.reduceat(w, starts) if key.size else w  # the heaviest declaration wins
    key = key[starts]
    fam, rest = np.divmod(key, n * n) if n else (key, key)
    a, b = np.divmod(rest, n) if n else (rest, rest)
    sem, cau = fam == SEMANTIC, fam == CAUSAL
    semantic = (a[sem], b[sem], w[sem])
    causal = (a[cau], b[cau], w[cau])

    blocks = (entity, temporal, semantic, causal)  # EDGE_TYPES order
    size = n + ent_slots.size
    rows = np.concatenate([x[0] for x in blocks] + [x[1] for x in blocks])
    cols = np.concatenate([x[1] for x in blocks] + [x[0] for x in blocks])
    data = np.concatenate([x[2] for x in blocks] * 2)
    # Duplicates (a pair both temporal and semantic, say) are summed: spreading runs over all types.
    # The input order is canonical, so the sums are bit-identical across insertion orders.
    adj = sp.csr_matrix((data, (rows, cols)), shape=(size, size))
    adj.sum_duplicates()
    deg = np.asarray(adj.sum(axis=1)).ravel()
    inv_deg = np.zeros(size)
    np.divide(1.0, deg, out=inv_deg, where=deg > 0)
    return View(version, names, unit_slots, ent_slots, vertex_of_unit_slot, adj, inv_deg, blocks)


def concat_block(a: list, b: list, w: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not a:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(a), np.concatenate(b), np.concatenate(w)
