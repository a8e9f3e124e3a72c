"""The store as a :class:`memlane.interfaces.SearchBackend`: dense (COSINE), BM25 and time
search over a bank's units, with the filter of :func:`memlane.units.milvus_expr`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np

from memlane.interfaces import Hit, UnitFilter
from memlane.records import check_bank_id
from memlane.stores.lexical import analyze
from memlane.stores.milvus.codec import row_fields
from memlane.stores.milvus.collections import MAX_TOPK, Collections
from memlane.units import CANDIDATE_FIELDS, HIT_FIELDS, matches, milvus_expr, to_us


class Search(Collections):
    """Search methods of :class:`MilvusStore`."""

    @property
    def has_lexical(self) -> bool:
        """BM25 in the store: Milvus Lite, Milvus 2.5+; not Milvus 2.3 (capabilities.py)."""
        return self.capabilities.bm25

    @staticmethod
    def _limit(limit: int) -> int:
        if not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 0:
            raise ValueError(f"limit must be a non-negative int, got {limit!r}")
        if limit > MAX_TOPK:
            raise ValueError(f"limit {limit} exceeds Milvus's maximum of {MAX_TOPK}")
        return int(limit)

    @staticmethod
    def _hits(results, score, keys: Sequence[str], item_id: Callable[[str], str]) -> list[list[Hit]]:
        if not keys:
            return [
                [Hit(id=item_id(h["id"]), score=score(float(h["distance"]))) for h in hits]
                for hits in results
            ]
        return [
            [
                Hit(
                    id=item_id(h["id"]),
                    score=score(float(h["distance"])),
                    fields=row_fields(h.get("entity") or {}, keys),
                )
                for h in hits
            ]
            for hits in results
        ]

    @staticmethod
    def _output(fields: Sequence[str] | None) -> tuple[Sequence[str], list[str]]:
        """(hit keys, Milvus output fields) for a search's ``fields`` argument.

        Shipping every field of 300 hits through Lite's gRPC cost 37 ms per search against 4 ms
        for ids only (419-unit bank), so hot paths ask for the fields they use."""
        if fields is None:
            return HIT_FIELDS, list(HIT_FIELDS)
        unknown = set(fields) - set(HIT_FIELDS)
        if unknown:
            raise ValueError(f"unknown unit fields {sorted(unknown)}")
        # An empty output list makes Milvus Lite return every field: ask for the key alone.
        return tuple(fields), list(fields) or ["id"]

    def get_unit_fields(
        self, bank_id: str, ids: Sequence[str], fields: Sequence[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """Hit-style fields (times in epoch seconds) by unit id, all of them or ``fields``;
        unknown ids are absent from the result."""
        ids = [i for i in (ids or ()) if isinstance(i, str)]
        check_bank_id(bank_id)
        if not ids:
            return {}
        keys, out = self._output(fields)
        rows = self._read(bank_id, "units", lambda n: self._bank_get(bank_id, n, ids, ["id", *out]), [])
        return {r["id"]: row_fields(r, keys) for r in rows}

    def search_dense(
        self,
        bank_id: str,
        vectors: np.ndarray,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
        chunk_prior: float = 0.0,
    ) -> list[list[Hit]]:
        """COSINE search; one hit list per query vector (rows of ``vectors``; a single 1-d
        vector is taken as a batch of one), best first, score = cosine similarity. ``fields``
        limits the hit fields (None: all). ``chunk_prior`` is ignored: Milvus keeps no chunk
        centroids."""
        check_bank_id(bank_id)
        limit = self._limit(limit)
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim == 1 and arr.size:
            arr = arr[None, :]
        if arr.ndim != 2 or (arr.size and arr.shape[1] != self.dim):
            raise ValueError(f"query vectors must have shape (n, {self.dim}), got {arr.shape}")
        if arr.shape[0] == 0:
            return []
        if not np.all(np.isfinite(arr)):
            raise ValueError("query vectors contain NaN or infinite values")
        if limit == 0:
            return [[] for _ in range(arr.shape[0])]
        expr = milvus_expr(flt)
        keys, out = self._output(fields)
        res = self._read(
            bank_id,
            "units",
            lambda n: self.client.search(
                n,
                data=arr.tolist(),
                anns_field="embedding",
                limit=limit,
                filter=self.layout.scope(bank_id, expr),
                output_fields=out,
                search_params={"metric_type": "COSINE"},
            ),
            None,
        )
        if res is None:
            return [[] for _ in range(arr.shape[0])]
        return self._hits(res, lambda d: d, keys, self.layout.item_id)

    def search_lexical(
        self,
        bank_id: str,
        text: str,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """BM25 over unit text plus its context; scores positive, best first. A query of
        nothing but stop words gives []. CapabilityError on a Milvus without BM25 (2.3): there
        the lexical channel is the in-process index's (``store.search_backend=memory``)."""
        check_bank_id(bank_id)
        limit = self._limit(limit)
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        self.capabilities.require_bm25("the store's lexical (BM25) search")
        query = analyze(text)
        if not query or limit == 0:
            return []  # nothing but stop words: BM25 has nothing to match
        expr = milvus_expr(flt)
        keys, out = self._output(fields)
        res = self._read(
            bank_id,
            "units",
            lambda n: self.client.search(
                n,
                data=[query],
                anns_field="sparse",
                limit=limit,
                filter=self.layout.scope(bank_id, expr),
                output_fields=out,
                search_params={"metric_type": "BM25"},
            ),
            None,
        )
        if not res:
            return []
        # Lite returns BM25 negated (best = most negative), a server positive: abs() fits both.
        hits = self._hits(res, abs, keys, self.layout.item_id)[0]
        hits.sort(key=lambda h: -h.score)  # stable: keeps the engine's order among ties
        return hits

    def search_time(
        self,
        bank_id: str,
        start: datetime,
        end: datetime,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Units whose occurrence interval overlaps [start, end] (a unit with one end uses it
        for both; one with no occurrence time uses its mention time); score 0. When more than
        ``limit`` overlap, those whose interval middle is nearest the query's middle are kept
        (ties by id), in that order."""
        check_bank_id(bank_id)
        limit = self._limit(limit)
        if not isinstance(start, datetime) or not isinstance(end, datetime):
            raise ValueError("start and end must be datetimes")
        s, e = to_us(start), to_us(end)
        if s > e:
            raise ValueError(f"start {start} is after end {end}")
        if limit == 0:
            return []
        expr = f"(t_start <= {e}) and (t_end >= {s})"
        extra = milvus_expr(flt)
        if extra:
            expr = f"{expr} and {extra}"
        mid2 = s + e  # twice the middle: integer arithmetic
        keys, out = self._output(fields)

        def run(name: str) -> list[Hit]:
            cands = self._bank_query(bank_id, name, expr, ["id", "t_start", "t_end"])
            cands.sort(key=lambda r: (abs(int(r["t_start"]) + int(r["t_end"]) - mid2), r["id"]))
            ids = [r["id"] for r in cands[:limit]]
            if not keys:
                return [Hit(id=i, score=0.0) for i in ids]
            return [
                Hit(id=r["id"], score=0.0, fields=row_fields(r, keys))
                for r in self._bank_get(bank_id, name, ids, ["id", *out])
            ]

        return self._read(bank_id, "units", run, [])

    def candidates(
        self, bank_id: str, ids: Sequence[str], flt: UnitFilter | None
    ) -> dict[str, dict[str, Any]]:
        """Scoring fields of the ids that exist and pass ``flt`` (one point lookup; the filter
        is applied in Python with :func:`memlane.units.matches`)."""
        fetched = self.get_unit_fields(bank_id, ids, CANDIDATE_FIELDS)
        return {d: f for d, f in fetched.items() if matches(f, flt)}
