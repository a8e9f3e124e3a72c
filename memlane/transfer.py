"""Bank export and import: a bank as JSON Lines, and back.

The format (``format`` 2; format 1 files, which have no tree nodes, are read too) is one JSON
object per line, each with a ``kind``:
1. a header, always first::

       {"kind": "memlane-bank", "format": 2, "bank": {...Bank fields...},
        "counts": {"chunks": n, "entities": n, "units": n, "tree_nodes": n}, "vectors": false,
        "embedder": "<model name>", "dim": 384}

2. ``{"kind": "chunk", ...Chunk fields...}`` for every source chunk, in id order;
3. ``{"kind": "entity", ...Entity fields...}`` for every entity, in id order;
4. ``{"kind": "unit", ...MemoryUnit fields...}`` for every memory unit, in id order: world
   and experience facts, opinions and observations alike (they are units with those fact
   types), with their links, opinion history, source turns, entity ids and metadata. The
   ``embedding`` field is present only when the export was asked for vectors.
5. ``{"kind": "tree_node", ...TreeNode fields...}`` for every node of the bank's temporal tree
   (memlane/tree), by level then start: its window, interval, text, children, source turns
   and the signature that lets a later consolidation skip it; ``embedding`` as for units.

Times are ISO 8601 strings in UTC with microseconds, exactly as the store keeps them (each
record is the model's own ``model_dump(mode="json")``), so a round trip reproduces the bank
exactly: ids, fields, counts, and therefore recall results.

A kind this importer does not know (``profile`` is reserved) is an error naming the line, so
a file from a newer writer is never half understood.

Tree nodes keep their ids, which derive from the bank id: a bank imported under another name
(``bank_id=``) holds the source's node ids until its next consolidation replaces them. The
tree is checked (:func:`memlane.tree.invariants.tree_problems`) before anything is written.

Import is idempotent (records keep their ids and are upserts; units the file does not hold
stay). Without vectors, or with another embedder's, texts are re-embedded and the report says
so. The input is streamed twice: to validate every record (nothing written when any is bad),
then to write them in batches through the bank writer (one revision bump in all).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence

from pydantic import BaseModel, ValidationError

from memlane.banks import bank_embedder
from memlane.errors import BankNotFound, InvalidInput
from memlane.ingest.common import json_problem
from memlane.models.embedder import embedder_names
from memlane.models.model_path import model_name
from memlane.records import Bank, Chunk, Entity, MemoryUnit, TreeNode, check_bank_id

if TYPE_CHECKING:
    from memlane.interfaces import Embedder
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore
    from memlane.writes import BankWriter


class Engine(Protocol):
    """What export and import need of an engine (a :class:`memlane.engine.Memory`)."""

    settings: Settings

    @property
    def store(self) -> MilvusStore: ...

    @property
    def writer(self) -> BankWriter: ...

    @property
    def embedder(self) -> Embedder: ...


FORMAT = 2
READ_FORMATS = (1, 2)  # format 1: before tree nodes
HEADER_KIND = "memlane-bank"
RECORD_KINDS: dict[str, type[BaseModel]] = {
    "chunk": Chunk,
    "entity": Entity,
    "unit": MemoryUnit,
    "tree_node": TreeNode,
}
# Kinds with vectors (``embedding`` with --vectors, re-embedded from ``text`` otherwise).
EMBEDDED_KINDS = ("unit", "tree_node")
# Kinds a later format will carry; named so the error says so.
RESERVED_KINDS = ("profile",)
BATCH = 1000

# What import_bank reads: a file (read twice, streaming), or a sequence of lines or records.
Source = Path | Sequence[str | bytes | dict[str, Any]]


def export_bank(memory: Engine, bank_id: str, *, vectors: bool = False) -> Iterator[dict[str, Any]]:
    """The bank ``bank_id`` as JSON-able records: the header, then its chunks, entities and
    units (see the module docstring). ``vectors`` adds each unit's embedding. Raises
    BankNotFound for an unknown bank before yielding anything. Units written while the export
    runs may be missed (the ids are listed once)."""
    store = memory.store
    try:
        check_bank_id(bank_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    bank = store.get_bank(bank_id)
    if bank is None:
        raise BankNotFound(bank_id)
    entities = store.list_entities(bank_id)
    nodes = store.list_tree_nodes(bank_id, with_embedding=vectors)
    # The vectors in the file are the bank's own: the embedder the bank records.
    embedder, dim = bank_embedder(bank)
    yield {
        "kind": HEADER_KIND,
        "format": FORMAT,
        "bank": bank.model_dump(mode="json"),
        "counts": {
            "chunks": store.count_chunks(bank_id),
            "entities": len(entities),
            "units": store.count_units(bank_id),
            "tree_nodes": len(nodes),
        },
        "vectors": bool(vectors),
        "embedder": embedder,
        "dim": dim,
    }
    for chunks in store.iter_chunks(bank_id, batch_size=BATCH):
        for ch in chunks:
            yield {"kind": "chunk", **ch.model_dump(mode="json")}
    for e in entities:
        yield {"kind": "entity", **e.model_dump(mode="json")}
    for units in store.iter_units(bank_id, with_embedding=vectors, batch_size=BATCH):
        for u in units:
            # the slot signals are derived (the import's write computes them again)
            record = {"kind": "unit", **u.model_dump(mode="json", exclude={"embedding", "slots"})}
            if vectors:
                record["embedding"] = u.embedding
            yield record
    for n in nodes:
        # source_turns above the sessions are derived when the tree is read (the store keeps
        # a session's own only), so they are exported as read and ignored on import's write.
        record = {"kind": "tree_node", **n.model_dump(mode="json", exclude={"embedding"})}
        if vectors:
            record["embedding"] = n.embedding
        yield record


def export_lines(memory: Engine, bank_id: str, *, vectors: bool = False) -> Iterator[str]:
    """:func:`export_bank` as JSON Lines (each string ends with a newline)."""
    for record in export_bank(memory, bank_id, vectors=vectors):
        yield json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


class _Header:
    """The validated header of an import."""

    def __init__(self, raw: dict[str, Any], target: str | None, memory: Engine) -> None:
        def bad(problem: str) -> InvalidInput:
            return InvalidInput(f"line {raw_line}: header: {problem}")

        raw_line = raw.pop("__line__")
        if raw.get("kind") != HEADER_KIND:
            raise bad(f"the first record must be the {HEADER_KIND!r} header, got kind {raw.get('kind')!r}")
        if raw.get("format") not in READ_FORMATS:
            raise bad(
                f"format {raw.get('format')!r} is not supported (this version reads formats "
                f"{', '.join(map(str, READ_FORMATS))})"
            )
        self.format = raw["format"]
        unknown = set(raw) - {"kind", "format", "bank", "counts", "vectors", "embedder", "dim"}
        if unknown:
            raise bad(f"unknown fields {sorted(unknown)}")
        bank = raw.get("bank")
        if not isinstance(bank, dict):
            raise bad("'bank' must be an object with the bank's fields")
        self.source = bank.get("bank_id")
        if not isinstance(self.source, str):
            raise bad("'bank.bank_id' must be a string")
        self.target = target or self.source
        try:
            check_bank_id(self.target)
            # The imported bank records the embedder of its vectors (below).
            fields = {**bank, "bank_id": self.target}
            self.bank = Bank.model_validate({**fields, "reembedding": ""})
        except ValidationError as exc:
            raise bad(f"bank: {InvalidInput.from_validation(exc)}") from None
        except ValueError as exc:
            raise bad(str(exc)) from None
        counts = raw.get("counts")
        # format 1 has no tree nodes: its counts name none
        counted = RECORD_KINDS_PLURAL if self.format >= 2 else RECORD_KINDS_PLURAL[:3]
        if not isinstance(counts, dict) or not all(
            isinstance(counts.get(k), int) and not isinstance(counts[k], bool) and counts[k] >= 0
            for k in counted
        ):
            raise bad(f"'counts' must give non-negative integers for {', '.join(counted)}")
        self.counts = {k: int(counts.get(k, 0)) for k in RECORD_KINDS_PLURAL}
        vectors, dim, embedder = raw.get("vectors", False), raw.get("dim"), raw.get("embedder")
        if not isinstance(vectors, bool):
            raise bad("'vectors' must be true or false")
        if vectors and (not isinstance(dim, int) or dim <= 0):
            raise bad("'dim' must be a positive integer when 'vectors' is true")
        dim_here = memory.settings.models.embedding_dim
        self.dim = dim_here
        self.vectors = vectors
        self.reembed_reason: str | None = None
        # Files written before banks recorded their embedder name the MiniLM setting itself.
        source = model_name(embedder) if isinstance(embedder, str) else embedder
        if not vectors:
            self.reembed_reason = "the file has no vectors"
        elif dim != dim_here or source not in embedder_names(memory.settings.models):
            self.reembed_reason = (
                f"the file's vectors are {source!r} ({dim}-d), not an embedder this engine can "
                f"load with {dim_here}-d vectors"
            )
        self.use_vectors = self.reembed_reason is None
        # Vectors of an embedder this engine has: the bank keeps it (`memlane reembed` moves
        # it); else its texts are embedded here by the engine's default embedder.
        name = str(source) if self.use_vectors else memory.embedder.name
        self.bank = self.bank.model_copy(update={"embedder": name, "embedding_dim": dim_here})


RECORD_KINDS_PLURAL = ("chunks", "entities", "units", "tree_nodes")


def _records(source: Source) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) for each non-blank line or record of ``source``."""

    def parse(n: int, line: str | bytes | dict[str, Any]) -> dict[str, Any] | None:
        if isinstance(line, dict):
            return dict(line)
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInput(f"line {n}: not UTF-8 text") from None
        if not line.strip():
            return None
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"line {n}: not JSON ({json_problem(exc)})") from None
        if not isinstance(obj, dict):
            raise InvalidInput(f"line {n}: a record must be a JSON object, got {type(obj).__name__}")
        return obj

    if isinstance(source, (str, bytes)):
        raise TypeError("import_bank takes a Path or a sequence of lines, not one string")
    if isinstance(source, Path):
        with source.open("rb") as f:
            for n, raw in enumerate(f, 1):
                obj = parse(n, raw)
                if obj is not None:
                    yield n, obj
        return
    for n, item in enumerate(source, 1):
        obj = parse(n, item)
        if obj is not None:
            yield n, obj


def _model(n: int, raw: dict[str, Any], header: _Header) -> tuple[str, BaseModel]:
    """Validate one record after the header: (kind, model with the target bank id)."""
    kind = raw.pop("kind", None)
    if kind == HEADER_KIND:
        raise InvalidInput(f"line {n}: a second {HEADER_KIND!r} header (one bank per file)")
    if kind in RESERVED_KINDS:
        raise InvalidInput(
            f"line {n}: record kind {kind!r} is not supported by this version of memlane "
            f"(format {FORMAT} holds chunk, entity, unit and tree_node records)"
        )
    model = RECORD_KINDS.get(kind) if isinstance(kind, str) else None
    if model is None or (kind == "tree_node" and header.format < 2):
        expected = "chunk, entity, unit or tree_node" if header.format >= 2 else "chunk, entity or unit"
        raise InvalidInput(
            f"line {n}: unknown record kind {kind!r} (format {header.format} holds {expected})"
        )
    owner = raw.get("bank_id")
    if owner != header.source:
        raise InvalidInput(
            f"line {n}: {kind} record belongs to bank {owner!r}, not to the file's bank {header.source!r}"
        )
    if kind in EMBEDDED_KINDS:
        if not header.use_vectors:
            raw.pop("embedding", None)  # re-embedded
        elif not isinstance(raw.get("embedding"), list) or len(raw["embedding"]) != header.dim:
            raise InvalidInput(
                f"line {n}: {kind} {raw.get('id')!r} needs an embedding of {header.dim} numbers "
                "(the header says the file has vectors)"
            )
    try:
        return kind, model.model_validate({**raw, "bank_id": header.target})
    except ValidationError as exc:
        raise InvalidInput(f"line {n}: {kind}: {InvalidInput.from_validation(exc)}") from None


def _header(records: Iterator[tuple[int, dict[str, Any]]], bank_id: str | None, memory: Engine) -> _Header:
    first = next(records, None)
    if first is None:
        raise InvalidInput(f"line 1: empty input: expected the {HEADER_KIND!r} header")
    n, raw = first
    return _Header({**raw, "__line__": n}, bank_id, memory)


def import_bank(memory: Engine, source: Source, *, bank_id: str | None = None) -> dict[str, Any]:
    """Import a bank exported by :func:`export_bank` into ``memory``, as ``bank_id`` (default:
    the file's bank id). ``source``: a JSON Lines file, or a sequence of lines or records;
    it is read twice. Raises InvalidInput naming the line and the problem, before anything is
    written, for input that is not JSON, lacks the header, has another format version, holds
    an unknown record kind, a record of another bank, a bad field, or fewer or more records
    than the header counts. Returns what was written and whether vectors were re-embedded."""
    start = time.perf_counter()
    if bank_id is not None:
        try:
            check_bank_id(bank_id)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    # pass 1: validate everything, write nothing
    records = _records(source)
    header = _header(records, bank_id, memory)
    seen = dict.fromkeys(RECORD_KINDS_PLURAL, 0)
    last = 1
    # the tree is checked whole at the end: when each unit was said, and each node's line
    said: dict[str, Any] = {}
    nodes: dict[str, tuple[int, TreeNode]] = {}
    for n, raw in records:
        kind, model = _model(n, raw, header)
        seen[_plural(kind)] += 1
        last = n
        if isinstance(model, MemoryUnit):
            said[model.id] = model.mentioned_at
        elif isinstance(model, TreeNode):
            if model.id in nodes:
                raise InvalidInput(f"line {n}: tree node {model.id!r} is also on line {nodes[model.id][0]}")
            nodes[model.id] = (n, model)
    for k in RECORD_KINDS_PLURAL:
        if seen[k] != header.counts[k]:
            raise InvalidInput(
                f"line {last}: the header counts {header.counts[k]} {k} but the input holds {seen[k]} "
                "(a truncated or edited file?)"
            )
    if nodes:
        _check_tree(nodes, said)

    # pass 2: write, in batches, as one logical write
    memory.writer.put_bank(header.bank)
    written = dict.fromkeys(RECORD_KINDS_PLURAL, 0)
    pending: dict[str, list[Any]] = {k: [] for k in RECORD_KINDS_PLURAL}
    embedded = embedded_nodes = 0  # unit texts, tree node texts
    with memory.writer.write(header.target) as w:

        def flush(kind: str) -> None:
            nonlocal embedded, embedded_nodes
            batch = pending[kind]
            if not batch:
                return
            if kind == "chunks":
                w.chunks(batch)
            elif kind == "entities":
                w.entities(batch)
            elif kind == "tree_nodes":
                if not header.use_vectors:
                    vectors = memory.embedder.embed([t.text for t in batch])
                    batch = [t.model_copy(update={"embedding": v.tolist()}) for t, v in zip(batch, vectors)]
                    embedded_nodes += len(batch)
                w.tree(batch)
            else:
                if not header.use_vectors:
                    vectors = memory.embedder.embed([u.text for u in batch])
                    batch = [u.model_copy(update={"embedding": v.tolist()}) for u, v in zip(batch, vectors)]
                    embedded += len(batch)
                w.units(batch)
            written[kind] += len(batch)
            pending[kind] = []

        records = _records(source)
        next(records)  # the header, validated above
        for n, raw in records:
            kind, model = _model(n, raw, header)
            plural = _plural(kind)
            pending[plural].append(model)
            if len(pending[plural]) >= BATCH:
                flush(plural)
        for k in RECORD_KINDS_PLURAL:
            flush(k)
    return {
        "bank_id": header.target,
        "source_bank_id": header.source,
        **written,
        "vectors": "imported" if header.use_vectors else "re-embedded",
        "reembedded": embedded,
        "reembedded_tree_nodes": embedded_nodes,
        "reembed_reason": header.reembed_reason,
        "seconds": round(time.perf_counter() - start, 3),
    }


def _plural(kind: str) -> str:
    return {"chunk": "chunks", "entity": "entities", "unit": "units", "tree_node": "tree_nodes"}[kind]


def _check_tree(nodes: dict[str, tuple[int, TreeNode]], said: dict[str, Any]) -> None:
    """Refuse a file whose tree breaks an invariant (memlane/tree/invariants.py), naming the
    line of the first node at fault. Its session nodes' children must be units of the file:
    the units already in the target bank are not the tree's (it was built over the file's)."""
    from memlane.tree.invariants import tree_problems

    problems = tree_problems((node for _, node in nodes.values()), said)
    if not problems:
        return
    first = problems[0]
    node_id = first.split(":", 1)[0]
    where = nodes[node_id][0] if node_id in nodes else max(line for line, _ in nodes.values())
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise InvalidInput(f"line {where}: tree_node: {first}{more}")
