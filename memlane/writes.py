"""The one write path to a bank: every write goes through a :class:`BankWriter`.

A bank's data lives in the store of record; each process also holds state derived from it
(memlane/derived.py: the search index and the memory graph) and the store's revision token
tells processes when theirs is out of date. One logical write (a retain call, an
invalidation, a deletion, a batch of opinions) therefore does three things, in this order:

1. it writes to the store;
2. it brings this process's derived state up to date in place: units it wrote are upserted,
   units it deleted removed (with the units whose links the store pruned, and whatever the
   delete hooks changed, read again); after a deletion, the units whose links it pruned choose
   their links again among the units left (``relink``) and the entities it touched get their
   mention counts and first and last sightings from the units left, so that what a bank
   derives does not depend on what it once held;
3. it bumps the bank's revision exactly once, at the end, with the unit ids it upserted and
   removed, so other processes apply that delta on their next recall (memlane/revlog.py)
   instead of reloading the bank. When another process bumped the revision while this write
   ran, this process's state is marked stale instead (it holds only its own half of the two
   writes), the delta is not logged, and everyone reloads (:meth:`DerivedState.wrote`).

Every write holds the bank's lease (memlane/leases.py) from before step 1's reads (the revision
it starts from, the entities retain resolves against) to after step 3: two writers of one bank,
in two processes or two threads, run one after the other, and the result is the sequential
one (before leases, concurrent retains lost each other's semantic links and entity mention
counts: tests/memlane/test_concurrent_writers.py).

Use it as ``with writer.write(bank_id) as w: w.units(...)``. A write that fails after writing
something still bumps the revision (other processes must see what did get written) and
evicts this process's state, which may hold part of the write.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Callable, Iterator, Sequence, cast

from memlane.derived import DerivedState
from memlane.interfaces import UnitFilter, VectorStore
from memlane.leases import BankLeases
from memlane.records import Bank, Chunk, Entity, FactType, MemoryUnit, TreeNode
from memlane.revlog import RevisionDelta
from memlane.timings import stage

# Called with (store, bank_id) after units were deleted and before the derived state reloads:
# a rule that keeps summaries consistent with their sources (observations, memlane/reflect).
# A delete hook: (the store, recording its writes; the bank; the unit ids this write deleted)
DeleteHook = Callable[[VectorStore, str, frozenset[str]], None]
# Called after a deletion with the write and the units whose links to deleted units the store
# pruned: chooses their links again among the units left (memlane/retain/relink.py), so a
# bank's links do not depend on what it once held. Returns how many it rewrote.
Relink = Callable[["BankWrite", set[str]], int]
# Called with (bank, the revision the write began at, units) before units are written: the
# units with what the learned ranker reads of each alone (memlane/facts/classifier.py).
UnitSignals = Callable[[str, str, Sequence[MemoryUnit]], list[MemoryUnit]]
# The units retain writes: what an entity's first and last sighting are read from.
_SAID = (FactType.world, FactType.experience)


class BankWriter:
    """Writes to banks: the store, then the derived state, then one revision bump."""

    def __init__(
        self,
        store: VectorStore,
        derived: DerivedState,
        on_delete: Sequence[DeleteHook] = (),
        leases: BankLeases | None = None,
        relink: Relink | None = None,
        signals: UnitSignals | None = None,
    ) -> None:
        self.store = store
        self.derived = derived
        self.on_delete = list(on_delete)
        self.leases = leases if leases is not None else BankLeases(store)
        self.relink = relink
        self.signals = signals

    @contextmanager
    def write(self, bank_id: str) -> Iterator[BankWrite]:
        """One logical write to ``bank_id``: the revision is bumped once when the block ends
        (and only if the block wrote something). Holds the bank's lease throughout: a
        concurrent writer of the same bank waits."""
        with self.leases.hold(bank_id), self.store.deferred_flushes():
            with stage("state"):
                w = BankWrite(self, bank_id, seen=self.derived.ensure(bank_id).revision)
            try:
                yield w
            except BaseException:
                w.finish(failed=True)
                raise
            with stage("finish"):
                w.finish(failed=False)

    # bank records: no revision bump, the profile is not derived state (every reader reads
    # it from the store), and a deleted bank's revision row goes with it.
    def put_bank(self, bank: Bank) -> None:
        """Create or replace a bank's profile."""
        self.store.upsert_bank(bank)

    def delete_bank(self, bank_id: str) -> None:
        """Delete a bank with everything in it. Its revision row and log go too, so other
        processes see a changed (empty) revision and drop what they hold. Under the bank's
        lease, like every write: a write racing with it would otherwise log a step from a
        revision the deletion removed, and readers would apply it to data that is gone."""
        with self.leases.hold(bank_id):
            self.store.delete_bank(bank_id)
            self.derived.drop(bank_id)


class BankWrite:
    """The operations of one logical write (see :meth:`BankWriter.write`)."""

    def __init__(self, writer: BankWriter, bank_id: str, seen: str) -> None:
        self.writer = writer
        self.bank_id = bank_id
        self.seen = seen  # the revision this process's state was at when the write began
        self.changed = False
        # the delta other processes apply (memlane/revlog.py): unit ids written and removed
        self.upserted: set[str] = set()
        self.removed: set[str] = set()

    @property
    def store(self) -> VectorStore:
        return self.writer.store

    def chunks(self, chunks: Sequence[Chunk]) -> None:
        """Write source chunks (not derived state: the revision alone tells readers)."""
        if chunks:
            self.changed = True
            with stage("store_write"):
                self.store.upsert_chunks(self.bank_id, chunks)

    def units(self, units: Sequence[MemoryUnit]) -> None:
        """Write units to the store and into this process's index and graph."""
        if units:
            self.changed = True
            if self.writer.signals is not None:
                with stage("signals"):
                    units = self.writer.signals(self.bank_id, self.seen, units)
            with stage("store_write"):
                self.store.upsert_units(self.bank_id, units)
            self.upserted.update(u.id for u in units)
            with stage("derived_update"):
                self.writer.derived.upsert_units(self.bank_id, units)

    def entities(self, entities: Sequence[Entity]) -> None:
        """Write entity records (read from the store by everyone; not derived state)."""
        if entities:
            self.changed = True
            with stage("store_write"):
                self.store.upsert_entities(self.bank_id, entities)

    def tree(self, upserts: Sequence[TreeNode], deletes: Sequence[str] = ()) -> None:
        """Write and remove temporal tree nodes (read by recall per revision: the bump at the
        end of the write is all other processes need)."""
        if upserts or deletes:
            self.changed = True
            if deletes:
                self.store.delete_tree_nodes(self.bank_id, deletes)
            if upserts:
                self.store.upsert_tree_nodes(self.bank_id, upserts)

    def curated(self) -> None:
        """Record that the caller changed the bank's mental models (memlane/curated/): no state
        derived here, but the revision moves, so that a process keeping them per revision (the
        models recall returns) reads them again."""
        self.changed = True

    def delete_chunks(self, ids: Sequence[str]) -> int:
        """Delete chunk records by id (not derived state; their units are the caller's to
        delete). Returns how many existed."""
        n = self.store.delete_chunks(self.bank_id, ids) if ids else 0
        if n:
            self.changed = True
        return n

    def delete_document(self, document_id: str) -> dict[str, int]:
        """Delete a document's units and chunks, then clean up after them (see
        ``_after_delete``). Returns ``{"units", "chunks", "entities"}`` counts (entities:
        dropped because nothing mentions them any more)."""
        with stage("delete"):
            recorder = _Recording(self.store, self._linking)
            counts = dict(recorder.delete_document(self.bank_id, document_id))
            counts["entities"] = self._after_delete(recorder) if counts["units"] or counts["chunks"] else 0
        return counts

    def delete_units(self, ids: Sequence[str]) -> tuple[int, int]:
        """Delete units by id, then clean up after them. Returns (units, entities) deleted."""
        recorder = _Recording(self.store, self._linking)
        n = recorder.delete_units(self.bank_id, ids)
        return n, (self._after_delete(recorder) if n else 0)

    def _linking(self, ids: Sequence[str]) -> set[str] | None:
        """The units that may hold links to ``ids``, for the store's pruning of them: from this
        process's graph, which is the store's under the lease (ensure() at the write's start,
        kept in place since), so the store reads those units by id instead of scanning every
        unit's links (0.85 s at 10k units on Milvus Lite, benchmarks/replace_cost.py). None
        (the store scans) when the graph does not hold the bank."""
        return self.writer.derived.linking_to(self.bank_id, ids)

    def _after_delete(self, recorder: _Recording) -> int:
        """After units were deleted: run the delete hooks, bring the derived state up to date
        with what the deletion and the hooks changed (the units whose links to deleted units
        the store pruned are read again), drop entities nothing mentions and fix mention
        counts. Returns how many entities were dropped.

        In place, not by a reload (3.4 s at 10k memories): this process's state was at the
        store's state when the write began (ensure() under the lease) and nothing else writes
        the bank meanwhile, so the ids the deletion and the hooks name are the whole change.
        Delete hooks must write units through upsert_units / delete_units / delete_document
        of the store they are given, which records them."""
        self.changed = True
        bank_id, store, derived = self.bank_id, self.store, self.writer.derived
        # the units whose links the store pruned: the graph still holds the deleted units here
        pruned = (derived.linking_to(bank_id, sorted(recorder.removed)) or set()) - recorder.removed
        for hook in self.writer.on_delete:
            with stage(f"delete.hook.{getattr(hook, '__name__', 'hook')}"):
                hook(recorder.as_store(), bank_id, frozenset(recorder.removed))
        with stage("delete.apply_delta"):
            applied = derived.apply_delta(bank_id, recorder.upserted, recorder.removed)
        self.upserted.update(applied.upserted)
        self.removed.update(applied.removed)
        if self.writer.relink is not None and pruned:
            with stage("delete.relink"):
                self.writer.relink(self, pruned)
        with stage("delete.entities"):
            entities = store.list_entities(bank_id)
            degrees = derived.graph.entity_degrees(bank_id, [e.entity_id for e in entities])
            orphans = [e.entity_id for e in entities if degrees.get(e.entity_id, 0) == 0]
            dropped = store.delete_entities(bank_id, orphans) if orphans else 0
            fixed = [
                e2
                for e in entities
                if degrees.get(e.entity_id, 0)
                and (e2 := self._recounted(e, degrees[e.entity_id], recorder.spans.get(e.entity_id))) is not e
            ]
            if fixed:
                store.upsert_entities(bank_id, fixed)
        return dropped

    def _recounted(self, entity: Entity, degree: int, deleted: tuple[float, float] | None) -> Entity:
        """The entity with its mention count, and its first and last sighting read again from
        the units left when a deleted unit said it at one of them (else they stand)."""
        update: dict[str, Any] = {}
        if degree != entity.mention_count:
            update["mention_count"] = degree
        first, last = entity.first_seen, entity.last_seen
        if deleted is not None and (
            first is None or last is None or first.timestamp() >= deleted[0] or last.timestamp() <= deleted[1]
        ):
            flt = UnitFilter(entity_id=entity.entity_id, fact_types=list(_SAID), only_valid=False)
            ids = self.store.list_unit_ids(self.bank_id, flt)
            times = [
                f["mentioned_at"]
                for f in self.store.get_unit_fields(self.bank_id, ids, ["mentioned_at"]).values()
                if f.get("mentioned_at") is not None
            ]
            if times:
                seen = (datetime.fromtimestamp(min(times), UTC), datetime.fromtimestamp(max(times), UTC))
                if seen != (first, last):
                    update["first_seen"], update["last_seen"] = seen
        return entity.model_copy(update=update) if update else entity

    def finish(self, *, failed: bool) -> None:
        """End the write: bump the revision once (when anything was written); after a
        failure, evict this process's state, which may hold part of it."""
        if not self.changed:
            return
        derived = self.writer.derived
        # A failed write may have written more than it recorded: no delta, readers reload.
        delta = None if failed else RevisionDelta(self.seen, sorted(self.upserted), sorted(self.removed))
        derived.wrote(self.bank_id, self.seen, delta)
        if failed:
            derived.evict(self.bank_id)


class _Recording:
    """The store as a write's deletions and delete hooks use it: it forwards every call and
    notes the unit ids written and deleted through it (the delta of the write). Its deletions
    tell the store which units may link to what they delete: ``linking(ids)`` (the writer's
    graph) and the units written through it, which the graph has not seen yet."""

    def __init__(
        self, store: VectorStore, linking: Callable[[Sequence[str]], set[str] | None] | None = None
    ) -> None:
        self._store = store
        self._linking = linking
        self.upserted: set[str] = set()
        self.removed: set[str] = set()
        # entity id -> (earliest, latest) time a deleted unit said it, epoch seconds
        self.spans: dict[str, tuple[float, float]] = {}

    def _note(self, bank_id: str, ids: Sequence[str]) -> None:
        """Note when the units about to be deleted said their entities."""
        if not ids:
            return
        for f in self._store.get_unit_fields(
            bank_id, ids, ["entity_ids", "mentioned_at", "fact_type"]
        ).values():
            t = f.get("mentioned_at")
            if t is None or f.get("fact_type") not in {x.value for x in _SAID}:
                continue
            for e in f.get("entity_ids") or ():
                lo, hi = self.spans.get(e, (t, t))
                self.spans[e] = (min(lo, t), max(hi, t))

    def linking(self, ids: Sequence[str]) -> set[str] | None:
        """A superset of the units holding links to ``ids``, or None (the store finds them)."""
        known = self._linking(ids) if self._linking is not None else None
        return None if known is None else known | self.upserted

    def as_store(self) -> VectorStore:
        return cast(VectorStore, self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def upsert_units(self, bank_id: str, units: Sequence[MemoryUnit]) -> None:
        units = list(units)
        self._store.upsert_units(bank_id, units)
        self.upserted.update(u.id for u in units)

    def delete_units(self, bank_id: str, ids: Sequence[str]) -> int:
        ids = [i for i in ids if isinstance(i, str)]
        self._note(bank_id, ids)
        n = self._store.delete_units(bank_id, ids, linking=self.linking(ids))
        self.removed.update(ids)  # an id that did not exist removes nothing anywhere
        return n

    def delete_document(self, bank_id: str, document_id: str) -> dict[str, int]:
        # The document's unit ids first: the store's deletion reports counts only. Under the
        # bank's lease nothing adds to the document in between.
        ids: list[str] = []
        if isinstance(document_id, str) and document_id:
            flt = UnitFilter(document_id=document_id, only_valid=False)
            with stage("delete.list_ids"):
                ids = self._store.list_unit_ids(bank_id, flt)
            self._note(bank_id, ids)
            self.removed.update(ids)
        return self._store.delete_document(bank_id, document_id, linking=self.linking(ids))
