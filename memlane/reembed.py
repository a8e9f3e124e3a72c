"""Re-embedding a bank: every stored vector of it rewritten by another embedder, ids unchanged
(``memlane reembed``: pipelines/reembed.py runs this per bank on Ray Data).

What holds vectors (memlane/stores/milvus/schema.py): memory units of every fact type (world,
experience, observations, opinions: the embedding of their text) and the temporal tree's nodes.
Chunks, entities and curated items (mental models, directives) store none: their vectors are
computed when used, by whichever embedder the process has.

A unit's semantic links are derived from vectors too (retain links a unit to the earlier units
most similar to it: memlane/retain/links.py), so they are chosen again with the new vectors,
over the whole bank; its other links are kept.

The bank is embedded first (nothing written), then rewritten in writes of ``batch`` units, each a :class:`~memlane.writes.BankWriter`
write (the bank's lease, this process's derived state updated in place, one revision bump that
other processes apply):

1. the first write marks the bank ``reembedding=<target>`` before its units: from its revision
   on, recall and retain refuse the bank, whose vectors are now mixed (memlane/banks.py);
2. every unit gets its text's vector from the target embedder;
3. the last write also rewrites the tree nodes' vectors (bottom up: an extractive node's is the
   normalised mean of its cited children's, as the consolidator writes it; another's embeds
   its text) and switches the bank record to the target in the same write (one bank row).

A run that stops in between leaves the mark; the next run re-embeds the whole bank again (the
writes are upserts of the same ids, so it converges) and switches it. A bank already on the
target, unmarked, is left alone.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from memlane.banks import bank_embedder, require_bank
from memlane.interfaces import Embedder, VectorStore
from memlane.records import LinkType, MemoryUnit, TreeNode
from memlane.retain.links import semantic_links
from memlane.settings.areas import RetainSettings
from memlane.writes import BankWriter

# Units per write: a write holds the bank's lease and bumps its revision once; 256 keeps both
# short (a few seconds of embedding on 2 CPU cores) while the per-write overhead stays small.
BATCH = 256


@dataclass
class ReembedReport:
    """What re-embedding one bank did: ``status`` is ``done`` (switched to ``target``),
    ``unchanged`` (already on it: nothing to do) or ``stopped`` (cut short: still marked)."""

    bank_id: str
    source: str
    target: str
    status: str = "stopped"
    units: int = 0
    tree_nodes: int = 0
    writes: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reembed_bank(
    store: VectorStore,
    writer: BankWriter,
    embedder: Embedder,
    bank_id: str,
    links: RetainSettings,
    *,
    batch: int = BATCH,
    stop_after: int | None = None,
) -> ReembedReport:
    """Re-embed ``bank_id`` with ``embedder`` (see the module docstring); ``links``: the
    semantic links' threshold and top k, as retain uses them. ``stop_after``: end after that
    many writes, leaving the bank marked, as a run killed there would (for tests)."""
    t0 = time.perf_counter()
    bank = require_bank(store, bank_id)
    target = embedder.name
    report = ReembedReport(bank_id, bank_embedder(bank)[0], target)
    if bank_embedder(bank) == (target, embedder.dim) and not bank.reembedding:
        report.status = "unchanged"
        return report
    vectors: dict[str, np.ndarray] = {}
    rewritten = _embedded([u for page in store.iter_units(bank_id) for u in page], embedder, vectors, links)
    batches = [rewritten[i : i + batch] for i in range(0, len(rewritten), batch)] or [[]]
    for n, units in enumerate(batches):
        if stop_after is not None and n >= stop_after:
            break
        with writer.write(bank_id) as w:
            if n == 0 and bank.reembedding != target:
                w.store.upsert_bank(bank.model_copy(update={"reembedding": target}))
            w.units(units)
            if n == len(batches) - 1:
                nodes = tree_vectors(store.list_tree_nodes(bank_id), vectors, embedder)
                w.tree(nodes)
                current = require_bank(store, bank_id)  # its profile may have changed meanwhile
                switched = {"embedder": target, "embedding_dim": embedder.dim, "reembedding": ""}
                w.store.upsert_bank(current.model_copy(update=switched))
                report.tree_nodes = len(nodes)
                report.status = "done"
        report.units += len(units)
        report.writes += 1
    report.seconds = round(time.perf_counter() - t0, 3)
    return report


def _embedded(
    units: list[MemoryUnit], embedder: Embedder, vectors: dict[str, np.ndarray], links: RetainSettings
) -> list[MemoryUnit]:
    """``units`` with their texts' vectors from ``embedder`` (also noted in ``vectors``) and
    their semantic links chosen again by them, over the whole bank at once (an n x n
    similarity: 400 MB at 10k units)."""
    if not units:
        return []
    matrix = np.asarray(embedder.embed([u.text for u in units]), dtype=np.float32)
    semantic = semantic_links(
        [u.id for u in units],
        matrix,
        [u.mentioned_at.timestamp() for u in units],
        None,
        threshold=links.semantic_link_threshold,
        top_k=links.semantic_link_top_k,
    )
    out = []
    for u, vec, new in zip(units, matrix, semantic):
        vectors[u.id] = vec
        kept = [link for link in u.links if link.type != LinkType.semantic]
        out.append(u.model_copy(update={"embedding": vec.tolist(), "links": new + kept}))
    return out


def tree_vectors(nodes: list[TreeNode], vectors: dict[str, np.ndarray], embedder: Embedder) -> list[TreeNode]:
    """``nodes`` with new vectors, level by level from the sessions up: an extractive node's is
    the normalised mean of its cited children's (all children when it cites none), as
    :class:`~memlane.tree.consolidators.ExtractiveConsolidator` writes it; another node's (an LLM
    summary), or one whose children's vectors are missing, embeds its text. ``vectors`` holds
    the units' new vectors and receives the nodes'."""
    from memlane.tree.consolidators import ExtractiveConsolidator

    out: list[TreeNode] = []
    for level in sorted({n.level for n in nodes}):
        at_level = [n for n in nodes if n.level == level]
        fresh: dict[str, np.ndarray] = {}
        for node in at_level:
            cited = node.cited or node.children
            if node.consolidator == ExtractiveConsolidator.name and all(c in vectors for c in cited):
                mean = np.mean([vectors[c] for c in cited], axis=0)
                norm = float(np.linalg.norm(mean))
                if norm > 0:
                    fresh[node.id] = mean / norm
        texts = [n for n in at_level if n.id not in fresh]
        if texts:
            fresh.update(zip((n.id for n in texts), np.asarray(embedder.embed([n.text for n in texts]))))
        for node in at_level:
            vectors[node.id] = np.asarray(fresh[node.id], dtype=np.float32)
            out.append(node.model_copy(update={"embedding": vectors[node.id].tolist()}))
    return out
