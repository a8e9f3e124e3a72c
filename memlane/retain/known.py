"""Extractors that answer with facts extracted beforehand: a retain's held chunks extracted to be
compared (:class:`Known`), and a one-batch call's chunks extracted on a thread while the bank is
read (:class:`Ahead`, memlane/retain/pipeline.py)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Mapping, Sequence

from memlane.records import Bank
from memlane.retain.chunking import ChunkInput
from memlane.retain.facts import Extractor, Fact


class Known:
    """An extractor that answers with facts extracted beforehand where it has them."""

    def __init__(self, known: Mapping[str, list[Fact]], inner: Extractor) -> None:
        self.known, self.inner, self.name = known, inner, inner.name

    def extract(self, bank: Bank, chunks: Sequence[ChunkInput]) -> list[list[Fact]]:
        missing = [c for c in chunks if c.chunk.chunk_id not in self.known]
        got = iter(self.inner.extract(bank, missing) if missing else ())
        return [self.known[c.chunk.chunk_id] if c.chunk.chunk_id in self.known else next(got) for c in chunks]


class Ahead:
    """An extractor whose facts for one call's chunks were started on a thread before the bank
    was read, so extraction overlaps the store's reads instead of following them; a chunk it
    was not given is extracted when asked."""

    def __init__(
        self, future: Future[list[list[Fact]]], items: Sequence[ChunkInput], inner: Extractor
    ) -> None:
        self.future, self.inner, self.name = future, inner, inner.name
        self.ids = [c.chunk.chunk_id for c in items]

    def extract(self, bank: Bank, chunks: Sequence[ChunkInput]) -> list[list[Fact]]:
        return Known(dict(zip(self.ids, self.future.result())), self.inner).extract(bank, chunks)
