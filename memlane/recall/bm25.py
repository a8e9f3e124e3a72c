"""The lexical part of a bank index (memlane/recall/index.py): each row's analysed tokens, the
postings of every term, document frequencies over the live rows, and BM25 scores.

BM25 uses Milvus's formula and defaults (k1=1.2, b=0.75, idf = ln(1 + (N - n + .5)/(n + .5)))
over the same analysed text (``memlane.stores.lexical.analyze``), so both backends rank alike.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from memlane.records import MemoryUnit
from memlane.stores.lexical import analyze

K1, B = 1.2, 0.75


def unit_tokens(unit: MemoryUnit) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The unit's analysed tokens, interned (one string per term): its text's, and its
    context's (the neighbouring turns), which the bank index scores as a second field."""
    return (
        tuple(sys.intern(t) for t in analyze(unit.text).split()),
        tuple(sys.intern(t) for t in analyze(unit.context).split()) if unit.context else (),
    )


def combined(
    text: tuple[np.ndarray, np.ndarray], context: tuple[np.ndarray, np.ndarray], weight: float
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of either field's scores (ascending) and ``text + weight * context`` there."""
    (at_t, s_t), (at_c, s_c) = text, context
    if weight <= 0 or at_c.size == 0:
        return at_t, s_t
    rows, inverse = np.unique(np.concatenate([at_t, at_c]), return_inverse=True)
    return rows, np.bincount(inverse, weights=np.concatenate([s_t, weight * s_c]), minlength=rows.size)


def query_terms(text: str) -> set[str]:
    """The distinct analysed terms of a query."""
    return set(analyze(text).split())


class Postings:
    """Term postings over a bank index's rows. The bank index writes them under its write lock
    and scores under a read, searches side by side: the one thing a search writes is the
    numpy copy of a term's postings (``_post_np``), a dict entry set whole, to the arrays any
    search would make of the same postings, and dropped by writes only."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Drop every row."""
        # The analysed tokens as a tuple of interned strings (a Counter a unit was ~800 bytes),
        # and postings as machine arrays (two Python int lists cost ~72 bytes an entry, arrays
        # 6): row numbers (int32) and term frequencies (uint32). The engine benchmark's
        # rss_bytes_per_memory measures the whole.
        self.terms: list[tuple[str, ...]] = []
        self.postings: dict[str, tuple[array, array]] = {}
        self.df: Counter = Counter()  # live rows holding the term
        self._post_np: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, lo: int, tokens: Sequence[tuple[str, ...]]) -> None:
        """Post new rows ``lo, lo + 1, ...`` holding ``tokens`` (one tuple a row)."""
        postings, df = self.postings, self.df
        touched: set[str] = set()
        self.terms.extend(tokens)
        for i, row in enumerate(tokens, start=lo):
            counts = Counter(row)
            for term, tf in counts.items():
                entry = postings.get(term)
                if entry is None:
                    entry = postings[term] = (array("i"), array("I"))
                entry[0].append(i)
                entry[1].append(tf)
            df.update(counts.keys())
            touched.update(counts)
        for term in touched:
            self._post_np.pop(term, None)

    def remove(self, rows: Iterable[int]) -> None:
        """Rows gone dead: their terms no longer count in document frequencies (their postings
        stay until :meth:`compact`; the live mask drops them)."""
        for i in rows:
            for term in set(self.terms[i]):
                self.df[term] -= 1

    def compact(self, kept: Sequence[int]) -> None:
        """Rebuild over the rows ``kept`` (old numbers), renumbered 0, 1, ... in that order."""
        terms = [self.terms[i] for i in kept]
        self.clear()
        self.add(0, terms)

    def scores(
        self, terms: Iterable[str], n: int, dl: np.ndarray, alive_n: int, avgdl: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """BM25 of ``terms`` over rows [0, n), as the rows where some term occurs (ascending)
        and their scores (every one positive); ``dl``: each row's token count, ``alive_n`` and
        ``avgdl``: the live rows' number and mean token count. Dead rows are included: the
        caller's live mask drops them."""
        parts = []
        for term in terms:
            df = self.df.get(term, 0)
            if df <= 0:
                continue
            pos, tf = self._postings_np(term)
            idf = math.log(1 + (alive_n - df + 0.5) / (df + 0.5))
            # The length norm at the term's postings only (over all n rows it was a pass over
            # 1M rows per query at 1M units).
            parts.append((pos, idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl[pos] / avgdl))))
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        if len(parts) == 1:
            # One term (a name probed by abstention, a one-word query): its postings are the
            # answer, without a pass over every row.
            return parts[0]
        scores = np.zeros(n)
        # The rows some term occurs in, found in a one-byte-a-row array: every part is
        # positive, so they are the rows scoring above 0 (a pass over every row's float score
        # was 2 of 4.8 ms of a search at 300k units, whose query terms post ~80k rows).
        touched = np.zeros(n, dtype=np.bool_)
        for pos, part in parts:
            scores[pos] += part
            touched[pos] = True
        rows = np.flatnonzero(touched)
        return rows, scores[rows]

    def _postings_np(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """A term's postings as numpy arrays, cached until the term is posted again."""
        cached = self._post_np.get(term)
        if cached is None:
            pos, tfs = self.postings[term]
            cached = self._post_np[term] = (
                np.frombuffer(pos, dtype=np.int32).copy(),
                np.frombuffer(tfs, dtype=np.uint32).astype(np.float64),
            )
        return cached
