"""The one JSON Lines reader: one turn object per line with ``speaker`` (or its alias
``role``), ``text``, ``timestamp`` and ``session_id`` (strings; a number is refused, not
guessed into a string); optional ``document_id`` (default: the file stem), ``turn_id`` (default
``"{session_id}:{n}"``, n the 1-based position in its session), ``metadata`` (an object), and
for a turn that shares an image ``kind`` ("image") with its ``caption`` (LoCoMo's
``blip_caption`` key is read as such a caption) and ``bank_id`` (the bank, never the turn's
metadata); any other key goes to the turn's metadata. Turns are grouped into documents by
``document_id``, sessions in first-appearance order.

Two callers, one set of rules: :func:`read_jsonl` (``memlane retain``, ``Memory.retain_file``)
validates all or nothing; the backfill (``pipelines.corpus``) reads the same records with
:func:`parse_line`, :func:`parse_record` and :class:`DocumentTurns` and rejects bad ones alone,
so both write the same memories from the same lines. Their errors give the reason only (the
field and what is wrong); each caller adds where it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from pydantic import ValidationError

from memlane.ingest.common import (
    Conversation,
    InputError,
    field_error,
    json_problem,
    lines,
    parse_time,
    type_name,
)
from memlane.records import Turn

# JSONL keys the loader interprets itself; any other key is kept in Turn.metadata.
TURN_KEYS = {"speaker", "role", "text", "timestamp", "session_id", "turn_id"}
# ``bank_id`` says which bank a line goes to (the backfill routes by it, ``memlane retain
# --bank`` names the bank itself): never the turn's metadata, so that both read the same turns
# from the same lines and a retain of a backfilled file finds its input unchanged.
_JSONL_KNOWN_KEYS = frozenset(
    TURN_KEYS | {"bank_id", "document_id", "metadata", "kind", "caption", "blip_caption"}
)


@dataclass(frozen=True)
class TurnRecord:
    """One validated line; ``document_id`` / ``turn_id`` are None when the line has none."""

    speaker: str
    text: str
    session_id: str
    timestamp: datetime
    document_id: str | None
    turn_id: str | None
    metadata: dict[str, Any]
    kind: str = "text"
    caption: str = ""


def _required_str(obj: dict, key: str, *, alias: str | None = None) -> str:
    if key in obj:
        used = key
    elif alias is not None and alias in obj:
        used = alias
    else:
        also = f" (or its alias {alias!r})" if alias else ""
        raise InputError(f"missing field {key!r}{also}")
    return _non_empty_str(obj[used], used)


def _non_empty_str(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"field {key!r}: expected a string, got {type_name(value)}")
    if not value.strip():
        raise InputError(f"field {key!r}: must not be empty")
    return value


def parse_line(line: str | bytes) -> dict[str, Any]:
    """One line as a JSON object; :class:`InputError` with the reason when it is not one. The
    line may end in its ``\n`` or ``\r\n`` (a file read line by line): the terminator is no
    part of the record, so a line cut short is reported at the column past its last character,
    not at "column 1" of a second line the parser would see."""
    if isinstance(line, bytes):
        line = _decoded(line)
    line = line.removesuffix("\n").removesuffix("\r")
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise InputError(f"not valid JSON: {json_problem(exc)}") from None
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {type_name(obj)}")
    return obj


def _decoded(raw: bytes) -> str:
    """A line read as bytes, as text (a byte-order mark dropped, as json.loads of bytes does)."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8", errors="replace")) + 1
        raise InputError(f"not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at column {column})") from None


def parse_record(obj: dict[str, Any], routing_keys: Iterable[str] = ()) -> TurnRecord:
    """Validate one turn object; :class:`InputError` naming the first bad field.
    ``routing_keys`` are the caller's own keys (the backfill's ``bank_id``), kept out of the
    turn's metadata."""
    speaker = _required_str(obj, "speaker", alias="role")
    if "text" not in obj:
        raise InputError("missing field 'text'")
    text = _non_empty_str(obj["text"], "text")
    session_id = _required_str(obj, "session_id")
    if "timestamp" not in obj:
        raise InputError("missing field 'timestamp'")
    raw_ts = obj["timestamp"]
    # A datetime comes from a typed source (a Parquet timestamp column), never from JSON.
    if isinstance(raw_ts, bool) or not isinstance(raw_ts, (str, int, float, datetime)):
        raise InputError(f"field 'timestamp': expected a string or a number, got {type_name(raw_ts)}")
    if isinstance(raw_ts, str) and not raw_ts.strip():
        raise InputError("field 'timestamp': must not be empty")
    when = parse_time(raw_ts, lambda: "field 'timestamp'")
    document_id = _non_empty_str(obj["document_id"], "document_id") if "document_id" in obj else None
    turn_id = _non_empty_str(obj["turn_id"], "turn_id") if "turn_id" in obj else None
    meta: dict[str, Any] = {}
    if "metadata" in obj:
        if not isinstance(obj["metadata"], dict):
            raise InputError(f"field 'metadata': expected an object, got {type_name(obj['metadata'])}")
        meta.update(obj["metadata"])
    if "speaker" in obj and "role" in obj:
        meta["role"] = obj["role"]
    known = _JSONL_KNOWN_KEYS.union(routing_keys)
    meta.update({k: v for k, v in obj.items() if k not in known})
    kind, caption = _image(obj)
    return TurnRecord(speaker, text, session_id, when, document_id, turn_id, meta, kind, caption)


def _image(obj: dict[str, Any]) -> tuple[str, str]:
    """The turn's ``kind`` and ``caption``: given as such, or LoCoMo's ``blip_caption`` key
    (files written before the engine had image turns), which makes it an image turn."""
    caption = obj.get("caption", obj.get("blip_caption", ""))
    if not isinstance(caption, str):
        raise InputError(f"field 'caption': expected a string, got {type_name(caption)}")
    kind = obj.get("kind", "image" if caption.strip() else "text")
    if kind not in ("text", "image"):
        raise InputError(f"field 'kind': must be 'text' or 'image', got {kind!r}")
    return kind, caption


@dataclass
class _Doc:
    speakers: list[str] = field(default_factory=list)
    sessions: dict[str, list[Turn]] = field(default_factory=dict)  # first-appearance order
    turn_at: dict[str, str] = field(default_factory=dict)  # turn id -> where it first was


class DocumentTurns:
    """Turns grouped by document, then by session, both in first-appearance order: the order
    a retain writes them in. Turn ids are unique within a document."""

    def __init__(self) -> None:
        self._docs: dict[str, _Doc] = {}

    def add(self, rec: TurnRecord, document_id: str, where: str) -> Turn:
        """Add one record to ``document_id`` (the record's own wins); ``where`` names it in a
        later duplicate's message. :class:`InputError` (nothing added) on a duplicate turn id
        or a turn the model refuses."""
        document_id = rec.document_id or document_id
        doc = self._docs.get(document_id) or _Doc()
        index = len(doc.sessions.get(rec.session_id, ()))
        turn_id = rec.turn_id if rec.turn_id is not None else f"{rec.session_id}:{index + 1}"
        if turn_id in doc.turn_at:
            raise InputError(
                f"field 'turn_id': duplicate turn_id {turn_id!r} in document {document_id!r} "
                f"(first on {doc.turn_at[turn_id]})"
            )
        try:
            turn = Turn(
                document_id=document_id,
                session_id=rec.session_id,
                turn_id=turn_id,
                index=index,
                speaker=rec.speaker,
                text=rec.text,
                timestamp=rec.timestamp,
                metadata=rec.metadata,
                kind=rec.kind,
                caption=rec.caption,
            )
        except ValidationError as exc:
            raise InputError(field_error(exc)) from None
        self._docs[document_id] = doc
        doc.sessions.setdefault(rec.session_id, []).append(turn)
        doc.turn_at[turn_id] = where
        if rec.speaker not in doc.speakers:
            doc.speakers.append(rec.speaker)
        return turn

    def extend(self, document_id: str, turns: Iterable[Turn]) -> None:
        """Add a document's turns that a reader already validated (LoCoMo, LongMemEval)."""
        doc = self._docs.setdefault(document_id, _Doc())
        for t in turns:
            doc.sessions.setdefault(t.session_id, []).append(t)
            doc.turn_at[t.turn_id] = "an earlier turn"

    def documents(self) -> list[tuple[str, list[Turn], list[str]]]:
        """``(document_id, turns, speakers)`` per document with turns, in retain order."""
        out = []
        for doc_id, doc in self._docs.items():
            turns = [t for session in doc.sessions.values() for t in session]
            if turns:
                out.append((doc_id, turns, doc.speakers))
        return out


def read_jsonl(path: Path, text: str) -> list[Conversation]:
    """The conversations of a JSON Lines text read from ``path``; :class:`InputError` on the
    first problem, naming the line and field."""
    name = path.name
    docs = DocumentTurns()
    for lineno, line in enumerate(lines(text), start=1):
        if not line.strip():
            continue
        try:
            docs.add(parse_record(parse_line(line)), path.stem, f"line {lineno}")
        except InputError as exc:
            raise InputError(f"{name} line {lineno}: {exc}") from None
    found = docs.documents()
    if not found:
        raise InputError(f"{name}: file is empty (no turns)")
    return [
        Conversation(
            document_id=doc_id,
            turns=turns,
            speakers=speakers,
            metadata={"format": "jsonl", "source": name},
        )
        for doc_id, turns, speakers in found
    ]
