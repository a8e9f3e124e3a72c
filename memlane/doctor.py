"""The integrity checker behind ``memlane doctor``: every invariant a bank's records must
hold, checked against the store of record, and the derived index and graph checked against it.

Each check has a name (the keys of :data:`CHECKS`), and a violation is a :class:`Finding`
that names the check, says what is wrong, and lists a sample of the ids involved. Errors are
broken promises: lost or dangling data, a chain that loops, a derived state that disagrees with
the store. Warnings are states a user's own calls can legitimately produce but that are
still worth knowing about, e.g. a chunk left without memories after its memories were
deleted one by one.

What is checked:

- ``unit_chunk``: each memory that names a chunk has that chunk, in the same document.
- ``unit_document``: each memory's document exists (has chunks).
- ``orphan_chunks`` (warning): chunks no memory points at.
- ``links``: every stored link points at a memory that exists.
- ``entities``: each entity a memory names exists, and each stored entity is named by some
  memory (an unreferenced entity is left over by a delete).
- ``sources``: an observation's or opinion's source facts exist.
- ``supersession``: ``superseded_by`` points at a memory that exists, is not the memory
  itself, and following it never loops.
- ``derived``: the in-process search index and graph hold exactly the store's memory ids
  (counts and a SHA-256 of the sorted ids); checked on the state as this process holds it,
  so a stale or wrongly updated index shows.

- ``tree_children``: each tree node's children exist one level down (a session's are memory
  units of the bank).
- ``tree_containment``: each tree node's interval covers its children's (and starts before
  it ends).
- ``tree_levels``: progressive consolidation: no level of the tree holds more nodes than the
  one below it, and there is at most one profile.

- ``embedder``: the bank's vectors come from its recorded embedder (memlane/banks.py): a
  sample of its memories' texts, embedded again, match their stored vectors (cosine >=
  0.99), and no re-embed of it stopped before it finished (memlane/reembed.py).

The tree checks are :func:`memlane.tree.invariants.tree_problems`, the one place the tree's
invariants are written; a bank without a tree passes them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np

from memlane.derived import DerivedState
from memlane.interfaces import Embedder, VectorStore
from memlane.records import FactType, MemoryUnit, TreeNode

CHECKS = {
    "unit_chunk": "each memory's chunk exists, in the memory's document",
    "unit_document": "each memory's document exists (has chunks)",
    "orphan_chunks": "chunks no memory points at (warning)",
    "links": "links point at memories that exist",
    "entities": "entities named by memories exist; stored entities are named by a memory",
    "sources": "observations' and opinions' source facts exist",
    "supersession": "superseded_by points at another existing memory, with no cycle",
    "derived": "the derived index and graph hold exactly the store's memory ids",
    "tree_children": "each tree node's children exist one level down (a session's are memories)",
    "tree_containment": "each tree node's interval covers its children's",
    "tree_levels": "no tree level holds more nodes than the one below; at most one profile",
    "embedder": "a sample of the memories' vectors is the recorded embedder's; no re-embed left half done",
}

# Memories whose vectors the embedder check computes again: enough to catch a bank written by
# another model (whose vectors agree with no text's), at a fraction of a second on a CPU.
VECTOR_SAMPLE = 32
# The same model on the same text gives the same vector up to float noise (ONNX Runtime's
# batching and padding: > 0.999 measured); another model's vector of it is far below.
SAME_VECTOR = 0.99

# tree_problems' lines ("NODE: what", or a line about a level), by what they say: the check
# that reports them and the finding's message (the nodes at fault are its ids).
_TREE_PROBLEMS = (
    (
        re.compile(r"^(\S+): interval does not cover child "),
        "tree_containment",
        "{n} {tree node has|tree nodes have} an interval that does not cover a child's",
    ),
    (
        re.compile(r"^(\S+): starts after it ends$"),
        "tree_containment",
        "{n} {tree node starts after it ends|tree nodes start after they end}",
    ),
    (
        re.compile(r"^(\S+): child \S+ is not a memory unit of the bank$"),
        "tree_children",
        "{n} {session node has|session nodes have} a child that is not a memory of the bank",
    ),
    (
        re.compile(r"^(\S+): child \S+ does not exist$"),
        "tree_children",
        "{n} {tree node has|tree nodes have} a child that does not exist",
    ),
    (
        re.compile(r"^(\S+): child \S+ is level \d+, not \d+$"),
        "tree_children",
        "{n} {tree node has|tree nodes have} a child that is not one level down",
    ),
)

# A message's words in both numbers: "{one|many}", the one for a count of 1 ("{n}" the count).
_NUMBERED = re.compile(r"\{([^{}|]*)\|([^{}|]*)\}")


def _counted(message: str, n: int) -> str:
    """``message`` for ``n`` things: each ``{one|many}`` resolved, ``{n}`` filled."""
    return _NUMBERED.sub(lambda m: m.group(1 if n == 1 else 2), message).format(n=n)


# Ids listed per finding: enough to locate the problem, bounded for a million-memory bank.
SAMPLE = 10


@dataclass
class Finding:
    """One violated invariant: its check, severity, a message and a sample of the ids."""

    check: str
    severity: Literal["error", "warning"]
    message: str
    count: int
    ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "count": self.count,
            "ids": self.ids,
        }


@dataclass
class BankReport:
    """The doctor's answer for one bank."""

    bank_id: str
    counts: dict[str, int]
    findings: list[Finding]
    checksum: str

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        """No error (warnings allowed)."""
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        return {
            "bank_id": self.bank_id,
            "ok": self.ok,
            "counts": self.counts,
            "ids_sha256": self.checksum,
            "checks": list(CHECKS),
            "findings": [f.as_dict() for f in self.findings],
        }


def ids_checksum(ids: Iterable[str]) -> str:
    """SHA-256 of the sorted ids, newline-joined: equal exactly when the id sets are equal."""
    digest = hashlib.sha256()
    for uid in sorted(ids):
        digest.update(uid.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


class _Collect:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, check: str, message: str, ids: list[str], severity: Literal["error", "warning"] = "error"):
        if ids:
            ids = sorted(set(ids))
            self.findings.append(
                Finding(check, severity, _counted(message, len(ids)), len(ids), ids[:SAMPLE])
            )


def _supersession_cycles(units: dict[str, MemoryUnit]) -> list[str]:
    """Ids on a superseded_by cycle (each chain followed once: linear in the bank)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    looped: list[str] = []
    for start in units:
        path: list[str] = []
        uid: str | None = start
        while uid is not None and uid in units and state.get(uid) is None:
            state[uid] = 1
            path.append(uid)
            uid = units[uid].superseded_by
        if uid is not None and state.get(uid) == 1:  # came back to this path: a cycle
            looped.extend(path[path.index(uid) :])
        for p in path:
            state[p] = 2
    return looped


def _check_tree(out: _Collect, nodes: list[TreeNode], units: dict[str, datetime]) -> None:
    """The tree's invariants (:func:`memlane.tree.invariants.tree_problems`): one finding per
    kind of problem naming the nodes at fault; a level's count is its own finding."""
    from memlane.tree.invariants import tree_problems

    grouped: dict[int, list[str]] = {}
    for problem in tree_problems(nodes, units):
        for i, (pattern, _, _) in enumerate(_TREE_PROBLEMS):
            if match := pattern.match(problem):
                grouped.setdefault(i, []).append(match.group(1))
                break
        else:  # a count per level (progressive consolidation), or a line this table lacks
            check = (
                "tree_levels"
                if problem.startswith("level ") or "profile nodes" in problem
                else "tree_children"
            )
            out.findings.append(Finding(check, "error", problem, 1, []))
    for i, ids in sorted(grouped.items()):
        _, check, message = _TREE_PROBLEMS[i]
        out.add(check, message, ids)


def check_bank(
    store: VectorStore, derived: DerivedState | None, bank_id: str, embedder: Embedder | str | None = None
) -> BankReport:
    """Check every invariant of ``bank_id`` (raises BankNotFound for an unknown bank).

    Reads the whole bank once (units without vectors, chunks, entities): linear in its size.
    ``derived`` is the process's derived state; None skips the ``derived`` check. ``embedder``
    is the bank's recorded one (a string: why it is not at hand, a warning); None skips the
    vector sample."""
    from memlane.banks import bank_embedder
    from memlane.errors import BankNotFound

    bank = store.get_bank(bank_id)
    if bank is None:
        raise BankNotFound(bank_id)
    units: dict[str, MemoryUnit] = {}
    for batch in store.iter_units(bank_id):
        units.update((u.id, u) for u in batch)
    chunks = {c.chunk_id: c for batch in store.iter_chunks(bank_id) for c in batch}
    entities = {e.entity_id for e in store.list_entities(bank_id)}
    out = _Collect()

    out.add(
        "unit_chunk",
        "{n} {memory names|memories name} a chunk that does not exist",
        [u.id for u in units.values() if u.chunk_id and u.chunk_id not in chunks],
    )
    out.add(
        "unit_chunk",
        "{n} {memory is in another document than its|memories are in another document than their} chunk",
        [
            u.id
            for u in units.values()
            if u.chunk_id in chunks and u.document_id and chunks[u.chunk_id].document_id != u.document_id
        ],
    )
    documents = {c.document_id for c in chunks.values()}
    out.add(
        "unit_document",
        "{n} {memory names|memories name} a document that has no chunk",
        [u.id for u in units.values() if u.document_id and u.document_id not in documents],
    )
    used_chunks = {u.chunk_id for u in units.values()}
    out.add(
        "orphan_chunks",
        "{n} {chunk has no memory left (its|chunks have no memory left (their} memories were deleted one by one)",
        [cid for cid in chunks if cid not in used_chunks],
        severity="warning",
    )
    out.add(
        "links",
        "{n} {memory links|memories link} to a memory that does not exist",
        [u.id for u in units.values() if any(link.target_id not in units for link in u.links)],
    )
    named = {e for u in units.values() for e in u.entity_ids}
    out.add(
        "entities",
        "{n} {memory names|memories name} an entity that does not exist",
        [u.id for u in units.values() if any(e not in entities for e in u.entity_ids)],
    )
    out.add("entities", "{n} {entity is|entities are} named by no memory", sorted(entities - named))
    derived_types = (FactType.observation, FactType.opinion)
    out.add(
        "sources",
        "{n} {observation or opinion cites|observations or opinions cite} a source fact that does not exist",
        [
            u.id
            for u in units.values()
            if u.fact_type in derived_types and any(s not in units for s in u.source_fact_ids)
        ],
    )
    out.add(
        "supersession",
        "{n} {memory is superseded by a memory that does not exist, or by itself|memories are superseded by a memory that does not exist, or by themselves}",
        [
            u.id
            for u in units.values()
            if u.superseded_by is not None and (u.superseded_by not in units or u.superseded_by == u.id)
        ],
    )
    out.add(
        "supersession",
        "{n} {memory is|memories are} on a superseded_by cycle",
        _supersession_cycles({k: u for k, u in units.items() if u.superseded_by != k}),
    )

    if bank.reembedding:
        out.findings.append(
            Finding(
                "embedder",
                "error",
                f"a re-embed from {bank_embedder(bank)[0]} to {bank.reembedding} stopped before it "
                f"finished: run `memlane reembed --bank {bank_id} --embedder {bank.reembedding}`",
                1,
            )
        )
    elif isinstance(embedder, str):
        out.findings.append(Finding("embedder", "warning", f"vectors not checked: {embedder}", 1))
    elif embedder is not None:
        out.add(
            "embedder",
            f"{{n}} {{sampled memory has|sampled memories have}} a vector that is not {embedder.name}'s, the bank's "
            f"recorded embedder, for their text (cosine < {SAME_VECTOR})",
            _foreign_vectors(store, bank_id, embedder),
        )

    nodes = store.list_tree_nodes(bank_id)
    _check_tree(out, nodes, {u.id: u.mentioned_at for u in units.values()})

    checksum = ids_checksum(units)
    counts = {"units": len(units), "chunks": len(chunks), "entities": len(entities), "tree_nodes": len(nodes)}
    if derived is not None:
        # ensure(): a state behind the store's revision reloads, as before any recall; a state
        # updated in place by this process's writes is kept, and that is what is checked.
        loaded = derived.ensure(bank_id)
        index = loaded if derived.with_index else None
        graph_ids = derived.graph.unit_ids(bank_id)
        counts["graph_units"] = len(graph_ids)
        views = {"graph": graph_ids}
        if index is not None:
            views["index"] = index.unit_ids()
            counts["index_units"] = len(views["index"])
        for name, ids in views.items():
            if ids_checksum(ids) != checksum:
                have = set(ids)
                out.add(
                    "derived",
                    f"the derived {name} disagrees with the store on {{n}} {{memory|memories}} "
                    f"({len(have)} held, {len(units)} stored)",
                    sorted(have.symmetric_difference(units)),
                )
    return BankReport(bank_id, counts, out.findings, checksum)


def _foreign_vectors(store: VectorStore, bank_id: str, embedder: Embedder) -> list[str]:
    """Ids of the first VECTOR_SAMPLE memories whose stored vector is not ``embedder``'s."""
    sample = next(iter(store.iter_units(bank_id, with_embedding=True, batch_size=VECTOR_SAMPLE)), [])
    if not sample:
        return []
    fresh = embedder.embed([u.text for u in sample])
    stored = np.asarray([u.embedding for u in sample], dtype=np.float32)
    cosines = np.sum(fresh * stored, axis=1) / (
        np.linalg.norm(fresh, axis=1) * np.linalg.norm(stored, axis=1) + 1e-12
    )
    return [u.id for u, c in zip(sample, cosines) if c < SAME_VECTOR]
