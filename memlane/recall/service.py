"""Recall on the engine: the request validated, the bank's derived state brought up to date
(or the store asked, for a bank this process does not hold yet), the pipeline run
(memlane/recall/pipeline.py) and the mental models close to the query put first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from pydantic import ValidationError

from memlane.banks import BankEmbedders, valid_bank_id
from memlane.curated.service import CuratedService
from memlane.errors import InvalidInput
from memlane.interfaces import VectorStore
from memlane.records import RecallRequest, RecallResult
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.derived import DerivedState
    from memlane.recall.pipeline import Recaller


class RecallService:
    """One recall call over the engine's store, derived state and recall pipeline."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        derived: DerivedState,
        recaller: Recaller,
        curated: CuratedService,
        embedders: BankEmbedders,
        settle: Callable[[str], float] | None = None,
    ) -> None:
        """``settle(bank)``: waits for the bank's pending fact resolution (read-your-writes:
        memlane/components.py ``settle_facts``) and gives the seconds waited."""
        self.settings = settings
        self.store = store
        self.derived = derived
        self.recaller = recaller
        self.curated = curated
        self.embedders = embedders
        self.settle = settle

    def recall(self, bank_id: str, query: str | RecallRequest, **options: Any) -> RecallResult:
        """Recall memories for ``query``; ``options`` are the fields of RecallRequest."""
        try:
            req = query if isinstance(query, RecallRequest) else RecallRequest(query=query, **options)
        except ValidationError as exc:
            raise InvalidInput.from_validation(exc) from None
        bank_id = valid_bank_id(bank_id)
        # Read-your-writes: a retain that returned before this call has its facts resolved
        # (its supersessions seen) before the bank is read; the wait is reported.
        waited = self.settle(bank_id) if self.settle is not None else 0.0
        cold = self.settings.recall.cold_bank == "store" and not self.derived.held(bank_id)
        revision = self.store.get_revision(bank_id) if cold else self.derived.ensure(bank_id).revision
        # The bank exists, and its query is embedded by the embedder of its vectors: its record
        # is read once per revision (a bank never written to has none: read every time).
        embedder = self.embedders.for_bank(bank_id, revision)
        if cold:
            # A bank this process does not hold: answered by the store, then loaded in the
            # background (started after the answer: a load running beside it took the GIL
            # from it, and a first recall at 1k memories was no faster than waiting).
            try:
                result = self.recaller.recall(bank_id, req, revision, search=self.store, embedder=embedder)
            finally:
                self.derived.warm_later(bank_id)
            result.cold = True
        else:
            result = self.recaller.recall(bank_id, req, revision, embedder=embedder)
        if waited:
            result.timings_ms["facts_wait"] = round(waited * 1000.0, 1)
        return self.curated.with_mental_models(bank_id, req, result, revision)
