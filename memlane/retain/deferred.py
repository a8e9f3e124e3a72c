"""The hot path never waits on an LLM (Engram's System 1 / System 2).

With the LLM extractor configured and ``retain.defer_llm`` on, a retain through the API
(:meth:`memlane.engine.Memory.retain_items`) writes the *episode* at once: the lossless chunks
and one fact per turn from the rules (embedded, lexically indexed, recallable as soon as the
call returns). The LLM's extraction of the document runs afterwards on a background thread and
replaces the episode's facts with its own in one write; consolidation (slots, conflicts, the
tree) follows it as after any retain. A document retained again before its extraction ran is
extracted once, from its latest turns; one deleted meanwhile stays deleted.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping, Sequence

from memlane.model import Bank, Turn
from memlane.retain.chunking import ChunkInput, chunk_turns
from memlane.retain.facts import Fact

log = logging.getLogger(__name__)
_START = threading.Lock()


class FactsByChunk:
    """An extractor over facts extracted beforehand, by chunk id (the deferred job extracts
    outside the bank's write lease, then writes under it)."""

    name = "llm"

    def __init__(self, facts: Mapping[str, list[Fact]]) -> None:
        self.facts = facts

    def extract(self, bank: Bank, chunks: Sequence[ChunkInput]) -> list[list[Fact]]:
        return [self.facts[item.chunk.chunk_id] for item in chunks]


class DeferredExtraction:
    """The engine's deferred LLM extraction (mixed into :class:`memlane.engine.Memory`)."""

    settings: Any
    store: Any
    writer: Any
    extractor: Any
    retainer: Any
    get_bank: Callable[[str], Bank]
    _retained: Callable[[str], None]
    _extract_worker: Any

    def episode_extractor(self):
        """The extractor of the hot path when extraction is deferred (the LLM extractor's
        rules fallback), or None when retain extracts inline."""
        if not self.settings.retain.defer_llm or self.settings.retain.extractor != "llm":
            return None
        return getattr(self.extractor, "fallback", None)

    def _extract_later(
        self, bank_id: str, document_id: str, turns: Sequence[Turn], tags: Sequence[str]
    ) -> None:
        with _START:  # two first retains at once must not build two workers
            if self._extract_worker is None:
                from memlane.background import BackgroundWorker

                self._extract_pending: dict[str, tuple[Sequence[Turn], Sequence[str]]] = {}
                self._extract_lock = threading.Lock()
                self._extract_worker = BackgroundWorker(name="memlane-extract", max_pending=1024)
        key = f"{bank_id}\x00{document_id}"
        with self._extract_lock:
            self._extract_pending[key] = (turns, tags)
        self._extract_worker.submit_once(key, lambda: self._extract_now(key, bank_id, document_id))

    def _extract_now(self, key: str, bank_id: str, document_id: str) -> None:
        with self._extract_lock:
            pending = self._extract_pending.pop(key, None)
        if pending is None:
            return
        turns, tags = pending
        try:
            bank = self.get_bank(bank_id)
            items = list(chunk_turns(bank_id, document_id, turns, self.settings.retain.chunk_max_turns, tags))
            facts = self.extractor.extract(bank, items)  # the model, outside the write lease
            with self.writer.write(bank_id) as w:
                with self._extract_lock:
                    newer = key in self._extract_pending
                if newer or document_id not in self.store.document_counts(bank_id):
                    return  # replaced (its own job follows) or deleted since
                w.delete_document(document_id)
                by_chunk = {item.chunk.chunk_id: f for item, f in zip(items, facts)}
                self.retainer.retain(
                    bank, [(document_id, turns)], w, tags=tags, extractor=FactsByChunk(by_chunk)
                )
        except Exception as exc:  # noqa: BLE001 - logged: the episode stays, recallable
            log.warning(
                "deferred extraction of %s/%s failed: %s: %s", bank_id, document_id, type(exc).__name__, exc
            )
            return
        self._retained(bank_id)

    def wait_extraction(self) -> None:
        """Wait for the deferred LLM extractions queued so far."""
        if self._extract_worker is not None:
            self._extract_worker.flush()
