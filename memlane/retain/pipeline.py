"""Retain: chunk -> extract -> resolve entities -> embed -> link -> write, in bounded batches.

Writes go through the caller's :class:`~memlane.writes.BankWrite` (one logical write per
retain call: one revision bump at its end, none when it wrote nothing). A document the bank
already holds is compared with what it holds first (memlane/retain/plan.py): what did not
change is neither extracted, embedded nor written again, and keeps its state (validity,
supersessions, the metadata resolution wrote, links, entities, the tree over it); what
changed or went is deleted first, so the delete hooks see only that, and written again fresh.
What the call leaves out of date in a consolidated bank (the tree's sessions it touched, the
facts whose resolution may change) is removed from the tree and counted in the report's
``stale``, for ``memlane consolidate``.

Write order per batch: chunks, then the entity records its memories mention, then the memories
(the store of record, then the derived graph). A memory is never stored before the entities it
names, and an entity's mention count is the graph's count when the call began plus what the call
wrote (:class:`~memlane.retain.entities.MentionCounts`); a count the graph does not bear out (a
retain killed between the two writes) is written again by the next retain of the bank, so a
retain interrupted anywhere and run again converges to the same state.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Collection, Iterator, Mapping, Sequence

import numpy as np

from memlane.derived import DerivedState
from memlane.facts.resolver import facts_of
from memlane.ids import unit_id
from memlane.interfaces import VectorStore
from memlane.records import Bank, Link, MemoryUnit, Turn
from memlane.retain.chunking import ChunkInput, chunk_turns
from memlane.retain.entities import EntityResolver, MentionCounts
from memlane.retain.facts import Extractor, Fact
from memlane.retain.known import Ahead, Known
from memlane.retain.plan import INPUT, Held, Plan, compare, split, stamp
from memlane.retain.relink import Linker
from memlane.retain.report import RetainReport
from memlane.settings import Settings
from memlane.timings import add, recording, stage
from memlane.tree.invariants import outdated_nodes
from memlane.tree.windows import day_key, week_key

if TYPE_CHECKING:
    from memlane.banks import BankEmbedders
    from memlane.writes import BankWrite

# Turns per batch: small enough that extracting the next batch on a thread overlaps embedding
# the current one (torch releases the GIL), large enough that the embedder's length-sorted
# batches pad little: the LoCoMo backfill on 2 cores ran at 116 turns/s with 128, 123 with 256
# and 124 with 512 (Nov 2026).
BATCH_TURNS = 256
# Extractors cheap enough to run before the plan says what needs extracting (a call of one
# batch: a request): the rules take ~13 ms of a peer-workload request, hidden behind its store
# reads; what turns out unchanged was extracted for nothing.
AHEAD = frozenset({"rules"})


@dataclass
class _Call:
    """One replace call's state across its batches."""

    bank: Bank
    write: BankWrite
    plan: Plan
    fps: dict[str, str]  # chunk id -> the fingerprint of its input
    by: str  # the extractor's name, stamped with the fingerprint
    tags: Sequence[str]
    reuse: Mapping[str, np.ndarray]
    report: RetainReport
    timings: dict[str, float]
    written: list[MemoryUnit] = field(default_factory=list)
    # memories of the bank that may link to written ones: {memory: {written memory: cosine}}
    later: dict[str, dict[str, float]] = field(default_factory=dict)


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
        linker: Linker,
    ) -> None:
        """``embedders`` gives each bank the embedder of its vectors (memlane/banks.py);
        ``linker`` chooses and keeps semantic links (memlane/retain/relink.py)."""
        self.settings = settings
        self.store = store
        self.derived = derived
        self.graph = derived.graph
        self.embedders = embedders
        self.extractor = extractor
        self.linker = linker
        # Called with (bank, units) after each batch is written (consolidation queues them).
        self.on_units: Callable[[Bank, list[MemoryUnit]], None] | None = None

    def replace(
        self,
        bank: Bank,
        conversations: Sequence[tuple[str, Sequence[Turn]]],
        write: BankWrite,
        *,
        tags: Sequence[str] = (),
        progress: Callable[[int], None] | None = None,
        extractor: Extractor | None = None,
        accept: Collection[str] = (),
    ) -> RetainReport:
        """Retain documents through ``write``, each replacing what the bank held under its
        id: the rule of every retain path (memlane/retain/service.py). The bank ends as a
        fresh bank given these versions would (the derived state consolidation writes aside,
        which the report's ``stale`` counts), and writes only what changed (see the module).
        Ids derive from bank, document, chunk and position. ``extractor`` replaces the
        configured one for this call only; memories stamped by an extractor named in
        ``accept`` (the deferred LLM's, when this call writes the rules' episode) count as
        current too."""
        extract = extractor or self.extractor
        with recording() as timings, ThreadPoolExecutor(1, thread_name_prefix="memlane-ahead") as ahead:
            t0 = time.perf_counter()
            report = RetainReport(bank_id=bank.bank_id)
            items = self._chunks(bank.bank_id, conversations, tags, report)
            ids = [item.chunk.chunk_id for item in items]
            if (
                extract.name in AHEAD
                and sum(len(i.turns) for i in items) <= BATCH_TURNS
                and len(set(ids)) == len(ids)
            ):
                extract = Ahead(ahead.submit(self._extract, extract, bank, items, timings), items, extract)
            with stage("held_read"):
                held = Held.read(self.store, bank.bank_id, list(dict.fromkeys(d for d, _ in conversations)))
            plan, fps = split(bank, items, held, {extract.name, *accept})
            known = self._compare(bank, plan, held, fps, extract, tags)
            report.unchanged = plan.kept
            if progress and plan.unchanged:
                progress(sum(len(item.turns) for item in plan.unchanged))
            # the net removal first: entity resolution and links then see the bank without it
            write.units(plan.restamped)
            removed = [held.units[i] for i in dict.fromkeys(plan.remove) if i in held.units]
            with stage("delete"):  # what deleting what changed or went cost, even when nothing
                if removed:
                    write.delete_units([u.id for u in removed])
                if plan.gone_chunks:
                    write.delete_chunks(plan.gone_chunks)
            report.removed = len(removed)
            reuse = {
                u.text: np.asarray(u.embedding, dtype=np.float32) for u in held.units.values() if u.embedding
            }
            call = _Call(bank, write, plan, fps, extract.name, tags, reuse, report, timings)
            self._retain(call, progress, Known(known, extract))
            with stage("relink"):
                report.relinked = self.linker.gain(write, call.later)
            with stage("outdated"):
                self._outdated(call, held, removed, items)
            report.seconds = time.perf_counter() - t0
            report.timings_s = {k: round(v, 3) for k, v in timings.items()}
            return report

    def _chunks(
        self, bank_id: str, conversations: Sequence[tuple[str, Sequence[Turn]]], tags: Sequence[str], report
    ) -> list[ChunkInput]:
        items: list[ChunkInput] = []
        for document_id, turns in conversations:
            report.documents += 1
            report.turns += len(turns)
            items.extend(chunk_turns(bank_id, document_id, turns, self.settings.retain.chunk_max_turns, tags))
        return items

    @staticmethod
    def _compare(
        bank: Bank, plan: Plan, held: Held, fps: dict[str, str], extract: Extractor, tags: Sequence[str]
    ) -> dict[str, list[Fact]]:
        """Extract the chunks the bank held that changed, and compare their facts with the
        memories it held (memlane/retain/plan.py). Returns their facts by chunk id."""
        again = [item for item in plan.fresh if held.by_chunk.get(item.chunk.chunk_id)]
        if not again:
            return {}
        with stage("extract_held"):
            facts = extract.extract(bank, again)
        for item, found in zip(again, facts):
            compare(plan, bank, item, found, held, stamp(extract.name, fps[item.chunk.chunk_id]), tags)
        return {item.chunk.chunk_id: found for item, found in zip(again, facts)}

    def _outdated(self, call: _Call, held: Held, removed: list[MemoryUnit], items: list[ChunkInput]) -> None:
        """In a consolidated bank (it has a tree): remove the tree nodes of the sessions the
        call touched and their ancestors (none outdated stays), and count what it left for
        consolidation. A bank never consolidated has nothing out of date."""
        touched = removed + call.written
        if not touched:
            return
        nodes = self.store.list_tree_nodes(call.bank.bank_id)
        if not nodes:
            return
        session_of = {c.chunk_id: c.session_id for c in held.chunks.values()}
        session_of.update({item.chunk.chunk_id: item.chunk.session_id for item in items})

        def session(u: MemoryUnit) -> str | None:
            return f"{u.document_id}|{session_of[u.chunk_id]}" if u.chunk_id in session_of else None

        sessions = {s for u in touched if (s := session(u)) is not None}
        # the day and week a touched session now starts in (a new session's too: its day,
        # week and the profile gain a child) and the profile
        gone = {u.id for u in removed}
        starts: dict[str, datetime] = {}
        for u in [*(u for u in held.units.values() if u.id not in gone), *call.written]:
            if (s := session(u)) in sessions:
                starts[s] = min(starts.get(s, u.mentioned_at), u.mentioned_at)
        windows = {"profile", *(k for at in starts.values() for k in (day_key(at), week_key(day_key(at))))}
        call.write.tree([], outdated_nodes(nodes, sessions=sessions, windows=windows))
        call.report.stale["tree_sessions"] = len(sessions)
        facts = self.settings.facts
        if facts.resolve != "off":
            call.report.stale["facts"] = len(
                {
                    u.id
                    for u in touched
                    if u.superseded_by or u.metadata.get("engram") or facts_of(u, rules=facts.slots)
                }
            )

    def _retain(self, call: _Call, progress: Callable[[int], None] | None, extract: Extractor) -> None:
        bank, timings = call.bank, call.timings
        with stage("entities_read"):
            existing = self.store.list_entities(bank.bank_id)
            resolver = EntityResolver(bank.bank_id, existing)
            degrees = self.graph.entity_degrees(bank.bank_id, [e.entity_id for e in existing])
            mentions = MentionCounts(existing, degrees)
        batches = self._batches(call.plan.fresh)
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
                self._batch(call, current, facts, resolver, mentions)
                if progress:
                    progress(sum(len(item.turns) for item in current))
                current = following
        # counts an earlier retain left that the graph does not bear out (it was killed between
        # writing an entity and the memories that mention it): written as the graph has them
        with stage("entities_write"):
            fixed = resolver.entities(mentions.stale())
            for ent in fixed:
                ent.mention_count = mentions.count(ent.entity_id)
        call.write.entities(fixed)
        call.report.entities = len(mentions.written)

    @staticmethod
    def _batches(items: Sequence[ChunkInput]) -> Iterator[list[ChunkInput]]:
        pending: list[ChunkInput] = []
        pending_turns = 0
        for item in items:
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
        call: _Call,
        items: list[ChunkInput],
        facts_per_chunk,
        resolver: EntityResolver,
        mentions: MentionCounts,
    ) -> None:
        timings, bank, report = call.timings, call.bank, call.report

        def lap(name: str, since: float) -> float:
            now = time.perf_counter()
            add(timings, name, now - since)
            return now

        tick = time.perf_counter()
        # the facts to write: all of a new chunk's, those that changed of a chunk held before
        drafts: list[tuple[ChunkInput, int, Fact, list[str]]] = []
        for item, facts in zip(items, facts_per_chunk):
            keep = call.plan.keep.get(item.chunk.chunk_id, set())
            chosen = [(i, f) for i, f in enumerate(facts) if i not in keep]
            entity_ids = resolver.resolve_chunk(
                [f.mentions for _, f in chosen], [f.mentioned_at for _, f in chosen]
            )
            drafts.extend((item, i, f, eids) for (i, f), eids in zip(chosen, entity_ids))
        tick = lap("entities", tick)

        chunks = [item.chunk for item in items if call.plan.to_write(item.chunk)]
        call.write.chunks(chunks)  # timed as the write's own "store_write"
        report.chunks += len(chunks)
        # the entities before the memories that name them (see the module); timed by the write
        named = resolver.entities(sorted(mentions.add([eids for *_, eids in drafts])))
        for ent in named:
            ent.mention_count = mentions.count(ent.entity_id)
        call.write.entities(named)
        if not drafts:
            return
        tick = time.perf_counter()
        texts = [f.text for _, _, f, _ in drafts]
        vectors = self._vectors(bank, texts, call.reuse)
        tick = lap("embed", tick)

        ids = [unit_id(bank.bank_id, it.chunk.document_id, it.chunk.chunk_id, i) for it, i, _, _ in drafts]
        times = [f.mentioned_at.timestamp() for _, _, f, _ in drafts]
        hits = self.linker.neighbours(bank.bank_id, vectors, times)
        links: list[list[Link]] = self.linker.links(ids, vectors, times, hits)
        for uid, gained in self.linker.later(ids, times, hits).items():
            call.later.setdefault(uid, {}).update(gained)
        # Causal relations point at earlier facts of the same chunk.
        for pos, (item, index, fact, _) in enumerate(drafts):
            chunk = item.chunk
            for rel in fact.causal:
                if 0 <= rel.target < index:
                    target = unit_id(bank.bank_id, chunk.document_id, chunk.chunk_id, rel.target)
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
                document_id=item.chunk.document_id,
                chunk_id=item.chunk.chunk_id,
                source_turns=fact.source_turns,
                entity_ids=eids,
                tags=list(call.tags),
                links=unit_links,
                valid_from=fact.mentioned_at,
                metadata={**fact.metadata, INPUT: stamp(call.by, call.fps[item.chunk.chunk_id])},
            )
            for uid, vec, unit_links, (item, _, fact, eids) in zip(ids, vectors, links, drafts)
        ]
        # the store, then this process's index and graph (timed by the write: memlane/writes.py)
        call.write.units(units)
        call.written.extend(units)
        if self.on_units is not None:
            self.on_units(bank, units)
        report.units += len(units)
        report.links += sum(len(x) for x in links)
