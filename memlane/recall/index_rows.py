"""The rows of a bank index (memlane/recall/index.py): each unit's vector, the scalar columns
the filters and time search read, and its fields for recall, by row number.

Rows are append-only: a replaced or removed unit's row is marked dead (the ``alive`` column)
and stays until :meth:`IndexRows.compact` renumbers the live ones. The bank index writes under
its write lock and reads under a shared one: the reads (masks, top, fields) change nothing
and cache nothing, so searches side by side need no more.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Sequence

import numpy as np

from memlane.facts.families import FAMILIES
from memlane.interfaces import Hit, UnitFilter
from memlane.records import FactType, MemoryUnit, UnitSlots
from memlane.units import (
    CANDIDATE_FIELDS,
    FACT_CODES,
    TIME_FIELDS,
    effective_interval,
    filter_mask,
    nan_if_none,
    unit_fields,
)

#: A row of stored slot signals (memlane.records.UnitSlots): the gate, then the best score per
#: family; kept as one float array beside the fields: 88 bytes a row, against ~890 for a UnitSlots
#: per unit (tracemalloc, 10,000 parsed from their stored JSON).
SLOT_WIDTH = 1 + len(FAMILIES)

#: The scalar columns, one float per row (NaN for a missing time).
COLUMNS = (
    "alive",
    "mentioned",
    "valid_from",
    "invalid",
    "occ_start",
    "occ_end",
    "t_start",
    "t_end",
    "ftype",
    "dl",
    "dlc",
)
_ENTITIES = CANDIDATE_FIELDS.index("entity_ids")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_PLAIN = tuple(k for k in CANDIDATE_FIELDS if k not in TIME_FIELDS)


def _ts(dt: datetime | None) -> float:
    return nan_if_none(None if dt is None else dt.timestamp())


def _secs(dt: datetime | None) -> int | None:
    """memlane.units.to_s without its round trip through microseconds (the same floor of an
    exact timedelta): to_s was half of building a row, ~0.5 s of a 10k-unit load profiled."""
    if dt is None:
        return None
    return ((dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)) - _EPOCH) // _SECOND


def _fields(unit: MemoryUnit) -> tuple:
    """A unit's CANDIDATE_FIELDS values, as unit_fields gives them (its bank id interned: one
    string for the bank)."""
    plain = unit_fields(unit, _PLAIN)
    plain["bank_id"] = sys.intern(plain["bank_id"])
    return tuple(_secs(getattr(unit, k)) if k in TIME_FIELDS else plain[k] for k in CANDIDATE_FIELDS)


class IndexRows:
    """Vectors, columns and fields of a bank's units by row number, and the live count."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        #: Bumped by every write, so what is derived from the rows (chunk centroids) knows
        #: when it is stale.
        self.version = 0
        self.clear()

    def clear(self) -> None:
        """Drop every row."""
        self.version += 1
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.vec = np.zeros((0, self.dim), dtype=np.float32)
        self.cols = {c: np.zeros(0) for c in COLUMNS}
        self.docs: list[str] = []
        # Each unit's fields, so recall returns memories without a store round trip (the
        # fetch was 12 ms of a 35 ms recall at 1k units on Milvus Lite): the values of
        # CANDIDATE_FIELDS as a tuple (a dict a unit cost ~460 bytes more), made a dict for
        # the few ids a recall asks for (the engine benchmark's rss_bytes_per_memory).
        self.fields: list[tuple] = []
        self.tags: list[frozenset[str]] = []
        # Each row's stored slot signals and the weights they name ("": none stored).
        self.slot_vals = np.zeros((0, SLOT_WIDTH))
        self.slot_weights: list[str] = []
        self.n = 0  # rows used (alive or dead)
        self.alive_n = 0
        # The live rows' token counts of text and of context (BM25's average field lengths).
        self.alive_len = 0.0
        self.alive_ctx_len = 0.0

    def append(self, units: Sequence[MemoryUnit], lengths: Sequence[tuple[int, int]]) -> int:
        """Write ``units`` (with embeddings, ids not present) as new rows, one at a time (the
        cheaper way for a few); ``lengths``: their token counts (text, context). Returns the
        first new row."""
        lo = self.n
        self.version += 1
        self.grow(lo + len(units))
        c = self.cols
        for u, length in zip(units, lengths):
            i = self.n
            self.n += 1
            self.ids.append(u.id)
            self.pos[u.id] = i
            self.vec[i] = u.embedding
            start, end = effective_interval(u)
            c["alive"][i] = 1.0
            c["mentioned"][i] = u.mentioned_at.timestamp()
            c["valid_from"][i] = _ts(u.valid_from)
            c["invalid"][i] = _ts(u.invalid_at)
            c["occ_start"][i] = _ts(u.occurred_start)
            c["occ_end"][i] = _ts(u.occurred_end)
            c["t_start"][i], c["t_end"][i] = start.timestamp(), end.timestamp()
            c["ftype"][i] = FACT_CODES[FactType(u.fact_type).value]
            c["dl"][i], c["dlc"][i] = length
            self.fields.append(_fields(u))
            self._put_slots(i, u.slots)
            self.docs.append(u.document_id)
            self.tags.append(frozenset(u.tags))
            self.alive_n += 1
            self.alive_len += c["dl"][i]
            self.alive_ctx_len += c["dlc"][i]
        return lo

    def append_bulk(self, units: Sequence[MemoryUnit], lengths: Sequence[tuple[int, int]]) -> int:
        """:meth:`append` for large batches: the same rows, written a column at a time."""
        m, lo = len(units), self.n
        hi = lo + m
        self.version += 1
        self.grow(hi)
        self.vec[lo:hi] = np.asarray([u.embedding for u in units], dtype=np.float32)
        c = self.cols
        c["alive"][lo:hi] = 1.0
        c["mentioned"][lo:hi] = [u.mentioned_at.timestamp() for u in units]
        for col, attr in (
            ("valid_from", "valid_from"),
            ("invalid", "invalid_at"),
            ("occ_start", "occurred_start"),
            ("occ_end", "occurred_end"),
        ):
            c[col][lo:hi] = [_ts(getattr(u, attr)) for u in units]
        spans = [effective_interval(u) for u in units]
        c["t_start"][lo:hi] = [a.timestamp() for a, _ in spans]
        c["t_end"][lo:hi] = [b.timestamp() for _, b in spans]
        c["ftype"][lo:hi] = [FACT_CODES[FactType(u.fact_type).value] for u in units]
        dl = np.asarray([t for t, _ in lengths], dtype=np.float64)
        dlc = np.asarray([x for _, x in lengths], dtype=np.float64)
        c["dl"][lo:hi] = dl
        c["dlc"][lo:hi] = dlc
        self.ids.extend(u.id for u in units)
        self.pos.update((u.id, lo + j) for j, u in enumerate(units))
        self.fields.extend(_fields(u) for u in units)
        for j, u in enumerate(units):
            self._put_slots(lo + j, u.slots)
        self.docs.extend(u.document_id for u in units)
        self.tags.extend(frozenset(u.tags) for u in units)
        self.n = hi
        self.alive_n += m
        self.alive_len += float(dl.sum())
        self.alive_ctx_len += float(dlc.sum())
        return lo

    def remove(self, ids: Sequence[str]) -> list[int]:
        """Mark the rows of ``ids`` (present ones) dead; returns their row numbers."""
        self.version += 1
        dead = []
        for uid in ids:
            i = self.pos.pop(uid)
            self.cols["alive"][i] = 0.0
            self.alive_n -= 1
            self.alive_len -= self.cols["dl"][i]
            self.alive_ctx_len -= self.cols["dlc"][i]
            dead.append(i)
        return dead

    def grow(self, need: int) -> None:
        """Make room for ``need`` rows (capacity doubles, so appends stay amortised O(1))."""
        cap = self.vec.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap, 256)
        vec = np.zeros((new, self.dim), dtype=np.float32)
        vec[:cap] = self.vec
        self.vec = vec
        for name, col in self.cols.items():
            grown = np.zeros(new)
            grown[:cap] = col
            self.cols[name] = grown
        slots = np.zeros((new, SLOT_WIDTH))
        slots[:cap] = self.slot_vals
        self.slot_vals = slots

    def _put_slots(self, i: int, slots: UnitSlots | None) -> None:
        """Row ``i``'s stored slot signals (rows are written in order: ``i`` is the next one)."""
        if slots is None or len(slots.best) != SLOT_WIDTH - 1:
            self.slot_weights.append("")
            return
        self.slot_weights.append(sys.intern(slots.weights))
        self.slot_vals[i, 0] = slots.gate
        self.slot_vals[i, 1:] = slots.best

    def slots_at(self, i: int) -> UnitSlots | None:
        """Row ``i``'s stored slot signals, if any."""
        weights = self.slot_weights[i]
        if not weights:
            return None
        row = self.slot_vals[i]
        return UnitSlots.model_construct(weights=weights, best=row[1:].tolist(), gate=float(row[0]))

    def compact(self) -> list[int]:
        """Renumber the live rows 0, 1, ... in their order, dropping the dead ones; returns the
        old row numbers kept (the new row j was row ``kept[j]``)."""
        kept = [i for i in range(self.n) if self.cols["alive"][i]]
        ids = [self.ids[i] for i in kept]
        vec = self.vec[kept]
        cols = {k: c[kept] for k, c in self.cols.items()}
        docs = [self.docs[i] for i in kept]
        tags = [self.tags[i] for i in kept]
        fields = [self.fields[i] for i in kept]
        slot_vals, slot_weights = self.slot_vals[kept], [self.slot_weights[i] for i in kept]
        self.clear()
        m = len(kept)
        self.grow(m)
        self.vec[:m] = vec
        for k, col in cols.items():
            self.cols[k][:m] = col
        self.ids, self.docs, self.tags, self.fields = ids, docs, tags, fields
        self.slot_vals[:m], self.slot_weights = slot_vals, slot_weights
        self.pos = {uid: i for i, uid in enumerate(ids)}
        self.n = self.alive_n = m
        for length in cols["dl"]:  # summed in row order, as appends sum it
            self.alive_len += length
        for length in cols["dlc"]:
            self.alive_ctx_len += length
        return kept

    def mask(self, flt: UnitFilter | None, at: np.ndarray | None = None) -> np.ndarray:
        """Live rows that pass ``flt`` (the rule is memlane.units.filter_mask's): over every row,
        or over the row numbers ``at`` only (a few candidates need not cost a pass over a
        million rows)."""
        c = self.cols
        sel = slice(0, self.n) if at is None else at
        alive = c["alive"][sel] > 0
        if flt is None:
            return alive
        # The per-row lists are read in place or at the rows asked for, never sliced whole:
        # copying two 200k-entry lists was 7-12 ms of a 13 ms mask at 200k rows (the columns
        # alone: 0.1 ms), and a recall asks for 3-4 masks.
        if at is None:
            docs, tags, fields = self.docs, self.tags, self.fields
        else:
            docs, tags, fields = ([col[i] for i in at] for col in (self.docs, self.tags, self.fields))
        return alive & filter_mask(
            flt,
            fact_code=c["ftype"][sel],
            mentioned=c["mentioned"][sel],
            valid_from=c["valid_from"][sel],
            invalid_at=c["invalid"][sel],
            document_ids=docs,
            tags=tags,
            entity_ids=lambda: (r[_ENTITIES] or () for r in fields),
        )

    def top(self, scores: np.ndarray, mask: np.ndarray, limit: int) -> list[Hit]:
        """The ``limit`` best-scored rows of ``mask`` as hits: score descending, then row order."""
        cand = np.flatnonzero(mask)
        return self.top_of(cand, scores[cand], limit)

    def top_of(self, cand: np.ndarray, s: np.ndarray, limit: int) -> list[Hit]:
        """:meth:`top` over the rows ``cand`` (distinct) scored ``s``: no pass over every row
        (the graph's re-scoring at 1M rows built two 1M-row arrays for ~1,000 candidates)."""
        if cand.size == 0 or limit <= 0:
            return []
        if cand.size > limit:
            part = np.argpartition(-s, limit - 1)[:limit]
            cand, s = cand[part], s[part]
        order = np.lexsort((cand, -s))  # score desc, then insertion order for ties
        # Python ints and floats before the loop: indexing a list by numpy integers and
        # float() per element cost 0.27 ms for 300 hits, 0.17 ms so (timeit).
        ids = self.ids
        return [Hit(id=ids[i], score=x) for x, i in zip(s[order].tolist(), cand[order].tolist())]
