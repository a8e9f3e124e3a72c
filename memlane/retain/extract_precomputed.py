"""An extractor over LLM replies computed beforehand (the backfill's vLLM batch stage,
``pipelines/llm_extract.py``): each chunk's reply is validated exactly like the HTTP path's
(:func:`memlane.retain.extract_llm.facts_from_reply`), and a missing or rejected one falls back
to another extractor (the rules), so retain is the same code whichever backend extracted."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Iterator, Mapping, Sequence

from memlane.records import Bank
from memlane.retain.chunking import ChunkInput
from memlane.retain.extract_llm import facts_from_reply
from memlane.retain.facts import Fact

log = logging.getLogger(__name__)


class PrecomputedExtractor:
    """An Extractor over replies computed beforehand (by the vLLM batch stage): each chunk's
    reply is validated like the HTTP path's; a missing or rejected one falls back to
    ``fallback`` (the rules)."""

    name = "llm-batch"

    def __init__(self, replies: Mapping[str, str], fallback, *, model: str = "") -> None:
        self.replies = replies
        self.fallback = fallback
        self.model = model
        self.stats: Counter = Counter()
        self._lock = threading.Lock()

    def extract(self, bank: Bank, chunks: Sequence[ChunkInput]) -> list[list[Fact]]:
        results: list[list[Fact] | None] = []
        for item in chunks:
            reply = self.replies.get(item.chunk.chunk_id)
            facts = None
            if reply is None:
                reason = "no reply"
            else:
                try:
                    facts = facts_from_reply(bank, item, reply, model=self.model)
                except ValueError as exc:
                    reason = str(exc)
            if facts is None:
                log.warning(
                    "batch extraction of chunk %s rejected, using the rules: %s", item.chunk.chunk_id, reason
                )
            with self._lock:
                self.stats["llm" if facts is not None else "fallback"] += 1
            results.append(facts)
        failed = [c for c, f in zip(chunks, results) if f is None]
        rescued: Iterator[list[Fact]] = iter(self.fallback.extract(bank, failed) if failed else [])
        return [f if f is not None else next(rescued) for f in results]
