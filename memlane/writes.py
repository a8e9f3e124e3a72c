"""The one write path to a bank: every write goes through a :class:`BankWriter`.

A bank's data lives in the store of record; each process also holds state derived from it
(memlane/derived.py: the search index and the memory graph) and the store's revision token
tells processes when theirs is out of date. One logical write (a retain call, an
invalidation, a deletion, a batch of opinions) therefore does three things, in this order:

1. it writes to the store;
2. it brings this process's derived state up to date: in place for units it wrote, by a
   reload for units it deleted;
3. it bumps the bank's revision exactly once, at the end, so other processes reload on their
   next recall. When another process bumped the revision while this write ran, this
   process's state is marked stale instead (it holds only its own half of the two writes)
   and reloads on its next use (:meth:`DerivedState.wrote`).

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
from typing import Callable, Iterator, Sequence

from memlane.derived import DerivedState
from memlane.interfaces import VectorStore
from memlane.leases import BankLeases
from memlane.model import Bank, Chunk, Entity, MemoryUnit, TreeNode

# Called with (store, bank_id) after units were deleted and before the derived state reloads:
# a rule that keeps summaries consistent with their sources (observations, memlane/reflect).
DeleteHook = Callable[[VectorStore, str], None]


class BankWriter:
    """Writes to banks: the store, then the derived state, then one revision bump."""

    def __init__(
        self,
        store: VectorStore,
        derived: DerivedState,
        on_delete: Sequence[DeleteHook] = (),
        leases: BankLeases | None = None,
    ) -> None:
        self.store = store
        self.derived = derived
        self.on_delete = list(on_delete)
        self.leases = leases if leases is not None else BankLeases(store)

    @contextmanager
    def write(self, bank_id: str) -> Iterator[BankWrite]:
        """One logical write to ``bank_id``: the revision is bumped once when the block ends
        (and only if the block wrote something). Holds the bank's lease throughout: a
        concurrent writer of the same bank waits."""
        with self.leases.hold(bank_id):
            w = BankWrite(self, bank_id, seen=self.derived.ensure(bank_id).revision)
            try:
                yield w
            except BaseException:
                w.finish(failed=True)
                raise
            w.finish(failed=False)

    # bank records: no revision bump, the profile is not derived state (every reader reads
    # it from the store), and a deleted bank's revision row goes with it.
    def put_bank(self, bank: Bank) -> None:
        """Create or replace a bank's profile."""
        self.store.upsert_bank(bank)

    def delete_bank(self, bank_id: str) -> None:
        """Delete a bank with everything in it. Its revision row goes too, so other processes
        see a changed (empty) revision and drop what they hold."""
        self.store.delete_bank(bank_id)
        self.derived.drop(bank_id)


class BankWrite:
    """The operations of one logical write (see :meth:`BankWriter.write`)."""

    def __init__(self, writer: BankWriter, bank_id: str, seen: str) -> None:
        self.writer = writer
        self.bank_id = bank_id
        self.seen = seen  # the revision this process's state was at when the write began
        self.changed = False

    @property
    def store(self) -> VectorStore:
        return self.writer.store

    def chunks(self, chunks: Sequence[Chunk]) -> None:
        """Write source chunks (not derived state: the revision alone tells readers)."""
        if chunks:
            self.changed = True
            self.store.upsert_chunks(self.bank_id, chunks)

    def units(self, units: Sequence[MemoryUnit]) -> None:
        """Write units to the store and into this process's index and graph."""
        if units:
            self.changed = True
            self.store.upsert_units(self.bank_id, units)
            self.writer.derived.upsert_units(self.bank_id, units)

    def entities(self, entities: Sequence[Entity]) -> None:
        """Write entity records (read from the store by everyone; not derived state)."""
        if entities:
            self.changed = True
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

    def delete_document(self, document_id: str) -> dict[str, int]:
        """Delete a document's units and chunks, then clean up after them (see
        ``_after_delete``). Returns ``{"units", "chunks", "entities"}`` counts (entities:
        dropped because nothing mentions them any more)."""
        counts = dict(self.store.delete_document(self.bank_id, document_id))
        counts["entities"] = self._after_delete() if counts["units"] or counts["chunks"] else 0
        return counts

    def delete_units(self, ids: Sequence[str]) -> tuple[int, int]:
        """Delete units by id, then clean up after them. Returns (units, entities) deleted."""
        n = self.store.delete_units(self.bank_id, ids)
        return n, (self._after_delete() if n else 0)

    def _after_delete(self) -> int:
        """After units were deleted: run the delete hooks, reload the derived state from what
        the store now holds (links to deleted units go with them), drop entities nothing
        mentions and fix mention counts. Returns how many entities were dropped."""
        self.changed = True
        bank_id, store, derived = self.bank_id, self.store, self.writer.derived
        for hook in self.writer.on_delete:
            hook(store, bank_id)
        derived.drop(bank_id)
        derived.ensure(bank_id)  # the revision is bumped at the end of the write, not here
        entities = store.list_entities(bank_id)
        degrees = derived.graph.entity_degrees(bank_id, [e.entity_id for e in entities])
        orphans = [e.entity_id for e in entities if degrees.get(e.entity_id, 0) == 0]
        dropped = store.delete_entities(bank_id, orphans) if orphans else 0
        recounted = [
            e.model_copy(update={"mention_count": degrees[e.entity_id]})
            for e in entities
            if degrees.get(e.entity_id, 0) and degrees[e.entity_id] != e.mention_count
        ]
        if recounted:
            store.upsert_entities(bank_id, recounted)
        return dropped

    def finish(self, *, failed: bool) -> None:
        """End the write: bump the revision once (when anything was written); after a
        failure, evict this process's state, which may hold part of it."""
        if not self.changed:
            return
        derived = self.writer.derived
        derived.wrote(self.bank_id, self.seen)
        if failed:
            derived.evict(self.bank_id)
