"""What a retain changes in the documents a bank already holds: the plan of
:meth:`memlane.retain.pipeline.Retainer.replace`.

A document retained again is compared with what the bank holds of it, so that only what changed
is written again and everything else (a memory's validity and supersession pointers, the
metadata resolution and reflection wrote on it, its links and entities, the tree nodes over it)
stays as it was:

* chunk by chunk: a chunk whose memories were extracted from the same input (its turns with
  every field, the turns around it, its tags, the bank's name: :func:`fingerprint`, stamped on
  each of its memories as ``metadata["input"]`` with the extractor's name) by an extractor the
  call accepts is not extracted again, and nothing of it is written;
* memory by memory in the other chunks (extracted again): a memory the extractor writes as it
  was (text, context, type, times, source turns, the extractor's metadata, causal links) is
  kept, only its stamp and tags brought up to date; one that changed is deleted and written
  again, fresh; one the new version no longer has is deleted, and so is a chunk it no longer
  has.

The deletions are the write's net removal: the bank writer's delete hooks (the tree, the
supersessions, the observations: memlane/writes.py) see only the memories that changed or
went, never one that stays.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Collection, Sequence

from memlane.facts.slots import FACTS
from memlane.ids import unit_id
from memlane.interfaces import UnitFilter, VectorStore
from memlane.records import Bank, Chunk, Link, LinkType, MemoryUnit, utc
from memlane.retain.chunking import ChunkInput
from memlane.retain.facts import Fact

INPUT = "input"  # the metadata key of a memory's stamp: "<extractor>:<fingerprint>"
SLOT = "slot"  # the extractor's fact (memlane/facts/slots.py)
# Metadata written by others than the extractor (resolution's facts and their decisions,
# reflect's citations, the stamp): not part of what a memory says.
NOT_EXTRACTED = frozenset({"engram", "salience", FACTS, INPUT})
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def fingerprint(bank: Bank, item: ChunkInput) -> str:
    """A hash of everything an extractor reads for one chunk: the bank's name (the owner's
    facts are experience), the chunk record, its turns and the turns just before and after."""
    h = hashlib.sha256()
    parts: list[Any] = [
        bank.name,
        item.chunk.model_dump(mode="json"),
        [t.model_dump(mode="json") for t in item.turns],
        None if item.before is None else item.before.model_dump(mode="json"),
        None if item.after is None else item.after.model_dump(mode="json"),
    ]
    for part in parts:
        h.update(json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\x1e")
    return h.hexdigest()[:32]


@dataclass
class Held:
    """What the bank holds of the documents a retain names: their memories (with vectors) by
    id, and their chunks by id."""

    units: dict[str, MemoryUnit] = field(default_factory=dict)
    chunks: dict[str, Chunk] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_chunk: dict[str, list[MemoryUnit]] = defaultdict(list)
        for u in self.units.values():
            self.by_chunk[u.chunk_id].append(u)

    @classmethod
    def read(cls, store: VectorStore, bank_id: str, documents: Sequence[str]) -> Held:
        """Read the documents' memories and chunks: two queries a document, after two counts
        that end it early in an empty bank when there are several (a backfill's call). One
        document (a request) goes straight to its two: without the counts the read took 11.6
        ms a request instead of 15.3 (``benchmarks/retain_profile.py --modes service``)."""
        if len(documents) > 1 and not store.count_units(bank_id) and not store.count_chunks(bank_id):
            return cls()
        units: dict[str, MemoryUnit] = {}
        chunks: dict[str, Chunk] = {}
        for doc in documents:
            ids = store.list_unit_ids(bank_id, UnitFilter(document_id=doc, only_valid=False))
            for u in store.get_units(bank_id, ids, with_embedding=True) if ids else ():
                units[u.id] = u
            for c in store.document_chunks(bank_id, doc):
                chunks[c.chunk_id] = c
        return cls(units, chunks)


@dataclass
class Plan:
    """What a retain writes of the documents it names (see the module)."""

    held_chunks: dict[str, Chunk]  # the chunk records the bank holds of them
    fresh: list[ChunkInput] = field(default_factory=list)  # chunks to extract and write
    unchanged: list[ChunkInput] = field(default_factory=list)  # chunks kept as they are
    # per chunk to write: the indexes of facts kept as the bank holds them
    keep: dict[str, set[int]] = field(default_factory=dict)
    restamped: list[MemoryUnit] = field(default_factory=list)  # kept, stamp or tags updated
    remove: list[str] = field(default_factory=list)  # memories that changed or went
    gone_chunks: list[str] = field(default_factory=list)
    kept: int = 0  # memories kept as they were

    def to_write(self, chunk: Chunk) -> bool:
        """Whether ``chunk``'s record is new or changed (else the bank holds it as it is)."""
        return self.held_chunks.get(chunk.chunk_id) != chunk


def stamp(by: str, fp: str) -> str:
    return f"{by}:{fp}"


def _stamped(unit: MemoryUnit, fp: str, accepted: Collection[str]) -> bool:
    by, _, was = str(unit.metadata.get(INPUT) or "").rpartition(":")
    return was == fp and by in accepted


def split(
    bank: Bank, items: Sequence[ChunkInput], held: Held, accepted: Collection[str]
) -> tuple[Plan, dict[str, str]]:
    """The plan's first half, before any extraction: which chunks are unchanged (same record,
    memories stamped with the same input by an accepted extractor) and which chunks and
    memories the new versions no longer have. Returns the plan and each chunk's fingerprint."""
    plan = Plan(held.chunks)
    fps: dict[str, str] = {}
    new_chunks = set()
    for item in items:
        cid = item.chunk.chunk_id
        new_chunks.add(cid)
        fps[cid] = fp = fingerprint(bank, item)
        units = held.by_chunk.get(cid, [])
        if held.chunks.get(cid) == item.chunk and units and all(_stamped(u, fp, accepted) for u in units):
            plan.unchanged.append(item)
            plan.kept += len(units)
        else:
            plan.fresh.append(item)
    plan.gone_chunks = sorted(c for c in held.chunks if c not in new_chunks)
    plan.remove = sorted(u.id for u in held.units.values() if u.chunk_id not in new_chunks)
    return plan, fps


def compare(
    plan: Plan,
    bank: Bank,
    item: ChunkInput,
    facts: Sequence[Fact],
    held: Held,
    new_stamp: str,
    tags: Sequence[str],
) -> None:
    """The plan's second half for one extracted chunk the bank held: which of its memories
    stay (by id and content), which changed or went."""
    chunk = item.chunk
    ids = [unit_id(bank.bank_id, chunk.document_id, chunk.chunk_id, i) for i in range(len(facts))]
    held_here = {u.id: u for u in held.by_chunk.get(chunk.chunk_id, [])}
    keep: set[int] = set()
    for i, (uid, fact) in enumerate(zip(ids, facts)):
        old = held_here.get(uid)
        if old is None:
            continue
        # a memory consolidated before resolution kept the extractor's slot beside its facts
        # holds it only folded into them: compared without it
        with_slot = SLOT in old.metadata or FACTS not in old.metadata
        if said(old) != said_by(fact, chunk, ids, i, with_slot=with_slot):
            plan.remove.append(uid)
            continue
        keep.add(i)
        plan.kept += 1
        if old.metadata.get(INPUT) != new_stamp or old.tags != list(tags):
            plan.restamped.append(
                old.model_copy(update={"metadata": {**old.metadata, INPUT: new_stamp}, "tags": list(tags)})
            )
    plan.remove.extend(sorted(set(held_here) - set(ids)))
    if keep:
        plan.keep[chunk.chunk_id] = keep


def said(unit: MemoryUnit) -> tuple:
    """What a stored memory says, as its extractor wrote it."""
    return _said(
        unit.text,
        unit.context,
        unit.fact_type.value,
        unit.occurred_start,
        unit.occurred_end,
        unit.mentioned_at,
        unit.source_turns,
        unit.metadata,
        [x for x in unit.links if x.type != LinkType.semantic],
    )


def said_by(fact: Fact, chunk: Chunk, ids: Sequence[str], index: int, *, with_slot: bool = True) -> tuple:
    """What the memory of ``fact`` (the ``index``-th of its chunk, whose memory ids are
    ``ids``) would say: as :func:`said` reads a stored one (without the extractor's slot
    unless ``with_slot``)."""
    causal = [
        Link(target_id=ids[rel.target], type=rel.type, weight=min(1.0, max(0.0, rel.strength)))
        for rel in fact.causal
        if 0 <= rel.target < index
    ]
    return _said(
        fact.text,
        fact.context,
        fact.fact_type.value,
        fact.occurred_start,
        fact.occurred_end,
        fact.mentioned_at,
        fact.source_turns,
        fact.metadata if with_slot else {k: v for k, v in fact.metadata.items() if k != SLOT},
        causal,
    )


def _said(text, context, fact_type, start, end, mentioned, turns, metadata, links) -> tuple:
    meta = {k: v for k, v in (metadata or {}).items() if k not in NOT_EXTRACTED}
    return (
        text,
        context,
        fact_type,
        _us(start),
        _us(end),
        _us(mentioned),
        tuple(turns),
        json.dumps(meta, sort_keys=True, default=str),
        tuple(sorted((x.target_id, x.type.value, round(x.weight, 6)) for x in links)),
    )


def _us(dt: datetime | None) -> int | None:
    """A time to the microsecond (what the store keeps)."""
    return None if dt is None else (utc(dt) - EPOCH) // timedelta(microseconds=1)
