"""Dense-only baselines with a named embedder (``dense-minilm``, ``dense-bge``): plain cosine
between the question and every unit of the bank, both embedded by the eval with that embedder.

The bank's stored vectors come from whichever embedder it was retained with, so a baseline for
another embedder cannot search them; it embeds the same unit texts retain embeds (a unit's
``text``) and ranks them exactly. One bank is held at a time: the runs ask their questions bank
by bank (LoCoMo per conversation, LongMemEval one bank per question).
"""

from __future__ import annotations

import numpy as np

from evals.metrics import ranked_turns
from memlane.interfaces import Embedder


class DenseBaseline:
    """Exact cosine ranking of a bank's units with ``embedder`` (queries through
    ``embed_queries`` where the embedder has a query form, as recall does)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._bank: str | None = None
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._turns: list[list[str]] = []

    def _load(self, store, bank_id: str) -> None:
        units = [u for batch in store.iter_units(bank_id) for u in batch]
        self._matrix = self.embedder.embed([u.text for u in units])
        self._turns = [list(u.source_turns) for u in units]
        self._bank = bank_id

    def rank(self, store, bank_id: str, query: str, depth: int) -> list[str]:
        """The bank's source turns, best first, from its ``depth`` most similar units."""
        if self._bank != bank_id:
            self._load(store, bank_id)
        if not self._turns:
            return []
        embed_queries = getattr(self.embedder, "embed_queries", self.embedder.embed)
        scores = self._matrix @ np.asarray(embed_queries([query]), dtype=np.float32)[0]
        top = np.argsort(-scores, kind="stable")[:depth]
        return ranked_turns([self._turns[i] for i in top])
