"""The engine's narrow interfaces. Each backend is one small class implementing one of these.

Times that cross the store boundary inside search hits are epoch seconds (int) or None, so the
hot recall path does not build pydantic objects for candidates it will drop.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Collection, Iterable, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from memlane.records import Bank, Chunk, Entity, FactType, Link, MemoryUnit, TreeNode
from memlane.revlog import RevisionDelta, RevisionStep


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors and counts tokens with the same tokenizer.

    ``name`` is stable across processes and versions ("minilm", "bge-small", or a custom
    model folder's name): banks record it with ``dim``."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), rows L2-normalised: documents (passages)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """As :meth:`embed` for search queries: a model with a query instruction adds it here."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs; higher is more relevant."""

    name: str

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        """Scores in [0, 1] for each passage; ``prior_ranks`` (0 = best) lets a fallback keep the
        fused order."""
        ...


@runtime_checkable
class LLM(Protocol):
    """A chat model. Backends (OpenAI-compatible HTTP, vLLM) come with the LLM layer."""

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        json_schema: dict | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> str: ...


@dataclass(slots=True)
class UnitFilter:
    """Restricts a search to some units of a bank. Empty fields mean no restriction (but an
    ``exact`` tag match with no tags: untagged units only; memlane/units.py)."""

    fact_types: list[FactType] | None = None
    tags: list[str] | None = None
    tags_match: str = "any"  # one of memlane.records.TAG_MODES
    as_of: datetime | None = None  # only units mentioned by then and still valid then
    only_valid: bool = True  # hide invalidated (superseded) units when as_of is None
    document_id: str | None = None
    # A window on when units were said (mentioned_at): since inclusive, until exclusive, so
    # consecutive windows never share a unit. The explorer's time filter.
    mentioned_since: datetime | None = None
    mentioned_until: datetime | None = None
    entity_id: str | None = None  # units that name this entity (the explorer's entity view)


@dataclass(slots=True)
class Hit:
    """A search hit: the unit id, the channel's score (higher is better) and its scalar fields
    (everything but the vector; times as epoch seconds or None)."""

    id: str
    score: float
    fields: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class SearchBackend(Protocol):
    """What recall's channels search: the store itself (``search_backend="milvus"``) or the
    in-process derived state (:class:`memlane.derived.DerivedState`). Both apply the filter rule
    of :mod:`memlane.units`, so they answer alike."""

    @property
    def has_lexical(self) -> bool:
        """Whether :meth:`search_lexical` can run (False: a Milvus without BM25, Milvus 2.3)."""
        ...

    # Searches return every scalar field in Hit.fields unless ``fields`` names the ones wanted
    # (an empty list: ids and scores only, the cheap form for the hot recall path).
    def search_dense(
        self,
        bank_id: str,
        vectors: np.ndarray,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
        chunk_prior: float = 0.0,
    ) -> list[list[Hit]]:
        """COSINE search; one hit list per query vector, best first. ``chunk_prior`` adds that
        times the query's similarity to the unit's chunk centroid, where the backend keeps
        centroids (the in-process index; a Milvus server search ignores it)."""
        ...

    def search_lexical(
        self,
        bank_id: str,
        text: str,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """BM25 over unit text plus context; scores positive, best first."""
        ...

    def search_time(
        self,
        bank_id: str,
        start: datetime,
        end: datetime,
        limit: int,
        flt: UnitFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Units whose occurrence interval (:func:`memlane.units.effective_interval`) overlaps
        [start, end]; score 0 (the caller scores proximity). Hits carry at least the three
        occurrence fields (occurred_start, occurred_end, mentioned_at)."""
        ...

    def candidates(
        self, bank_id: str, ids: Sequence[str], flt: UnitFilter | None
    ) -> dict[str, dict[str, Any]]:
        """Scoring fields (:data:`memlane.units.CANDIDATE_FIELDS`, times in epoch seconds) of
        the ids that exist and pass ``flt``; unknown or filtered ids are absent."""
        ...


@runtime_checkable
class VectorStore(SearchBackend, Protocol):
    """The store of record (Milvus): banks, units, chunks and entities, with dense, BM25 and
    time-range search (as a :class:`SearchBackend`). Writes are upserts keyed by deterministic ids."""

    def deferred_flushes(self) -> AbstractContextManager[None]:
        """A block whose writes this thread flushes once, at its end (a no-op where the
        store never flushes)."""
        ...

    # banks
    def upsert_bank(self, bank: Bank) -> None: ...
    def get_bank(self, bank_id: str) -> Bank | None: ...
    def list_banks(self) -> list[Bank]: ...
    def delete_bank(self, bank_id: str) -> None:
        """Remove the bank and everything in it (units, chunks, entities)."""
        ...

    # revisions
    def get_revision(self, bank_id: str) -> str:
        """The bank's revision token ('' before its first write)."""
        ...

    def bump_revision(self, bank_id: str, delta: RevisionDelta | None = None) -> str:
        """Give the bank a new revision token and return it (after every write to the bank).
        ``delta``: what the write changed, appended to the bank's revision log
        (memlane/revlog.py); only under the bank's lease. None: the change is unknown and
        processes holding the bank reload it in full."""
        ...

    def revision_log(self, bank_id: str) -> tuple[str, list[RevisionStep]]:
        """The bank's revision log: the token it ends at and its steps, oldest first."""
        ...

    # units
    def upsert_units(self, bank_id: str, units: Sequence[MemoryUnit]) -> None: ...
    def get_units(
        self, bank_id: str, ids: Sequence[str], *, with_embedding: bool = False
    ) -> list[MemoryUnit]: ...
    def iter_units(
        self, bank_id: str, *, with_embedding: bool = False, batch_size: int = 2000
    ) -> Iterator[list[MemoryUnit]]: ...
    def list_unit_ids(self, bank_id: str, flt: UnitFilter | None = None) -> list[str]:
        """Sorted ids of the units that pass ``flt`` (every unit when None)."""
        ...

    def document_counts(self, bank_id: str) -> dict[str, dict[str, int]]:
        """``{document_id: {"units": n, "chunks": m}}``."""
        ...

    def list_invalid_unit_ids(self, bank_id: str) -> list[str]:
        """Sorted ids of the invalidated units (as the two listings above would give them, in
        one read of those rows only)."""
        ...

    def list_superseded_unit_ids(self, bank_id: str, successors: Collection[str]) -> list[str]:
        """Sorted ids of the units whose ``superseded_by`` is one of ``successors``."""
        ...

    def count_units(self, bank_id: str) -> int: ...
    def delete_units(
        self, bank_id: str, ids: Sequence[str], *, linking: Collection[str] | None = None
    ) -> int:
        """Delete units by id (links to them pruned); returns how many existed."""
        ...

    def delete_document(
        self, bank_id: str, document_id: str, *, linking: Collection[str] | None = None
    ) -> dict[str, int]:
        """Delete a document's units and chunks; returns counts removed per kind. Links of
        other units to the deleted ones are pruned: ``linking`` names the units that may hold
        them (a superset the caller vouches for: the writer's graph); None: the store finds
        them itself."""
        ...

    # chunks
    def upsert_chunks(self, bank_id: str, chunks: Sequence[Chunk]) -> None: ...
    def get_chunks(self, bank_id: str, ids: Sequence[str]) -> list[Chunk]: ...
    def iter_chunks(self, bank_id: str, *, batch_size: int = 2000) -> Iterator[list[Chunk]]:
        """All chunks of the bank in pages of at most ``batch_size``, in id order."""
        ...

    def document_chunks(self, bank_id: str, document_id: str) -> list[Chunk]:
        """The chunks of one document, in id order."""
        ...

    def delete_chunks(self, bank_id: str, ids: Sequence[str]) -> int:
        """Delete chunks by id (not their units); returns how many existed."""
        ...

    def count_chunks(self, bank_id: str) -> int: ...

    # entities
    def upsert_entities(self, bank_id: str, entities: Sequence[Entity]) -> None: ...
    def list_entities(self, bank_id: str) -> list[Entity]: ...
    def delete_entities(self, bank_id: str, ids: Sequence[str]) -> int: ...

    # temporal tree nodes (memlane/tree): levels 2-5, few per bank, read whole
    def upsert_tree_nodes(self, bank_id: str, nodes: Sequence[TreeNode]) -> None: ...
    def list_tree_nodes(self, bank_id: str, *, with_embedding: bool = False) -> list[TreeNode]:
        """Every node of the bank's tree by level then start ([] before consolidation)."""
        ...

    def delete_tree_nodes(self, bank_id: str, ids: Sequence[str]) -> int: ...

    # background operations (async retain): JSON records any process can read
    def put_operation(self, op_id: str, record: dict[str, Any]) -> None: ...
    def get_operation(self, op_id: str) -> dict[str, Any] | None: ...

    # bank write leases (memlane/leases.py): one writer per bank across processes
    def put_lease(self, bank_id: str, owner: str, record: dict[str, Any]) -> None: ...
    def list_leases(self, bank_id: str) -> list[dict[str, Any]]: ...
    def delete_lease(self, bank_id: str, owner: str) -> None: ...

    def get_unit_fields(
        self, bank_id: str, ids: Sequence[str], fields: Sequence[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """Hit-style fields by unit id (unknown ids absent)."""
        ...

    def close(self) -> None: ...


@dataclass(slots=True)
class GraphNode:
    """What the graph needs of a unit; all of it is persisted on the unit in the store."""

    id: str
    entity_ids: list[str]
    timestamp: float  # epoch seconds of occurred_start, else mentioned_at
    links: list[Link] = field(default_factory=list)  # stored semantic and causal links


@runtime_checkable
class GraphStore(Protocol):
    """One memory graph per bank, derived from the store of record."""

    def add_nodes(self, bank_id: str, nodes: Sequence[GraphNode]) -> None: ...
    def remove_nodes(self, bank_id: str, ids: Sequence[str]) -> None: ...
    def drop_bank(self, bank_id: str) -> None: ...
    def evict(self, bank_id: str) -> None:
        """Forget the bank in memory (it is rebuilt from the store of record when needed)."""
        ...

    def has_bank(self, bank_id: str) -> bool: ...
    def linking_to(self, bank_id: str, ids: Sequence[str]) -> set[str]:
        """Ids of the bank's units that declare a link (of any type or weight) to one of ``ids``:
        the units whose stored links a deletion of ``ids`` prunes."""
        ...

    def unit_ids(self, bank_id: str) -> list[str]:
        """The ids of the units in the bank's graph ([] for a bank not held)."""
        ...

    def rebuild(self, bank_id: str, nodes: Iterable[GraphNode]) -> None: ...
    def spread(
        self, bank_id: str, seeds: dict[str, float], *, hops: int, decay: float, limit: int
    ) -> list[tuple[str, float]]:
        """Spreading activation from seeds; unit ids (seeds excluded) by activation."""
        ...

    def entity_degrees(self, bank_id: str, entity_ids: Sequence[str]) -> dict[str, int]:
        """Units mentioning each entity: the mention count, derived like the rest."""
        ...

    def stats(self, bank_id: str) -> dict[str, int]: ...
