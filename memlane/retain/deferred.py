"""The hot path never waits on an LLM (Engram's System 1 / System 2).

With the LLM extractor configured, ``retain.defer_llm`` on and a background scheduler
(``background.mode`` not "off"), a retain through the API
(:meth:`memlane.engine.Memory.retain_items`) writes the *episode* at once: the lossless chunks
and one fact per turn from the rules (embedded, lexically indexed, recallable as soon as the
call returns). The LLM's extraction of the document runs afterwards on the engine's scheduler
(first of its jobs: memlane/background.py) and replaces the episode's facts with its own in one write; consolidation (slots, conflicts, the
tree) follows it as after any retain. A document retained again before its extraction ran is
extracted once, from its latest turns; one deleted meanwhile stays deleted.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from memlane.background import Kind, Scheduler
from memlane.banks import require_bank
from memlane.interfaces import VectorStore
from memlane.records import Bank, Turn
from memlane.retain.chunking import ChunkInput, chunk_turns
from memlane.retain.facts import Extractor, Fact
from memlane.settings import Settings

if TYPE_CHECKING:
    from memlane.retain.pipeline import Retainer
    from memlane.writes import BankWriter

log = logging.getLogger(__name__)


class FactsByChunk:
    """An extractor over facts extracted beforehand, by chunk id (the deferred job extracts
    outside the bank's write lease, then writes under it)."""

    name = "llm"

    def __init__(self, facts: Mapping[str, list[Fact]]) -> None:
        self.facts = facts

    def extract(self, bank: Bank, chunks: Sequence[ChunkInput]) -> list[list[Fact]]:
        return [self.facts[item.chunk.chunk_id] for item in chunks]


class DeferredExtraction:
    """The engine's deferred LLM extraction: the episode's extractor for the hot path, and the
    jobs that replace its facts with the model's."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        writer: BankWriter,
        retainer: Retainer,
        scheduler: Scheduler,
        retained: Callable[[str], None],
    ) -> None:
        """``retained(bank_id)`` queues what follows a retain (memlane/components.py)."""
        self.settings = settings
        self.store = store
        self.writer = writer
        self.retainer = retainer
        self.extractor: Extractor = retainer.extractor
        self.scheduler = scheduler
        self.retained = retained
        # the latest turns of each document waiting for its job, by (bank, document) key
        self._pending: dict[str, tuple[Sequence[Turn], Sequence[str]]] = {}
        self._lock = threading.Lock()

    def episode_extractor(self) -> Extractor | None:
        """The extractor of the hot path when extraction is deferred (the LLM extractor's
        rules fallback), or None when retain extracts inline."""
        s = self.settings
        if not s.retain.defer_llm or s.retain.extractor != "llm" or s.background.mode == "off":
            return None
        return getattr(self.extractor, "fallback", None)

    def extract_later(
        self, bank_id: str, document_id: str, turns: Sequence[Turn], tags: Sequence[str]
    ) -> None:
        """Queue the model's extraction of the document (once: a newer retain of it replaces
        the turns a queued job will read)."""
        key = f"{bank_id}\x00{document_id}"
        with self._lock:
            self._pending[key] = (turns, tags)
        self.scheduler.submit(Kind.extract, key, lambda: self._extract_now(key, bank_id, document_id))

    def _extract_now(self, key: str, bank_id: str, document_id: str) -> None:
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is None:
            return
        turns, tags = pending
        try:
            bank = require_bank(self.store, bank_id)
            items = list(chunk_turns(bank_id, document_id, turns, self.settings.retain.chunk_max_turns, tags))
            facts = self.extractor.extract(bank, items)  # the model, outside the write lease
            with self.writer.write(bank_id) as w:
                with self._lock:
                    newer = key in self._pending
                if newer or document_id not in self.store.document_counts(bank_id):
                    return  # replaced (its own job follows) or deleted since
                by_chunk = {item.chunk.chunk_id: f for item, f in zip(items, facts)}
                self.retainer.replace(
                    bank, [(document_id, turns)], w, tags=tags, extractor=FactsByChunk(by_chunk)
                )
        except Exception as exc:  # noqa: BLE001 - logged: the episode stays, recallable
            log.warning(
                "deferred extraction of %s/%s failed: %s: %s", bank_id, document_id, type(exc).__name__, exc
            )
            return
        self.retained(bank_id)
