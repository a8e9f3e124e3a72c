"""Retain: chunk -> extract -> resolve entities -> embed -> link -> write, in bounded batches.

Writes go through the caller's :class:`~memlane.writes.BankWrite` (one logical write per
retain call: one revision bump at its end). Write order per batch: chunks, then units (the
store of record, then the derived graph); entity records are written last with mention counts
read from the graph, which is itself derived from the units, so a retain interrupted anywhere
and run again converges to the same state.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import numpy as np

from memlane.derived import DerivedState
from memlane.ids import unit_id
from memlane.interfaces import UnitFilter, VectorStore
from memlane.records import Bank, Chunk, Link, MemoryUnit, Turn
from memlane.retain.chunking import ChunkInput, chunk_turns
from memlane.retain.entities import EntityResolver
from memlane.retain.facts import Extractor, Fact
from memlane.retain.links import semantic_links
from memlane.settings import Settings
from memlane.timings import add, recording, stage

if TYPE_CHECKING:
    from memlane.banks import BankEmbedders
    from memlane.writes import BankWrite

# Turns per batch: small enough that extracting the next batch on a thread overlaps embedding
# the current one (torch releases the GIL), large enough that the embedder's length-sorted
# batches pad little: the LoCoMo backfill on 2 cores ran at 116 turns/s with 128, 123 with 256
# and 124 with 512 (Nov 2026).
BATCH_TURNS = 256


@dataclass
class RetainReport:
    """What one retain call wrote."""

    bank_id: str
    documents: int = 0
    turns: int = 0
    chunks: int = 0
    units: int = 0
    entities: int = 0
    links: int = 0
    # Documents whose LLM extraction runs in the background (memlane/retain/deferred.py).
    deferred: int = 0
    seconds: float = 0.0
    timings_s: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)

    def add(self, other: RetainReport) -> None:
        """Add another report's counts and seconds to this one (a call that retains several
        documents one at a time reports their sum)."""
        for key in ("documents", "turns", "chunks", "units", "entities", "links", "deferred", "seconds"):
            setattr(self, key, getattr(self, key) + getattr(other, key))


class Retainer:
    """Runs retain for one bank at a time: reads from the store and the derived state, writes
    through the :class:`~memlane.writes.BankWrite` it is given."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        derived: DerivedState,
        embedders: BankEmbedders,
        extractor: Extractor,
    ) -> None:
        """``embedders`` gives each bank the embedder of its vectors (memlane/banks.py)."""
        self.settings = settings
        self.store = store
        self.derived = derived
        self.graph = derived.graph
        # Semantic-link neighbours come from the in-process index when there is one.
        self.search = derived if derived.with_index else store
        self.embedders = embedders
        self.extractor = extractor
        # Called with (bank, units) after each batch is written (consolidation queues them).
        self.on_units: Callable[[Bank, list[MemoryUnit]], None] | None = None

    def retain(
        self,
        bank: Bank,
        conversations: Sequence[tuple[str, Sequence[Turn]]],
        write: BankWrite,
        *,
        tags: Sequence[str] = (),
        progress: Callable[[int], None] | None = None,
        extractor: Extractor | None = None,
    ) -> RetainReport:
        """Retain ``(document_id, turns)`` pairs into ``bank`` through ``write``, over what
        the bank holds (units written by id; nothing deleted): what :meth:`replace` writes
        once the documents are cleared. Ids derive from bank, document, chunk and position.
        ``extractor`` replaces the configured one for this call only."""
        with recording() as timings:
            return self._retain(
                bank, conversations, write, tags, progress, extractor or self.extractor, {}, timings
            )

    def replace(
        self,
        bank: Bank,
        conversations: Sequence[tuple[str, Sequence[Turn]]],
        write: BankWrite,
        *,
        tags: Sequence[str] = (),
        progress: Callable[[int], None] | None = None,
        extractor: Extractor | None = None,
    ) -> RetainReport:
        """Retain documents through ``write``, each replacing what the bank held under its
        id: the rule of every retain path (memlane/retain/service.py). The documents are
        deleted first, so entity resolution and semantic links see what a bank without them
        sees and the bank ends as a fresh bank given these versions would; their units'
        vectors are kept by text, and a text the new version still has is not embedded
        again (the bank's embedder is the one that made them: BankEmbedders)."""
        with recording() as timings:
            reuse = self._clear(write, bank.bank_id, list(dict.fromkeys(doc for doc, _ in conversations)))
            return self._retain(
                bank, conversations, write, tags, progress, extractor or self.extractor, reuse, timings
            )

    def _clear(self, write: BankWrite, bank_id: str, documents: Sequence[str]) -> dict[str, np.ndarray]:
        """Delete ``documents`` from the bank; returns their units' vectors by text. An empty
        bank (a backfill's, with many documents) costs two counts, not reads per document."""
        with stage("delete"):  # what deleting the old versions cost, even when there were none
            if not self.store.count_units(bank_id) and not self.store.count_chunks(bank_id):
                return {}
        vectors: dict[str, np.ndarray] = {}
        for doc in documents:
            with stage("reuse_read"):
                ids = self.store.list_unit_ids(bank_id, UnitFilter(document_id=doc, only_valid=False))
                for unit in self.store.get_units(bank_id, ids, with_embedding=True) if ids else ():
                    vectors[unit.text] = np.asarray(unit.embedding, dtype=np.float32)
            write.delete_document(doc)  # also when it held no units: a chunk can have none
        return vectors

    def _retain(
        self,
        bank: Bank,
        conversations: Sequence[tuple[str, Sequence[Turn]]],
        write: BankWrite,
        tags: Sequence[str],
        progress: Callable[[int], None] | None,
        extract: Extractor,
        reuse: Mapping[str, np.ndarray],
        timings: dict[str, float],
    ) -> RetainReport:
        t0 = time.perf_counter()
        report = RetainReport(bank_id=bank.bank_id)
        with stage("entities_read"):
            resolver = EntityResolver(bank.bank_id, self.store.list_entities(bank.bank_id))
        batches = self._batches(conversations, tags, report)
        # Extraction (spaCy) of batch i+1 runs on a thread while batch i is embedded and
        # written: the two overlap on the 2 cores instead of queueing.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlane-extract") as pool:
            current = next(batches, None)
            future = pool.submit(self._extract, extract, bank, current, timings) if current else None
            while current is not None:
                assert future is not None  # submitted whenever there is a current batch
                with stage("extract_wait"):  # what the overlap did not hide
                    facts = future.result()
                following = next(batches, None)
                future = pool.submit(self._extract, extract, bank, following, timings) if following else None
                self._batch(bank, current, facts, resolver, tags, reuse, report, timings, write)
                if progress:
                    progress(sum(len(item.turns) for item in current))
                current = following
        # the mention counts; the write times its own store write ("store_write"), counted once
        with stage("entities_write"):
            touched = resolver.entities()
            if touched:
                degrees = self.graph.entity_degrees(bank.bank_id, [e.entity_id for e in touched])
                for ent in touched:
                    ent.mention_count = degrees.get(ent.entity_id, 0)
        write.entities(touched)
        report.entities = len(touched)
        report.seconds = time.perf_counter() - t0
        report.timings_s = {k: round(v, 3) for k, v in timings.items()}
        return report

    def _batches(
        self, conversations: Sequence[tuple[str, Sequence[Turn]]], tags: Sequence[str], report: RetainReport
    ) -> Iterator[list[ChunkInput]]:
        pending: list[ChunkInput] = []
        pending_turns = 0
        for document_id, turns in conversations:
            report.documents += 1
            for item in chunk_turns(
                report.bank_id, document_id, turns, self.settings.retain.chunk_max_turns, tags
            ):
                pending.append(item)
                pending_turns += len(item.turns)
                if pending_turns >= BATCH_TURNS:
                    yield pending
                    pending, pending_turns = [], 0
        if pending:
            yield pending

    @staticmethod
    def _extract(extractor: Extractor, bank: Bank, items: list[ChunkInput], timings: dict[str, float]):
        tick = time.perf_counter()
        facts = extractor.extract(bank, items)
        # on the extraction thread: the recording's dict is handed over, not inherited
        add(timings, "extract (overlapped)", time.perf_counter() - tick)
        return facts

    def _vectors(self, bank: Bank, texts: list[str], reuse: Mapping[str, np.ndarray]) -> np.ndarray:
        """The texts' vectors by ``bank``'s embedder, in order. Only texts neither in
        ``reuse`` nor earlier in the batch are embedded: embedding is most of a retain's time,
        and a re-sent turn's text has the vector it had."""
        embedder = self.embedders.of(bank)
        missing = [t for t in dict.fromkeys(texts) if t not in reuse]
        if len(missing) == len(texts):  # nothing to reuse (the usual case): no copy
            return embedder.embed(texts)
        fresh = dict(zip(missing, embedder.embed(missing))) if missing else {}
        return np.stack([reuse[t] if t in reuse else fresh[t] for t in texts]).astype(np.float32, copy=False)

    def _batch(
        self,
        bank: Bank,
        items: list[ChunkInput],
        facts_per_chunk,
        resolver: EntityResolver,
        tags: Sequence[str],
        reuse: Mapping[str, np.ndarray],
        report: RetainReport,
        timings: dict[str, float],
        write: BankWrite,
    ) -> None:
        def lap(name: str, since: float) -> float:
            now = time.perf_counter()
            add(timings, name, now - since)
            return now

        tick = time.perf_counter()

        drafts: list[tuple[Chunk, int, Fact, list[str]]] = []
        for item, facts in zip(items, facts_per_chunk):
            chunk = item.chunk
            entity_ids = resolver.resolve_chunk([f.mentions for f in facts], [f.mentioned_at for f in facts])
            for index, (fact, eids) in enumerate(zip(facts, entity_ids)):
                drafts.append((chunk, index, fact, eids))
        tick = lap("entities", tick)

        texts = [f.text for _, _, f, _ in drafts]
        vectors = self._vectors(bank, texts, reuse)
        tick = lap("embed", tick)

        ids = [unit_id(bank.bank_id, c.document_id, c.chunk_id, i) for c, i, _, _ in drafts]
        times = [f.mentioned_at.timestamp() for _, _, f, _ in drafts]
        links: list[list[Link]] = [[] for _ in drafts]
        if self.settings.retain.semantic_link_top_k and len(drafts):
            hits = None
            if self.store.count_units(bank.bank_id):
                hits = self.search.search_dense(
                    bank.bank_id,
                    vectors,
                    self.settings.retain.semantic_link_top_k * 3,
                    fields=["mentioned_at"],
                )
            links = semantic_links(
                ids,
                vectors,
                times,
                hits,
                threshold=self.settings.retain.semantic_link_threshold,
                top_k=self.settings.retain.semantic_link_top_k,
            )
        # Causal relations point at earlier facts of the same chunk.
        first_of_chunk: dict[str, int] = {}
        for pos, (chunk, index, _, _) in enumerate(drafts):
            first_of_chunk.setdefault(chunk.chunk_id, pos - index)
        for pos, (chunk, index, fact, _) in enumerate(drafts):
            for rel in fact.causal:
                if 0 <= rel.target < index:
                    target = ids[first_of_chunk[chunk.chunk_id] + rel.target]
                    links[pos].append(
                        Link(target_id=target, type=rel.type, weight=min(1.0, max(0.0, rel.strength)))
                    )
        tick = lap("links", tick)

        units = [
            MemoryUnit(
                id=uid,
                bank_id=bank.bank_id,
                text=fact.text,
                context=fact.context,
                fact_type=fact.fact_type,
                embedding=vec.tolist(),
                occurred_start=fact.occurred_start,
                occurred_end=fact.occurred_end,
                mentioned_at=fact.mentioned_at,
                document_id=chunk.document_id,
                chunk_id=chunk.chunk_id,
                source_turns=fact.source_turns,
                entity_ids=eids,
                tags=list(tags),
                links=unit_links,
                valid_from=fact.mentioned_at,
                metadata=fact.metadata,
            )
            for uid, vec, unit_links, (chunk, _, fact, eids) in zip(ids, vectors, links, drafts)
        ]
        # the store, then this process's index and graph (timed by the write: memlane/writes.py)
        write.chunks([item.chunk for item in items])
        write.units(units)
        if self.on_units is not None:
            self.on_units(bank, units)

        report.turns += sum(len(item.turns) for item in items)
        report.chunks += len(items)
        report.units += len(units)
        report.links += sum(len(x) for x in links)
