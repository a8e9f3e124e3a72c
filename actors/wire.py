"""The retain worker's input wire format: one JSON string per bank row of the Ray dataset.

Plain JSON (not pickles) keeps rows portable across Python versions on a cluster; timestamps
are ISO strings, which round trip a UTC datetime exactly. It lives beside the actor that reads
it (:class:`actors.retain.RetainWorker`); the backfill driver (``pipelines.backfill``) writes it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Protocol, Sequence

from memlane.records import Turn

Documents = list[tuple[str, list[Turn]]]


class HasDocuments(Protocol):
    """A bank's input: ``documents`` in retain order (e.g. ``pipelines.corpus.BankInput``)."""

    @property
    def documents(self) -> Sequence[tuple[str, Sequence[Turn]]]: ...


def encode_bank(bank: HasDocuments) -> str:
    """The bank's documents as one JSON string (see :func:`decode_bank`)."""
    docs = []
    for document_id, turns in bank.documents:
        docs.append([document_id, [_row(t) for t in turns]])
    return json.dumps(docs, ensure_ascii=False, separators=(",", ":"))


def _row(t: Turn) -> list:
    row = [t.session_id, t.turn_id, t.index, t.speaker, t.text, t.timestamp.isoformat(), t.metadata or None]
    if t.kind != "text":  # a turn that shares an image adds its kind and caption; text rows keep their form
        row += [t.kind, t.caption]
    return row


def decode_bank(payload: str) -> Documents:
    """Inverse of :func:`encode_bank`: ``[(document_id, [Turn, ...]), ...]``."""
    out = []
    for document_id, rows in json.loads(payload):
        turns = [
            Turn(
                document_id=document_id,
                session_id=s,
                turn_id=tid,
                index=i,
                speaker=sp,
                text=tx,
                timestamp=datetime.fromisoformat(ts),
                metadata=meta or {},
                **dict(zip(("kind", "caption"), shared)),
            )
            for s, tid, i, sp, tx, ts, meta, *shared in rows
        ]
        out.append((document_id, turns))
    return out
