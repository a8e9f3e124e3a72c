"""Semantic links as a function of the bank's memories, whatever order they were retained in.

A memory said at time t links to the ``top_k`` memories most similar to it among those said no
later than t (cosine >= ``threshold``, ties broken by id), out of the memories retain writes
(world and experience facts: what reflection derives from them is never a target, so its
writes leave links alone). Every write keeps that so (memlane/retain/links.py computes a new
memory's links):

* a new memory's links are chosen among the bank's memories said no later than it
  (:meth:`Linker.neighbours` searches those), not among a fixed number of nearest ones of
  which the later-said ones are then dropped;
* a memory said after a new one, which the new one is now among the nearest of, gains it
  (:meth:`Linker.neighbours` finds every one above the threshold said no earlier, widening its
  search until the last hit falls below it; :meth:`Linker.later` names them; :meth:`Linker.gain`
  merges the new ones into the links they hold: no search);
* a memory whose link target is deleted finds its next nearest (the bank writer calls
  :meth:`Linker.relink` after a deletion, memlane/writes.py: one search of the memories said
  no later than it).

So a bank ends with the links a fresh bank given the same memories computes, in any order:
before, a document retained after one said later got no links from it, and a link pruned with
a deleted memory was never replaced.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Collection, Mapping, Sequence

import numpy as np

from memlane.interfaces import Hit, SearchBackend, UnitFilter, VectorStore
from memlane.records import FactType, Link, LinkType
from memlane.retain.links import semantic_links, similarity

if TYPE_CHECKING:
    from memlane.writes import BankWrite

# The memories links join: what retain writes.
LINKED = frozenset({FactType.world, FactType.experience})
# The most hits one search may ask for (Milvus's top-k limit): past it, a memory with more
# neighbours above the threshold keeps the nearest 16384.
MAX_LIMIT = 16384
# Two weights of one link computed by two paths (a batch's matrix product, an index's search)
# differ in the last bits of a float32: below this they are the same link.
SAME_WEIGHT = 1e-6
_MICROSECOND = timedelta(microseconds=1)  # "said no later than t": before t + 1 us (times are us)


def _linked_filter() -> UnitFilter:
    return UnitFilter(fact_types=sorted(LINKED, key=lambda t: t.value), only_valid=False)


class Linker:
    """Finds and keeps the semantic links of one engine's banks (see the module)."""

    def __init__(self, search: SearchBackend, store: VectorStore, *, threshold: float, top_k: int) -> None:
        """``search``: the in-process index when there is one, else the store."""
        self.search = search
        self.store = store
        self.threshold = threshold
        self.top_k = top_k

    def neighbours(self, bank_id: str, vectors: np.ndarray, times: Sequence[float]) -> list[list[Hit]]:
        """For each vector said at ``times`` (epoch seconds): the ``top_k`` nearest linked
        memories of the bank said no later (the ones it may link to), and every one said no
        earlier at cosine >= the threshold (the ones that may link to it), with their
        ``mentioned_at``. The second search asks for 3 x top_k hits, and 4 times more while its
        last hit is still above the threshold: a memory appended after the bank's last one
        has none."""
        n = len(vectors)
        # no count of the bank first: an empty bank's searches return nothing, and the count was
        # a store query in every retain request (the links stage 13 -> 7 ms a request, measured
        # with the extraction ahead: benchmarks/retain_profile.py --modes service)
        if self.top_k == 0 or n == 0:
            return [[] for _ in range(n)]
        out: list[list[Hit]] = []
        for vector, t in zip(np.asarray(vectors, dtype=np.float32), times):
            at = datetime.fromtimestamp(t, UTC)
            found = {h.id: h for h in self._nearest(bank_id, vector, self.top_k, until=at + _MICROSECOND)}
            limit = 3 * self.top_k
            while True:
                later = self._search(bank_id, vector, limit, since=at)
                found.update((h.id, h) for h in later)
                if len(later) < limit or later[-1].score < self.threshold or limit >= MAX_LIMIT:
                    break
                limit = min(4 * limit, MAX_LIMIT)
            out.append(
                sorted((h for h in found.values() if h.score >= self.threshold), key=lambda h: -h.score)
            )
        return out

    def _nearest(self, bank_id: str, vector: np.ndarray, k: int, *, until: datetime) -> list[Hit]:
        """The ``k`` nearest said before ``until``, and every one tied with the k-th: a search
        orders equal scores (the same text said again) as it likes, and links break ties by
        id, so the search is widened until its last hit scores below the k-th."""
        limit = k
        while True:
            hits = self._search(bank_id, vector, limit, until=until)
            if len(hits) < limit or limit >= MAX_LIMIT or hits[-1].score < hits[k - 1].score:
                return hits
            limit = min(4 * limit, MAX_LIMIT)

    def _search(
        self,
        bank_id: str,
        vector: np.ndarray,
        limit: int,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Hit]:
        flt = _linked_filter()
        flt.mentioned_since, flt.mentioned_until = since, until
        return self.search.search_dense(bank_id, vector[None, :], limit, flt=flt, fields=["mentioned_at"])[0]

    def links(
        self, ids: Sequence[str], vectors: np.ndarray, times: Sequence[float], hits: Sequence[Sequence[Hit]]
    ) -> list[list[Link]]:
        """The semantic links of new memories (``ids``, written together) from each other and
        their :meth:`neighbours` in the bank."""
        return semantic_links(ids, vectors, times, hits, threshold=self.threshold, top_k=self.top_k)

    @staticmethod
    def later(
        ids: Sequence[str], times: Sequence[float], hits: Sequence[Sequence[Hit]]
    ) -> dict[str, dict[str, float]]:
        """The memories of the bank said no earlier than a new memory among its neighbours,
        each with the new memories it may now link to and their cosine."""
        new = set(ids)
        out: dict[str, dict[str, float]] = {}
        for uid, t, found in zip(ids, times, hits):
            for h in found:
                at = h.fields.get("mentioned_at")
                if h.id not in new and at is not None and at >= t:
                    out.setdefault(h.id, {})[uid] = similarity(h.score)
        return out

    def gain(self, write: BankWrite, candidates: Mapping[str, Mapping[str, float]]) -> int:
        """Add the new memories ``candidates`` names to the links of the memories it maps them
        from where they are now among the ``top_k`` nearest (the links held are the top_k of
        the bank before: the top_k of them and the new ones is the top_k after). Writes those
        that change; returns how many."""
        if not candidates or self.top_k == 0:
            return 0
        bank_id = write.bank_id
        held = self.store.get_unit_fields(bank_id, sorted(candidates), ["links"])
        changed: dict[str, list[tuple[str, float]]] = {}
        for uid, fields in held.items():
            links = [Link.model_validate(x) for x in fields.get("links") or []]
            old = {x.target_id: x.weight for x in links if x.type == LinkType.semantic}
            best = _top({**old, **candidates[uid]}, self.top_k)
            if dict(best).keys() != old.keys():
                changed[uid] = best
        if not changed:
            return 0
        out = []
        for u in self.store.get_units(bank_id, sorted(changed), with_embedding=True):
            others = [x for x in u.links if x.type != LinkType.semantic]
            out.append(u.model_copy(update={"links": _semantic(changed[u.id]) + others}))
        write.units(out)
        return len(out)

    def relink(self, write: BankWrite, ids: Collection[str]) -> int:
        """Choose again the semantic links of the memories ``ids`` among the bank's as it is
        (after a deletion took some of their targets), and write those whose links change
        (other kinds of link kept). Returns how many."""
        if not ids or self.top_k == 0:
            return 0
        bank_id = write.bank_id
        units = [
            u
            for u in self.store.get_units(bank_id, sorted(ids), with_embedding=True)
            if u.fact_type in LINKED and u.embedding is not None
        ]
        changed = []
        for u in units:
            # the top_k said no later than it (and itself): a search of the earlier ones
            vector = np.asarray(u.embedding, dtype=np.float32)
            found = self._nearest(bank_id, vector, self.top_k + 1, until=u.mentioned_at + _MICROSECOND)
            best = _top(
                {h.id: similarity(h.score) for h in found if h.id != u.id and h.score >= self.threshold},
                self.top_k,
            )
            old = {x.target_id: x.weight for x in u.links if x.type == LinkType.semantic}
            if dict(best).keys() == old.keys() and all(abs(old[t] - w) <= SAME_WEIGHT for t, w in best):
                continue
            others = [x for x in u.links if x.type != LinkType.semantic]
            changed.append(u.model_copy(update={"links": _semantic(best) + others}))
        write.units(changed)
        return len(changed)


def _top(weights: Mapping[str, float], k: int) -> list[tuple[str, float]]:
    """The ``k`` best (target, cosine) pairs, ties by id: the order links are chosen in."""
    return sorted(((t, min(1.0, max(0.0, w))) for t, w in weights.items()), key=lambda kv: (-kv[1], kv[0]))[
        :k
    ]


def _semantic(best: Sequence[tuple[str, float]]) -> list[Link]:
    return [Link(target_id=t, type=LinkType.semantic, weight=w) for t, w in best]
