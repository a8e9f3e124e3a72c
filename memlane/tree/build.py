"""Build a bank's temporal tree bottom up: sessions from memory units, days from sessions,
weeks from days, the profile from weeks, each once its window has closed
(:mod:`memlane.tree.windows`).

Idempotent and resumable: node ids come from (bank, level, window) and each node stores a
signature of what it was written from (consolidator, children's ids and texts), so a re-run
writes only the windows whose children changed and removes nodes whose window is gone; a run
cut short leaves complete nodes, and the next run goes on from them.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Sequence

import numpy as np

from memlane.interfaces import Embedder, VectorStore
from memlane.records import FactType, MemoryUnit, now_utc
from memlane.tree.consolidators import Child, Consolidator
from memlane.tree.nodes import NODE_LEVELS, Level, TreeNode, node_id
from memlane.tree.profile import Speakers, profile_children, quotable
from memlane.tree.windows import Leaf, Window, closed_windows

# Memory units that enter the tree: what was said (its source turns), not what reflection
# derived from it (observations and opinions span sessions and have no session to sit in).
LEAF_TYPES = frozenset({FactType.world, FactType.experience})
MAX_NODE_ENTITIES = 200  # entity ids kept on a node, most mentioned first
HISTORY = 3  # TiMem's w: latest nodes of the same level shown to the LLM consolidator

# write(bank_id, upserts, deletes): one logical write (the bank writer's, in the engine)
WriteTree = Callable[[str, list[TreeNode], list[str]], None]


@dataclass(slots=True)
class TreeReport:
    """What one consolidation run did: per level name, nodes written, kept unchanged and the
    tree's size after; nodes removed (windows gone); the LLM replies that fell back."""

    bank_id: str
    written: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    removed: int = 0
    leaves: int = 0
    fallbacks: int = 0
    seconds: float = 0.0
    # Conflict resolution run first (memlane/facts): facts written and outcomes by name.
    facts: dict = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(sum(self.written.values()) or self.removed or self.facts.get("written"))

    def as_dict(self) -> dict:
        return {
            "bank_id": self.bank_id,
            "leaves": self.leaves,
            "written": self.written,
            "unchanged": self.unchanged,
            "nodes": self.nodes,
            "removed": self.removed,
            "fallbacks": self.fallbacks,
            "facts": self.facts,
            "seconds": round(self.seconds, 3),
        }


def leaves_of(store: VectorStore, bank_id: str, speakers: Speakers | None = None) -> list[Leaf]:
    """The bank's units that enter the tree, with their session ("document|session", from
    their chunk), vectors and whether the profile may quote them (``speakers``: the bank's
    assistants; default: from its entities)."""
    speakers = speakers or Speakers(store.list_entities(bank_id))
    sessions: dict[str, str] = {}
    for page in store.iter_chunks(bank_id):
        for ch in page:
            sessions[ch.chunk_id] = f"{ch.document_id}|{ch.session_id}"
    leaves: list[Leaf] = []
    for units in store.iter_units(bank_id, with_embedding=True):
        for u in units:
            leaf = _leaf(u, sessions, speakers)
            if leaf is not None:
                leaves.append(leaf)
    return leaves


def _leaf(u: MemoryUnit, sessions: dict[str, str], speakers: Speakers) -> Leaf | None:
    if u.fact_type not in LEAF_TYPES or u.chunk_id not in sessions or u.embedding is None:
        return None
    return Leaf(
        id=u.id,
        text=u.text,
        at=u.mentioned_at,
        session=sessions[u.chunk_id],
        source_turns=list(u.source_turns),
        entity_ids=list(u.entity_ids),
        vector=np.asarray(u.embedding, dtype=np.float32),
        profile=quotable(u, speakers),
    )


# Bumped when what a node is built from changes meaning (2: extractive nodes carry the mean of
# their quotations' vectors), so existing trees are rewritten once.
SIGNATURE_VERSION = 2


def signature(consolidator: str, level: Level, key: str, children: Sequence[Child]) -> str:
    h = hashlib.sha256(f"{SIGNATURE_VERSION}\x1f{consolidator}\x1f{int(level)}\x1f{key}".encode())
    for c in children:
        h.update(f"\x1e{c.id}\x1f{c.text}".encode())
        if level == Level.profile:  # its weeks' points are chosen for it (memlane/tree/profile.py)
            h.update("".join(f"\x1d{text}" for text, _ in c.points).encode())
    return h.hexdigest()[:32]


class TreeBuilder:
    """Plans and writes one bank's tree (see the module docstring)."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        consolidator: Consolidator,
        *,
        session_idle_s: float = 1800.0,
        entity_names: Callable[[str], dict[str, str]] | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.consolidator = consolidator
        self.session_idle_s = session_idle_s
        self.entity_names = entity_names

    def build(
        self,
        bank_id: str,
        write: WriteTree,
        *,
        now: datetime | None = None,
        progress: Callable[[Level, int], None] | None = None,
    ) -> TreeReport:
        """Consolidate every closed window of ``bank_id`` as of ``now`` (default: the current
        time) and write what changed through ``write``. ``progress(level, n)`` is told each
        level's count as it completes."""
        t0 = time.perf_counter()
        report = TreeReport(bank_id=bank_id)
        entities = self.store.list_entities(bank_id)
        speakers = Speakers(entities)
        leaves = leaves_of(self.store, bank_id, speakers)
        report.leaves = len(leaves)
        windows = closed_windows(leaves, now or now_utc(), self.session_idle_s)
        existing = {n.id: n for n in self.store.list_tree_nodes(bank_id, with_embedding=True)}
        names = self.entity_names(bank_id) if self.entity_names else {e.entity_id: e.name for e in entities}
        fallbacks_before = getattr(self.consolidator, "failures", 0)

        leaf_children = {leaf.id: _leaf_child(leaf) for leaf in leaves}
        below: dict[str, Child] = leaf_children
        wanted: list[TreeNode] = []
        for level in NODE_LEVELS:
            if level == Level.profile:
                allowed = {leaf.id for leaf in leaves if leaf.profile}
                below = profile_children(below, windows, leaf_children, allowed, speakers.assistant_ids)
            nodes = self._level(bank_id, level, windows[level], below, existing, names, report)
            wanted.extend(nodes)
            below = {n.key: _node_child(n) for n in nodes}
            report.nodes[level.name] = len(nodes)
            if progress is not None:
                progress(level, len(nodes))

        keep = {n.id for n in wanted}
        removed = sorted(i for i in existing if i not in keep)
        changed = [n for n in wanted if existing.get(n.id) is not n]
        if changed or removed:
            write(bank_id, changed, removed)
        report.removed = len(removed)
        report.fallbacks = getattr(self.consolidator, "failures", 0) - fallbacks_before
        report.seconds = time.perf_counter() - t0
        return report

    def _level(
        self,
        bank_id: str,
        level: Level,
        windows: list[Window],
        below: dict[str, Child],
        existing: dict[str, TreeNode],
        names: dict[str, str],
        report: TreeReport,
    ) -> list[TreeNode]:
        out: list[TreeNode] = []
        fresh: list[TreeNode] = []
        history: list[str] = []
        for w in windows:
            children = [below[k] for k in w.children if k in below]
            if not children:
                continue
            nid = node_id(bank_id, level, w.key)
            sig = signature(self.consolidator.name, level, w.key, children)
            old = existing.get(nid)
            start, end = min(c.start for c in children), max(c.end for c in children)
            # The signature reads children's ids and texts, not their times: a node whose
            # child was said again at another time under the same id and text (left so by a
            # consolidation that raced with that retain, before memlane/tree/service.py
            # checked the revision) would otherwise be kept with an interval short of it.
            if (
                old is not None
                and old.signature == sig
                and old.embedding is not None
                and (old.start, old.end) == (start, end)
            ):
                out.append(old)
                history.append(old.text)
                continue
            written = self.consolidator.write(level, w.key, children, history[-HISTORY:], names)
            entities: dict[str, int] = {}
            for c in children:
                for e in c.entity_ids:
                    entities[e] = entities.get(e, 0) + 1
            node = TreeNode(
                id=nid,
                bank_id=bank_id,
                level=level,
                key=w.key,
                start=start,
                end=end,
                text=written.text,
                children=[c.id for c in children],
                cited=written.cited,
                source_turns=_turns_under(children) if level == Level.session else [],
                cited_turns=written.cited_turns,
                entity_ids=sorted(entities, key=lambda e: (-entities[e], e))[:MAX_NODE_ENTITIES],
                consolidator=written.consolidator,
                signature=sig,
                metadata=written.metadata,
                embedding=None if written.vector is None else written.vector.astype(np.float32).tolist(),
            )
            out.append(node)
            fresh.append(node)
            history.append(node.text)
        unembedded = [n for n in fresh if n.embedding is None]
        if unembedded:
            vectors = self.embedder.embed([n.text for n in unembedded])
            for n, v in zip(unembedded, vectors):
                n.embedding = np.asarray(v, dtype=np.float32).tolist()
        report.written[level.name] = len(fresh)
        report.unchanged[level.name] = len(out) - len(fresh)
        return out


def _turns_under(children: list[Child]) -> list[str]:
    return list(dict.fromkeys(t for c in children for _, ts in c.points for t in ts))


def _leaf_child(leaf: Leaf) -> Child:
    return Child(
        id=leaf.id,
        text=leaf.text,
        vector=np.asarray(leaf.vector, dtype=np.float32),
        start=leaf.at,
        end=leaf.at,
        entity_ids=leaf.entity_ids,
        points=[(leaf.text, leaf.source_turns)],
    )


def _node_child(node: TreeNode) -> Child:
    points = [(str(t), list(ts)) for t, ts in node.metadata.get("points") or []]
    assert node.embedding is not None  # every node of a built level has its vector
    return Child(
        id=node.id,
        text=node.text,
        vector=np.asarray(node.embedding, dtype=np.float32),
        start=node.start,
        end=node.end,
        entity_ids=node.entity_ids,
        points=points or [(node.text, node.cited_turns)],
    )
