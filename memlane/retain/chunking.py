"""Split a conversation into chunks: consecutive turns of one session, kept losslessly."""

from __future__ import annotations

from itertools import groupby
from typing import Sequence

from memlane.ids import chunk_id
from memlane.model import Chunk, Turn


def format_turn(turn: Turn) -> str:
    """One line of chunk text: ``Speaker: text`` plus an image caption when the turn had one."""
    caption = turn.metadata.get("blip_caption")
    line = f"{turn.speaker}: {turn.text}"
    if caption:
        line += f" [shares an image: {caption}]"
    return line


def chunk_turns(bank_id: str, document_id: str, turns: Sequence[Turn], max_turns: int,
                tags: Sequence[str] = ()) -> list[tuple[Chunk, list[Turn]]]:
    """Group turns by session (in input order) and cut each session into windows of at most
    ``max_turns`` turns. Returns each chunk with the turns it holds."""
    out: list[tuple[Chunk, list[Turn]]] = []
    for session_id, group in groupby(turns, key=lambda t: t.session_id):
        session_turns = list(group)
        for start in range(0, len(session_turns), max_turns):
            window = session_turns[start:start + max_turns]
            index = start // max_turns
            chunk = Chunk(
                chunk_id=chunk_id(bank_id, document_id, session_id, index),
                bank_id=bank_id, document_id=document_id, session_id=session_id, index=index,
                text="\n".join(format_turn(t) for t in window),
                turn_ids=[t.turn_id for t in window],
                started_at=window[0].timestamp, tags=list(tags),
            )
            out.append((chunk, window))
    return out
