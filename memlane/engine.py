"""The engine facade: banks, retain, recall, invalidation and deletion over the configured
backends. Plain Python; the Ray layers wrap it, never the other way round. Every write goes
through the bank writer (memlane/writes.py), which keeps other processes coherent."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pydantic import ValidationError

from memlane.components import Components
from memlane.curated import CuratedMethods
from memlane.errors import BankNotFound, InvalidInput, NotFound
from memlane.facts.facade import FactsMethods
from memlane.model import (
    Bank,
    Disposition,
    Entity,
    FactType,
    MemoryUnit,
    RecallRequest,
    RecallResult,
    RetainItem,
    Turn,
    check_bank_id,
    now_utc,
    utc,
)
from memlane.retain.deferred import DeferredExtraction
from memlane.retain.items import DocumentPlan, check_tags
from memlane.tree.facade import TreeMethods

if TYPE_CHECKING:
    from memlane.reflect import CARA
    from memlane.retain.facts import Extractor
    from memlane.retain.pipeline import RetainReport


def _valid_bank_id(bank_id: str) -> str:
    """``bank_id``, or InvalidInput naming what a bank id must be."""
    try:
        return check_bank_id(bank_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


class Memory(CuratedMethods, FactsMethods, TreeMethods, DeferredExtraction, Components):
    """A Memlane memory engine: banks, retain, recall, reflect, invalidation and deletion.
    Backends are built lazily from ``settings`` unless given (memlane/components.py)."""

    # banks --------------------------------------------------------------------------------
    def create_bank(
        self,
        bank_id: str,
        *,
        name: str | None = None,
        background: str | None = None,
        disposition: Disposition | dict | None = None,
    ) -> Bank:
        """Create a bank, or update the given profile fields of an existing one."""
        try:
            check_bank_id(bank_id)
            current = self.store.get_bank(bank_id)
            data: dict[str, Any] = current.model_dump() if current else {"bank_id": bank_id, "name": bank_id}
            if name is not None:
                data["name"] = name
            if background is not None:
                data["background"] = background
            if disposition is not None:
                data["disposition"] = (
                    disposition.model_dump() if isinstance(disposition, Disposition) else disposition
                )
            data["updated_at"] = now_utc()
            bank = Bank.model_validate(data)
        except ValidationError as exc:
            raise InvalidInput.from_validation(exc) from None
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        self.writer.put_bank(bank)
        return bank

    def put_bank(self, bank_id: str, **fields: Any) -> tuple[Bank, bool]:
        """:meth:`create_bank`, and whether the bank was created (False: updated): what PUT
        /v1/banks/{id} and the MCP create_bank tool answer."""
        try:
            self.get_bank(bank_id)
            created = False
        except BankNotFound:
            created = True
        return self.create_bank(bank_id, **fields), created

    def get_bank(self, bank_id: str) -> Bank:
        bank = self.store.get_bank(_valid_bank_id(bank_id))
        if bank is None:
            raise BankNotFound(bank_id)
        return bank

    def list_banks(self) -> list[Bank]:
        return sorted(self.store.list_banks(), key=lambda b: b.bank_id)

    def delete_bank(self, bank_id: str) -> None:
        """Delete a bank with everything in it: units, chunks, entities, its graph."""
        self.get_bank(bank_id)
        self.writer.delete_bank(bank_id)

    def stats(self, bank_id: str) -> dict[str, Any]:
        self.get_bank(bank_id)
        self.derived.ensure(bank_id)
        return {
            "bank_id": bank_id,
            "units": self.store.count_units(bank_id),
            "chunks": self.store.count_chunks(bank_id),
            "entities": len(self.store.list_entities(bank_id)),
            "graph": self.graph.stats(bank_id),
        }

    def doctor(self, bank_id: str):
        """Check every invariant of the bank and its derived state in this process
        (:mod:`memlane.doctor`); a :class:`~memlane.doctor.BankReport`. Raises BankNotFound."""
        from memlane.doctor import check_bank

        return check_bank(self.store, self.derived, bank_id)

    # retain -------------------------------------------------------------------------------
    def retain(
        self,
        bank_id: str,
        conversations: Sequence[tuple[str, Sequence[Turn]]],
        *,
        tags: Sequence[str] = (),
        create_bank: bool = True,
        progress: Callable[[int], None] | None = None,
        extractor: Extractor | None = None,
    ) -> RetainReport:
        """Retain ``(document_id, turns)`` pairs. Creates the bank when missing unless
        ``create_bank`` is False; ``extractor`` replaces the configured one for this call
        (e.g. replies of a batch LLM stage). Returns a
        :class:`~memlane.retain.pipeline.RetainReport`."""
        bank = self._bank_to_retain_into(bank_id, create_bank)
        check_tags(tags)
        with self.writer.write(bank_id) as w:
            report = self.retainer.retain(
                bank, conversations, w, tags=tags, progress=progress, extractor=extractor
            )
        self._retained(bank_id)
        return report

    def retain_file(
        self,
        bank_id: str,
        path: str | Path,
        *,
        format: str = "auto",
        tags: Sequence[str] = (),
        progress: Callable[[int], None] | None = None,
    ):
        """Load a LoCoMo JSON or JSONL file (validated whole before anything is written) and
        retain it."""
        from memlane.ingest import load_conversations

        check = self._check_bank_id(bank_id)
        conversations = load_conversations(Path(path), format=format)
        return self.retain(
            check, [(c.document_id, c.turns) for c in conversations], tags=tags, progress=progress
        )

    def plan_items(
        self,
        bank_id: str,
        items: Sequence[RetainItem | dict],
        *,
        document_id: str | None = None,
        tags: Sequence[str] = (),
    ) -> DocumentPlan:
        """Validate retain API items and group them into ``{document_id: (tags, turns)}``
        without writing anything (what :meth:`retain_items` would write). Raises InvalidInput
        naming the first bad field."""
        from memlane.retain.items import plan_items

        return plan_items(bank_id, items, document_id, tags)

    def retain_items(
        self,
        bank_id: str,
        items: Sequence[RetainItem | dict],
        *,
        document_id: str | None = None,
        tags: Sequence[str] = (),
        create_bank: bool = True,
        progress: Callable[[int], None] | None = None,
    ) -> RetainReport:
        """Retain API items (see :class:`~memlane.model.RetainItem`). Items are grouped into
        documents by ``document_id`` (the item's, else the call's, else one derived from the
        content); each document replaces what it held before, in one write. Validated whole
        before anything is written."""
        from memlane.retain.pipeline import RetainReport

        plan = self.plan_items(bank_id, items, document_id=document_id, tags=tags)
        bank = self._bank_to_retain_into(bank_id, create_bank)
        total = RetainReport(bank_id=bank_id)
        episode = self.episode_extractor()  # the LLM's extraction deferred: the rules now
        for doc_id, (doc_tags, turns) in plan.items():
            with self.writer.write(bank_id) as w:
                w.delete_document(doc_id)
                report = self.retainer.retain(
                    bank, [(doc_id, turns)], w, tags=doc_tags, progress=progress, extractor=episode
                )
            if episode is not None:
                self._extract_later(bank_id, doc_id, turns, doc_tags)
                report.deferred = 1
            self._retained(bank_id)
            total.add(report)
        return total

    def _bank_to_retain_into(self, bank_id: str, create: bool) -> Bank:
        try:
            return self.get_bank(bank_id)
        except BankNotFound:
            if not create:
                raise
            # No owner name: only a bank whose name is set types its owner's turns as
            # experience; naming it after its id made a user called "priya" the agent.
            return self.create_bank(bank_id, name="")

    def _retained(self, bank_id: str) -> None:
        if self._retainer is not None and self._retainer.on_units is not None:
            self.cara.retained(bank_id)  # observations and opinions: see memlane/reflect/
        self._tree_after_write(bank_id)  # the temporal tree: see memlane/tree/
        self._curated_after_write(bank_id)  # mental models new facts touch: memlane/curated/

    # recall -------------------------------------------------------------------------------
    def recall(self, bank_id: str, query: str | RecallRequest, **options: Any) -> RecallResult:
        """Recall memories for ``query``; ``options`` are the fields of RecallRequest."""
        try:
            req = query if isinstance(query, RecallRequest) else RecallRequest(query=query, **options)
        except ValidationError as exc:
            raise InvalidInput.from_validation(exc) from None
        bank_id = _valid_bank_id(bank_id)
        cold = self.settings.recall.cold_bank == "store" and not self.derived.held(bank_id)
        revision = self.store.get_revision(bank_id) if cold else self.derived.ensure(bank_id).revision
        if not revision:
            # A bank's revision row goes with the bank (deleted last), so a token proves the
            # bank exists; only a bank never written to needs the lookup (one store round
            # trip of the three a recall made, measured on the peer workload).
            self.get_bank(bank_id)
        if cold:
            # A bank this process does not hold: answered by the store, then loaded in the
            # background (started after the answer: a load running beside it took the GIL
            # from it, and a first recall at 1k memories was no faster than waiting).
            try:
                result = self.recaller.recall(bank_id, req, revision, search=self.store)
            finally:
                self.derived.warm_later(bank_id)
            result.cold = True
        else:
            result = self.recaller.recall(bank_id, req, revision)
        return self._with_mental_models(bank_id, req, result)

    # reflect ------------------------------------------------------------------------------
    @property
    def retainer(self):
        if self._retainer is None:
            from memlane.retain.pipeline import Retainer

            self._retainer = Retainer(self.settings, self.store, self.derived, self.embedder, self.extractor)
            if self.cara.consolidates:
                self._retainer.on_units = self.cara.units_written
        return self._retainer

    @property
    def cara(self) -> CARA:
        """Reflect, opinions, observations and background merging (memlane/reflect)."""
        if self._cara is None:
            from memlane.reflect import CARA

            self._cara = CARA(
                self.settings, self.store, self.writer, lambda texts: self.embedder.embed(texts), self.recall
            )
        return self._cara

    def reflect(self, bank_id: str, query: str, **options: Any):
        """Answer ``query`` from the bank's memories in the bank's own voice (CARA), citing the
        memories used and storing the opinions the answer forms. ``options``: the fields of
        :class:`~memlane.reflect.ReflectRequest` (max_tokens = recall budget, budget, as_of,
        tags, ...). Returns a :class:`~memlane.reflect.ReflectResult`. Needs an LLM for the
        reflect role; raises :class:`~memlane.errors.LLMNotConfigured` naming the setting."""
        self.get_bank(bank_id)
        result = self.cara.reflect(bank_id, query, **options)
        if result.memory_ids and self.settings.facts.salience_alpha > 0:
            self.reinforce_cited(bank_id, result.memory_ids)  # cited facts gain salience
        return result

    def merge_background(self, bank_id: str, snippet: str) -> Bank:
        """Merge a biographical snippet into the bank's first-person background; the snippet
        wins where they conflict."""
        return self.cara.merge_background(bank_id, snippet)

    def wait_background(self) -> None:
        """Wait for the consolidation jobs retain queued (observations, opinion updates, the
        temporal tree)."""
        self.wait_extraction()
        if self._cara is not None:
            self._cara.wait()
        self.wait_tree()
        self.wait_curated()

    # invalidation and deletion --------------------------------------------------------------
    def invalidate(
        self, bank_id: str, unit_id: str, *, superseded_by: str | None = None, at: datetime | None = None
    ) -> None:
        """Mark a unit no longer valid from ``at`` (default now): it stays stored and answers
        ``as_of`` questions about the time before (Engram: invalidate, never delete)."""
        self.get_bank(bank_id)
        units = self.store.get_units(bank_id, [unit_id], with_embedding=True)
        if not units:
            raise InvalidInput(f"unit {unit_id!r} is not in bank {bank_id!r}")
        unit = units[0]
        unit.invalid_at = utc(at) if at else now_utc()
        unit.superseded_by = superseded_by
        with self.writer.write(bank_id) as w:
            w.units([unit])

    def delete_document(self, bank_id: str, document_id: str) -> dict[str, int]:
        """Delete a document's units and chunks, then rebuild the bank's graph and drop entities
        nothing mentions any more. Raises NotFound for a document the bank does not hold."""
        self.get_bank(bank_id)
        if not isinstance(document_id, str) or not document_id:
            raise InvalidInput(f"document_id must be a non-empty string, got {document_id!r}")
        with self.writer.write(bank_id) as w:
            counts = w.delete_document(document_id)
        if not counts["units"] and not counts["chunks"]:
            raise NotFound(f"document {document_id!r} is not in bank {bank_id!r}", "document_id")
        self._tree_after_write(bank_id)  # the windows it was under are written again
        self._curated_after_write(bank_id)  # models citing its memories are answered again
        return counts

    def delete_memory(self, bank_id: str, unit_id: str) -> dict[str, int]:
        """Delete one memory unit (links to it are pruned, the graph rebuilt, orphaned entities
        dropped). To keep history instead, use :meth:`invalidate`."""
        self.get_bank(bank_id)
        with self.writer.write(bank_id) as w:
            deleted, entities = w.delete_units([unit_id])
        if not deleted:
            raise NotFound(f"memory {unit_id!r} is not in bank {bank_id!r}", "memory_id")
        self._tree_after_write(bank_id)
        self._curated_after_write(bank_id)
        return {"units": deleted, "entities": entities}

    # listing ------------------------------------------------------------------------------
    def list_memories(
        self,
        bank_id: str,
        *,
        offset: int = 0,
        limit: int = 100,
        types: Sequence[str] | None = None,
        document_id: str | None = None,
        include_invalid: bool = True,
        tags: Sequence[str] | None = None,
        tags_match: str = "any",
        since: datetime | None = None,
        until: datetime | None = None,
        entity_id: str | None = None,
    ) -> tuple[list[MemoryUnit], int]:
        """A page of the bank's memories in id order, and how many match in all. ``tags``
        (``tags_match`` "any" or "all"), the mention window ``since`` (inclusive) to ``until``
        (exclusive) and ``entity_id`` mean what they mean to recall (memlane/units.py)."""
        from memlane.interfaces import UnitFilter
        from memlane.units import check_filter

        self.get_bank(bank_id)
        if offset < 0 or not 1 <= limit <= 1000:
            raise InvalidInput("offset must be >= 0 and limit in 1..1000")
        try:
            fact_types = [FactType(t) for t in types] if types else None
        except ValueError as exc:
            raise InvalidInput(f"types: {exc}") from None
        flt = UnitFilter(
            fact_types=fact_types,
            document_id=document_id,
            only_valid=not include_invalid,
            tags=list(tags) if tags else None,
            tags_match=tags_match,
            mentioned_since=utc(since) if since else None,
            mentioned_until=utc(until) if until else None,
            entity_id=entity_id,
        )
        try:
            check_filter(flt)
        except ValueError as exc:
            # the two rules check_filter can refuse here, named by the caller's parameter
            if "tags_match" in str(exc):
                raise InvalidInput(f"tags_match: {exc}") from None
            raise InvalidInput(f"until: must be after since ({exc})") from None
        ids = self.store.list_unit_ids(bank_id, flt)
        page = self.store.get_units(bank_id, ids[offset : offset + limit])
        return page, len(ids)

    def entity(self, bank_id: str, entity_id: str, *, limit: int = 50) -> dict[str, Any]:
        """An entity with the memories that name it (the first ``limit``, by mention time)
        and its neighbours: the other entities those memories name, by how many they share.
        Raises NotFound for an entity the bank does not hold."""
        from memlane.interfaces import UnitFilter

        self.get_bank(bank_id)
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit: must be in 1..1000")
        entities = {e.entity_id: e for e in self.store.list_entities(bank_id)}
        found = [entities[entity_id]] if entity_id in entities else []
        if not found:
            raise NotFound(f"entity {entity_id!r} is not in bank {bank_id!r}", "entity_id")
        ids = self.store.list_unit_ids(bank_id, UnitFilter(entity_id=entity_id, only_valid=False))
        # Only two small fields of every mention: a popular entity's neighbours need them all,
        # its memories only a page.
        fields = self.store.get_unit_fields(bank_id, ids, ["entity_ids", "mentioned_at"])
        shared: dict[str, int] = {}
        for f in fields.values():
            for other in set(f.get("entity_ids") or ()) - {entity_id}:
                shared[other] = shared.get(other, 0) + 1
        first = sorted(ids, key=lambda i: (fields.get(i, {}).get("mentioned_at") or 0, i))[:limit]
        units = {u.id: u for u in self.store.get_units(bank_id, first)}
        by_id = {k: e for k, e in entities.items() if k in shared}
        neighbours = sorted(
            ({"entity": by_id[k], "shared": n} for k, n in shared.items() if k in by_id),
            key=lambda x: (-x["shared"], x["entity"].name),
        )
        return {
            "entity": found[0],
            "memories": [units[i] for i in first if i in units],
            "total": len(ids),
            "neighbours": neighbours,
        }

    def timeline(self, bank_id: str) -> list[dict[str, Any]]:
        """The bank's sessions over time, from its chunks (the raw turns): per document and
        session, the first and last chunk start, the chunk and turn counts; by start time."""
        self.get_bank(bank_id)
        spans: dict[tuple[str, str], dict[str, Any]] = {}
        for page in self.store.iter_chunks(bank_id):
            for c in page:
                s = spans.setdefault(
                    (c.document_id, c.session_id),
                    {
                        "document_id": c.document_id,
                        "session_id": c.session_id,
                        "start": c.started_at,
                        "end": c.started_at,
                        "chunks": 0,
                        "turns": 0,
                    },
                )
                s["start"], s["end"] = min(s["start"], c.started_at), max(s["end"], c.started_at)
                s["chunks"] += 1
                s["turns"] += len(c.turn_ids)
        return sorted(spans.values(), key=lambda s: (s["start"], s["document_id"], s["session_id"]))

    def get_memory(self, bank_id: str, unit_id: str) -> MemoryUnit:
        self.get_bank(bank_id)
        units = self.store.get_units(bank_id, [unit_id])
        if not units:
            raise NotFound(f"memory {unit_id!r} is not in bank {bank_id!r}", "memory_id")
        return units[0]

    def list_documents(self, bank_id: str) -> dict[str, dict[str, int]]:
        """``{document_id: {"units": n, "chunks": m}}`` for the bank."""
        self.get_bank(bank_id)
        return self.store.document_counts(bank_id)

    def list_entities(self, bank_id: str) -> list[Entity]:
        self.get_bank(bank_id)
        return sorted(self.store.list_entities(bank_id), key=lambda e: (-e.mention_count, e.name))

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # internals ----------------------------------------------------------------------------
    def _check_bank_id(self, bank_id: str) -> str:
        try:
            return check_bank_id(bank_id)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
