"""The JSON Lines reader of the engine (``memlane retain``, ``Memory.retain_file``): one turn
object per line with ``speaker`` (or its alias ``role``), ``text``, ``timestamp`` and
``session_id``; optional ``document_id`` (default: the file stem), ``turn_id`` (default
``"{session_id}:{n}"``, n the 1-based position in its session) and ``metadata`` (an object);
any other key goes to the turn's metadata. Turns are grouped into Conversations by
``document_id``, sessions in first-appearance order. Validation is all-or-nothing.

The backfill's generic records (the same keys plus ``bank_id``, read with rejects) are read by
``pipelines.corpus``, which keeps this grouping and order so both write the same memories.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlane.ingest.common import Conversation, InputError, lines, make_turn, parse_time, type_name
from memlane.model import Turn

# JSONL keys the loader interprets itself; any other key is kept in Turn.metadata.
TURN_KEYS = {"speaker", "role", "text", "timestamp", "session_id", "turn_id"}
_JSONL_KNOWN_KEYS = {
    "speaker",
    "role",
    "text",
    "timestamp",
    "session_id",
    "document_id",
    "turn_id",
    "metadata",
}


def _required_str(obj: dict, key: str, where: str, *, alias: str | None = None) -> str:
    if key in obj:
        used = key
    elif alias is not None and alias in obj:
        used = alias
    else:
        also = f" (or its alias {alias!r})" if alias else ""
        raise InputError(f"{where}: missing field {key!r}{also}")
    return _non_empty_str(obj[used], used, where)


def _non_empty_str(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: field {key!r}: expected a string, got {type_name(value)}")
    if not value.strip():
        raise InputError(f"{where}: field {key!r}: must not be empty")
    return value


@dataclass
class _Doc:
    speakers: list[str] = field(default_factory=list)
    sessions: dict[str, list[Turn]] = field(default_factory=dict)  # first-appearance order
    turn_lines: dict[str, int] = field(default_factory=dict)


def read_jsonl(path: Path, text: str) -> list[Conversation]:
    """The conversations of a JSON Lines text read from ``path``; :class:`InputError` on the
    first problem, naming the line and field."""
    name = path.name
    docs: dict[str, _Doc] = {}
    for lineno, line in enumerate(lines(text), start=1):
        if not line.strip():
            continue
        where = f"{name} line {lineno}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            col = getattr(exc, "colno", None)
            at = f" at column {col}" if col is not None else ""
            raise InputError(f"{where}: not valid JSON: {msg}{at}") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object, got {type_name(obj)}")

        speaker = _required_str(obj, "speaker", where, alias="role")
        if "text" not in obj:
            raise InputError(f"{where}: missing field 'text'")
        text_value = _non_empty_str(obj["text"], "text", where)
        session_id = _required_str(obj, "session_id", where)
        if "timestamp" not in obj:
            raise InputError(f"{where}: missing field 'timestamp'")
        raw_ts = obj["timestamp"]
        if isinstance(raw_ts, bool) or not isinstance(raw_ts, (str, int, float)):
            raise InputError(
                f"{where}: field 'timestamp': expected a string or a number, got {type_name(raw_ts)}"
            )
        if isinstance(raw_ts, str) and not raw_ts.strip():
            raise InputError(f"{where}: field 'timestamp': must not be empty")

        def ts_where(where: str = where) -> str:
            return f"{where}: field 'timestamp'"

        when = parse_time(raw_ts, ts_where)
        document_id = path.stem
        if "document_id" in obj:
            document_id = _non_empty_str(obj["document_id"], "document_id", where)
        meta: dict[str, Any] = {}
        if "metadata" in obj:
            if not isinstance(obj["metadata"], dict):
                raise InputError(
                    f"{where}: field 'metadata': expected an object, got {type_name(obj['metadata'])}"
                )
            meta.update(obj["metadata"])
        if "speaker" in obj and "role" in obj:
            meta["role"] = obj["role"]
        meta.update({k: v for k, v in obj.items() if k not in _JSONL_KNOWN_KEYS})

        doc = docs.setdefault(document_id, _Doc())
        session = doc.sessions.setdefault(session_id, [])
        index = len(session)
        if "turn_id" in obj:
            turn_id = _non_empty_str(obj["turn_id"], "turn_id", where)
        else:
            turn_id = f"{session_id}:{index + 1}"
        if turn_id in doc.turn_lines:
            raise InputError(
                f"{where}: field 'turn_id': duplicate turn_id {turn_id!r} in document "
                f"{document_id!r} (first on line {doc.turn_lines[turn_id]})"
            )
        doc.turn_lines[turn_id] = lineno
        if speaker not in doc.speakers:
            doc.speakers.append(speaker)
        session.append(
            make_turn(
                where,
                document_id=document_id,
                session_id=session_id,
                turn_id=turn_id,
                index=index,
                speaker=speaker,
                text=text_value,
                timestamp=when,
                metadata=meta,
            )
        )

    if not docs:
        raise InputError(f"{name}: file is empty (no turns)")
    return [
        Conversation(
            document_id=doc_id,
            turns=[t for turns in doc.sessions.values() for t in turns],
            speakers=doc.speakers,
            metadata={"format": "jsonl", "source": name},
        )
        for doc_id, doc in docs.items()
    ]
