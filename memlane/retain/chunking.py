"""Split a conversation into chunks: consecutive turns of one session, kept losslessly."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Sequence

from memlane.ids import chunk_id
from memlane.records import Chunk, Turn


def format_turn(turn: Turn) -> str:
    """One line of chunk text: ``Speaker: text`` plus the caption of the image the turn shared."""
    line = f"{turn.speaker}: {turn.text}"
    if turn.kind == "image" and turn.caption:
        line += f" [shares an image: {turn.caption}]"
    return line


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
    ``max_turns`` turns."""
    out: list[ChunkInput] = []
    for session_id, group in groupby(turns, key=lambda t: t.session_id):
        session_turns = list(group)
        for start in range(0, len(session_turns), max_turns):
            window = session_turns[start : start + max_turns]
            index = start // max_turns
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
                    session_turns[start + max_turns] if start + max_turns < len(session_turns) else None,
                )
            )
    return out
