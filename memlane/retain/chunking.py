"""Split a conversation into chunks: consecutive turns of one session, kept losslessly."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Sequence

from memlane.ids import chunk_id
from memlane.records import Chunk, Turn
from memlane.records.limits import MAX_TEXT_BYTES


def format_turn(turn: Turn) -> str:
    """One line of chunk text: ``Speaker: text`` plus the caption of the image the turn shared."""
    return turn.line


@dataclass(slots=True)
class ChunkInput:
    """A chunk with its turns and the session's turns just before and after it, so an
    extractor sees each turn's neighbours whatever the batch boundaries."""

    chunk: Chunk
    turns: list[Turn]
    before: Turn | None = None
    after: Turn | None = None


def chunk_turns(
    bank_id: str, document_id: str, turns: Sequence[Turn], max_turns: int, tags: Sequence[str] = ()
) -> list[ChunkInput]:
    """Group turns by session (in input order) and cut each session into windows of at most
    ``max_turns`` turns whose text fits a chunk (MAX_TEXT_BYTES: a window of long turns closes
    early; a turn always fits alone, :class:`~memlane.records.Turn` checks it)."""
    out: list[ChunkInput] = []
    for session_id, group in groupby(turns, key=lambda t: t.session_id):
        session_turns = list(group)
        for index, (start, end) in enumerate(_windows(session_turns, max_turns)):
            window = session_turns[start:end]
            chunk = Chunk(
                chunk_id=chunk_id(bank_id, document_id, session_id, index),
                bank_id=bank_id,
                document_id=document_id,
                session_id=session_id,
                index=index,
                text="\n".join(format_turn(t) for t in window),
                turn_ids=[t.turn_id for t in window],
                started_at=window[0].timestamp,
                tags=list(tags),
            )
            out.append(
                ChunkInput(
                    chunk,
                    window,
                    session_turns[start - 1] if start else None,
                    session_turns[end] if end < len(session_turns) else None,
                )
            )
    return out


def _windows(turns: Sequence[Turn], max_turns: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each window: ``max_turns`` turns, fewer where their lines (joined by
    newlines) would pass MAX_TEXT_BYTES. Sessions of ordinary turns cut as by count alone."""
    out: list[tuple[int, int]] = []
    start = 0
    while start < len(turns):
        end, size = start + 1, len(turns[start].line.encode("utf-8"))
        while end < len(turns) and end - start < max_turns:
            size += 1 + len(turns[end].line.encode("utf-8"))
            if size > MAX_TEXT_BYTES:
                break
            end += 1
        out.append((start, end))
        start = end
    return out
