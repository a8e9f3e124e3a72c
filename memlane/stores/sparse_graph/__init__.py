"""The memory graph on scipy.sparse: one in-memory CSR graph per bank, derived from what the store
of record holds. ``records`` holds the node records and interning, ``build`` derives the matrix,
``store`` is :class:`SparseGraphStore`.

Layout of a bank's graph (all edges undirected for spreading):

- **unit vertices**, one per ``GraphNode.id``, numbered in canonical order (timestamp, id);
- **entity vertices**, one per entity id, numbered after the units in id order. Entity links are
  bipartite (unit <-> entity, w=1), never cliques: a speaker entity mentioned by all 10k units of a
  bank costs 10k edges instead of 50M, and spreading through it is a two-step path whose fan-out
  dilution makes hub entities weak and rare shared entities strong;
- **temporal edges** between units at most ``temporal_neighbors`` places apart in (timestamp, id)
  order, w = exp(-|dt| / sigma). "k nearest before and k nearest after" is a symmetric relation
  on the sorted order, so every unit gets exactly its k predecessors and k successors;
- **semantic and causal edges** from ``GraphNode.links``. One edge per unordered unit pair and
  family (semantic, or causal for causes / caused_by / enables / prevents), weight = the largest
  declared weight, so "A causes B" on A and "B caused_by A" on B are one causal edge. Links of
  type entity or temporal in the input are ignored: those families are derived here.

**The graph is a pure function of the bank's current node set.** The store keeps one immutable
record per unit (timestamp, entity ids, declared links) and derives the adjacency matrix from the
records lazily, on the first read after a mutation (20 ms at 10k units, 0.3 s at 100k; ids are
interned to int slots when added so the build is numpy work). Consequences, all deliberate:

- Incremental temporal links are exact: a node inserted between two existing ones is linked to
  its neighbours and the pairs it pushes beyond ``temporal_neighbors`` places apart lose their
  link, exactly as a rebuild from scratch would; removing a node re-links the units across the gap.
- Pending links: a link whose target is not (yet) in the bank stays declared on its source unit and
  becomes an edge as soon as the target arrives (and disappears again if the target is removed).
- Any insertion order, any mix of add/remove/rebuild reaching the same node set gives the
  same vertex numbering, the same matrix, bit for bit, hence the same spread results.

Why not keep the graph itself in igraph: on this machine igraph takes 0.77 s to build a 1M-edge
graph from a numpy edge list and ``get_adjacency_sparse`` another 1.2 s, against 0.15 s for the
scipy CSR build straight from numpy arrays. Spreading runs on the CSR matrix; ``to_igraph``
exports a bank as an ``igraph.Graph`` for analyses (components, communities, PageRank).

Threads: each bank has a lock for its records and a build lock. A build copies the records (they
are immutable) under the lock and runs outside it, so add_nodes is never blocked by a build;
readers get an immutable built view, so spread never sees a half-built matrix.

There are no snapshots: the graph is rebuilt from the units the derived state loads anyway.
Parquet snapshots, written with fsync on every retain and delete, were never read, and loading
one cost more than the rebuild (10k units: snapshot write 114 ms, load and build 215 ms, rebuild
and build 127 ms; 100k: load 1.4 s, rebuild 0.3 s).
"""

from memlane.stores.sparse_graph.records import EDGE_TYPES
from memlane.stores.sparse_graph.store import SparseGraphStore

__all__ = ["SparseGraphStore", "EDGE_TYPES"]
