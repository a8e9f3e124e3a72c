"""Curated memory on the engine: mental
models (named questions with a consolidated, sourced answer, refreshed when new facts touch
them and returned first by recall) and directives (user rules for reflect).

Both are JSON records in the store's operations collection ("model:<bank>:<id>",
"directive:<bank>:<id>"; memlane/stores/milvus/records.py), deleted with the bank. Ids are
the user's (lowercase slugs), so a PUT is idempotent.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence

import numpy as np
from pydantic import ValidationError

from memlane.banks import require_bank
from memlane.curated.answer import RECALL_TOKENS, answer_question
from memlane.curated.touch import MODEL_RECALL_COSINE, TOUCH_CANDIDATES, touched
from memlane.errors import BankNotFound, InvalidInput, NotFound
from memlane.interfaces import Embedder, VectorStore
from memlane.records import Directive, MentalModel, RecalledModel, RecallRequest, RecallResult, now_utc
from memlane.tree.consolidators import Consolidator

if TYPE_CHECKING:
    from memlane.writes import BankWriter

log = logging.getLogger(__name__)

# Per bank: every model is compared with each recall's query and checked after each retain,
# so their number bounds that work.
MAX_PER_BANK = 100
# Internal fields of a model's record, never part of the MentalModel answered.
_VECTOR, _SEEN = "_vector", "_seen"
# Banks whose models recall keeps per revision (most have none: an empty list each). Reading
# them was a query of the operations collection every recall: 1.1 ms of the service's CPU and
# its Milvus Lite server's own, ~5% of a recall's (py-spy, the peer workload, Dec 2026).
KEPT_BANKS = 256


class CuratedStore(VectorStore, Protocol):
    """A store that also keeps curated records (memlane/stores/milvus/records.py)."""

    def put_curated(self, kind: str, bank_id: str, item_id: str, record: dict[str, Any]) -> None: ...
    def get_curated(self, kind: str, bank_id: str, item_id: str) -> dict[str, Any] | None: ...
    def list_curated(self, kind: str, bank_id: str) -> list[dict[str, Any]]: ...
    def delete_curated(self, kind: str, bank_id: str, item_id: str) -> bool: ...


class CuratedService:
    """Mental models and directives over one engine's store."""

    def __init__(
        self,
        store: CuratedStore,
        embedder: Embedder,
        recall: Callable[..., RecallResult],
        consolidator: Callable[[], Consolidator],
        writer: Callable[[], BankWriter] | None = None,
    ) -> None:
        """``recall`` is the engine's Memory.recall; ``consolidator()`` the settings' one;
        ``writer()`` the engine's write path: a model written or deleted moves the bank's
        revision, which recall keeps the models by (without it, recall reads them every time).
        Asked for only when a model is written: a recall builds no write path (its imports
        were 0.09 s of a 1.4 s CLI recall)."""
        self.store = store
        self.embedder = embedder
        self.recall = recall
        self.consolidator = consolidator
        self.writer = writer
        # bank -> (revision, its models' records and vectors), least recent first
        self._kept: OrderedDict[str, tuple[str, list[dict[str, Any]], np.ndarray]] = OrderedDict()
        self._kept_lock = threading.Lock()

    @contextmanager
    def _models_written(self, bank_id: str) -> Iterator[Callable[[], None]]:
        """The block of a model write, as a write to the bank (memlane/writes.py: its lease
        held, its revision bumped once at the end) when there is a writer; the block calls what
        it yields when it changed a model, so that every process's recall reads them again."""
        if self.writer is None:
            yield lambda: None
            return
        with self.writer().write(bank_id) as w:
            yield w.curated

    # mental models ----------------------------------------------------------------------
    def put_mental_model(self, bank_id: str, model_id: str, question: str) -> tuple[MentalModel, bool]:
        """Pin ``question`` on the bank as model ``model_id`` and write its answer now; and
        whether it was created. The same question again changes nothing (idempotent); a new
        question is answered afresh. Raises InvalidInput, BankNotFound."""
        require_bank(self.store, bank_id)
        draft = _validated(MentalModel, "model_id", id=model_id, bank_id=bank_id, question=question)
        current = self.store.get_curated("model", bank_id, draft.id)
        if current is not None and current["question"] == draft.question:
            return _model(current), False
        if current is None and len(self.store.list_curated("model", bank_id)) >= MAX_PER_BANK:
            raise InvalidInput(f"model_id: bank {bank_id!r} already holds {MAX_PER_BANK} mental models")
        record = draft.model_dump(mode="json")
        if current is not None:
            record["created_at"] = current["created_at"]
        return self._refresh_record(bank_id, record), current is None

    def get_mental_model(self, bank_id: str, model_id: str) -> MentalModel:
        """One model with its answer and sources. Raises NotFound."""
        return _model(self._model_record(bank_id, model_id))

    def list_mental_models(self, bank_id: str) -> list[MentalModel]:
        """The bank's models by id."""
        require_bank(self.store, bank_id)
        return [_model(r) for r in self.store.list_curated("model", bank_id)]

    def delete_mental_model(self, bank_id: str, model_id: str) -> None:
        """Delete one model. Raises NotFound."""
        require_bank(self.store, bank_id)
        with self._models_written(bank_id) as changed:
            deleted = self.store.delete_curated("model", bank_id, model_id)
            if deleted:
                changed()
        if not deleted:
            raise NotFound(f"mental model {model_id!r} is not in bank {bank_id!r}", "model_id")

    def refresh_mental_model(self, bank_id: str, model_id: str) -> MentalModel:
        """Recall the model's question again and rewrite its answer. Raises NotFound."""
        return self._refresh_record(bank_id, self._model_record(bank_id, model_id))

    def _model_record(self, bank_id: str, model_id: str) -> dict[str, Any]:
        require_bank(self.store, bank_id)
        record = self.store.get_curated("model", bank_id, model_id) if isinstance(model_id, str) else None
        if record is None:
            raise NotFound(f"mental model {model_id!r} is not in bank {bank_id!r}", "model_id")
        return record

    def _refresh_record(self, bank_id: str, record: dict[str, Any]) -> MentalModel:
        question = record["question"]
        vector = self.embedder.embed_queries([question])[0]
        answer = answer_question(
            question,
            # flat recall: the memory units themselves (the tree's stage would answer with its
            # nodes instead, leaving out the units they quote), consolidated as the tree does
            lambda q: self.recall(bank_id, q, max_tokens=RECALL_TOKENS, budget="mid", planner="off"),
            lambda ids: self.store.get_units(bank_id, ids, with_embedding=True),
            self.consolidator(),
            {e.entity_id: e.name for e in self.store.list_entities(bank_id)},
        )
        # What the answer has seen: what recall gave it and the question's nearest memories
        # now; a memory outside both that comes near the question later is new (touch.py).
        nearest = self.store.search_dense(bank_id, vector, TOUCH_CANDIDATES, fields=[])
        seen = sorted({*answer.recalled, *(h.id for h in (nearest[0] if nearest else []))})
        out = MentalModel.model_validate(
            {
                **{k: v for k, v in record.items() if not k.startswith("_")},
                "answer": answer.text,
                "sources": [s.model_dump() for s in answer.sources],
                "recalled": len(answer.recalled),
                "consolidator": answer.consolidator,
                "metadata": answer.metadata,
                "refreshed_at": now_utc(),
            }
        )
        if self.store.get_bank(bank_id) is None:
            raise BankNotFound(bank_id)  # deleted meanwhile: write nothing it would not delete
        current = self.store.get_curated("model", bank_id, out.id)
        if record.get("refreshed_at") and (current is None or current["question"] != question):
            # deleted or re-asked while this refresh ran: its answer is for nothing that exists
            return _model(current) if current else out
        with self._models_written(bank_id) as changed:
            self.store.put_curated(
                "model",
                bank_id,
                out.id,
                {**out.model_dump(mode="json"), _VECTOR: [round(float(x), 6) for x in vector], _SEEN: seen},
            )
            changed()
        return out

    # after a write: refresh the models new facts touch -------------------------------------
    def refresh_touched(self, bank_id: str) -> list[str]:
        """Refresh every model of the bank that new facts touch (a model that a new memory
        comes near, or whose cited memory is gone: memlane/curated/touch.py); the ids
        refreshed."""
        done = []
        for record in self.store.list_curated("model", bank_id):
            try:
                if touched(self.store, bank_id, record):
                    self._refresh_record(bank_id, record)
                    done.append(record["id"])
            except Exception as exc:  # noqa: BLE001 - one model's failure must not stop the others
                log.warning(
                    "refresh of mental model %s/%s failed: %s: %s",
                    bank_id,
                    record.get("id"),
                    type(exc).__name__,
                    exc,
                )
        return done

    # recall: the models close to the query come first ------------------------------------
    def with_mental_models(
        self, bank_id: str, req: RecallRequest, result: RecallResult, revision: str = ""
    ) -> RecallResult:
        """Fill ``result.mental_models``: the bank's models whose question's cosine to the
        query is at least MODEL_RECALL_COSINE, best first. ``revision``: the bank's revision
        token as the recall read it; the models are kept per token (a model write moves it),
        and read from the store for a bank never written to ("")."""
        records, vectors = self._models(bank_id, revision)
        if not records:
            return result
        query = self.embedder.embed_queries([req.query])[0]
        scores = vectors @ np.asarray(query, dtype=np.float32)
        order = sorted(range(len(records)), key=lambda i: (-float(scores[i]), records[i]["id"]))
        result.mental_models = [
            RecalledModel(model=_model(records[i]), score=round(float(scores[i]), 4))
            for i in order
            if scores[i] >= MODEL_RECALL_COSINE
        ]
        return result

    def _models(self, bank_id: str, revision: str) -> tuple[list[dict[str, Any]], np.ndarray]:
        """The bank's model records with a vector, and their vectors; read once per revision
        while there is a writer to move it (a token read before the list: a write between the
        two leaves a newer list under the older token, read again at the next token)."""
        keep = self.writer is not None and bool(revision)
        if keep:
            with self._kept_lock:
                kept = self._kept.get(bank_id)
                if kept is not None and kept[0] == revision:
                    self._kept.move_to_end(bank_id)
                    return kept[1], kept[2]
        records = [r for r in self.store.list_curated("model", bank_id) if r.get(_VECTOR)]
        vectors = np.asarray([r[_VECTOR] for r in records], dtype=np.float32)
        if keep:
            with self._kept_lock:
                self._kept[bank_id] = (revision, records, vectors)
                self._kept.move_to_end(bank_id)
                while len(self._kept) > KEPT_BANKS:
                    self._kept.popitem(last=False)
        return records, vectors

    # directives -------------------------------------------------------------------------
    def put_directive(
        self, bank_id: str, directive_id: str, text: str, tags: Sequence[str] = ()
    ) -> tuple[Directive, bool]:
        """Create or replace directive ``directive_id``; and whether it was created. Raises
        InvalidInput, BankNotFound."""
        require_bank(self.store, bank_id)
        draft = _validated(
            Directive, "directive_id", id=directive_id, bank_id=bank_id, text=text, tags=list(tags)
        )
        current = self.store.get_curated("directive", bank_id, draft.id)
        if current is not None:
            same = current["text"] == draft.text and current["tags"] == draft.tags
            if same:
                return Directive.model_validate(current), False
            draft = draft.model_copy(update={"created_at": Directive.model_validate(current).created_at})
        elif len(self.store.list_curated("directive", bank_id)) >= MAX_PER_BANK:
            raise InvalidInput(f"directive_id: bank {bank_id!r} already holds {MAX_PER_BANK} directives")
        self.store.put_curated("directive", bank_id, draft.id, draft.model_dump(mode="json"))
        return draft, current is None

    def list_directives(self, bank_id: str) -> list[Directive]:
        """The bank's directives by id."""
        require_bank(self.store, bank_id)
        return [Directive.model_validate(r) for r in self.store.list_curated("directive", bank_id)]

    def delete_directive(self, bank_id: str, directive_id: str) -> None:
        """Delete one directive. Raises NotFound."""
        require_bank(self.store, bank_id)
        if not self.store.delete_curated("directive", bank_id, directive_id):
            raise NotFound(f"directive {directive_id!r} is not in bank {bank_id!r}", "directive_id")


def _validated(cls, id_name: str, **fields: Any):
    """``cls`` from ``fields``, or InvalidInput naming each bad field (the id by its API name)."""
    try:
        return cls.model_validate(fields)
    except ValidationError as exc:
        parts = [
            f"{id_name if e['loc'] == ('id',) else '.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in exc.errors()
        ]
        raise InvalidInput("; ".join(parts)) from None


def _model(record: dict[str, Any]) -> MentalModel:
    return MentalModel.model_validate({k: v for k, v in record.items() if not k.startswith("_")})
