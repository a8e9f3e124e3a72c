"""Corpus readers for the backfill: a file or a directory of chat logs -> per-bank documents.

Formats (``format="auto"`` picks per file):

* **LoCoMo JSON** (``locomo``) and **LongMemEval JSON** (``longmemeval``): read by the engine's
  own readers (:func:`memlane.ingest.read_locomo`, :func:`memlane.ingest.read_longmemeval`) in
  their collecting mode, the same readers the evals and ``memlane retain`` use, so a bank, its
  turns and hence its memory ids are the same whoever wrote it. One bank per sample / question,
  :func:`memlane.ingest.bank_id_for` of its ``sample_id`` / ``question_id`` (the id itself when
  it is a valid bank id), one document of the same id. A bad sample, question, session or turn
  is rejected alone, with the reader's reason; the rest still go in.
* **Generic records** (``jsonl`` / ``parquet``): one turn per record with ``bank_id``,
  ``session_id``, ``timestamp``, ``speaker`` (or ``role``), ``text``; optional ``document_id``
  (default: the bank id), ``turn_id`` (default ``{session_id}:{n}``, n the 1-based position in
  its session) and ``metadata``; other keys go to the turn's metadata, as the engine's JSONL
  loader does. Within a bank, documents keep their first-appearance order and a document's
  turns are ordered session by session (sessions by first appearance), which is the order the
  engine's JSONL loader gives, so a backfill writes what ``Memory.retain`` of the same input
  writes.

Bad records never stop the read: each is counted and handed to the ``reject`` callback with a
reason (missing text, unparseable timestamp, invalid bank id, duplicate turn id, a file of no
known format, ...). The caller decides whether their share is acceptable.

Everything here is plain Python (no Ray): the driver reads, the actors retain. Reading is a
small part of the cost (see ``benchmarks/backfill_bench.py``: the read of 100k generic turns
takes seconds against minutes of retain on 2 cores), so it is kept out of Ray.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from actors.wire import decode_bank, encode_bank  # noqa: F401 - re-exported for the driver
from memlane.ingest.common import bank_id_for  # noqa: F401 - the one bank-id rule, re-exported
from memlane.model import BANK_ID_PATTERN, Turn

FORMATS = ("auto", "locomo", "longmemeval", "jsonl", "parquet")

_BANK_RE = re.compile(BANK_ID_PATTERN)
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_GENERIC_KNOWN = {
    "bank_id",
    "speaker",
    "role",
    "text",
    "timestamp",
    "session_id",
    "document_id",
    "turn_id",
    "metadata",
}

RejectFn = Callable[[dict[str, Any]], None]


@dataclass
class BankInput:
    """One bank's documents, in retain order: ``[(document_id, [Turn, ...]), ...]``."""

    bank_id: str
    documents: list[tuple[str, list[Turn]]] = field(default_factory=list)

    @property
    def n_turns(self) -> int:
        return sum(len(t) for _, t in self.documents)


# ---------------------------------------------------------------------------------------------
# The resume ledger's key (the wire format itself, encode_bank / decode_bank, is actors.wire's)


def fingerprint(payload: str) -> str:
    """A short content hash of a bank's encoded input: the resume ledger's key, so a bank whose
    input changed since the last run is retained again."""
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


# ---------------------------------------------------------------------------------------------
# Helpers


def _parse_time(value: Any) -> datetime:
    from memlane.temporal import parse_timestamp

    if isinstance(value, bool) or not isinstance(value, (str, int, float, datetime)):
        raise ValueError(f"cannot parse timestamp {value!r}")
    return parse_timestamp(value)


def list_files(path: Path) -> list[Path]:
    """``path`` itself, or every regular file under a directory (sorted, hidden files skipped)."""
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    return [path]


def detect_format(path: Path) -> str | None:
    """The format of one file from its name and first bytes, or None when it is none of them."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "parquet"
    if suffix in _JSONL_SUFFIXES:
        return "jsonl"
    try:
        with open(path, "rb") as f:
            head = f.read(65536).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    except OSError:
        return None
    if head.startswith("["):
        # LongMemEval questions carry haystack_sessions; LoCoMo samples a conversation.
        if '"haystack_sessions"' in head or '"question_id"' in head:
            return "longmemeval"
        if '"conversation"' in head or '"sample_id"' in head:
            return "locomo"
        return "longmemeval" if "haystack" in head else ("locomo" if suffix == ".json" else None)
    if head.startswith("{"):
        first = head.split("\n", 1)[0]
        try:
            obj = json.loads(first)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "bank_id" in obj:
            return "jsonl"
        if '"haystack_sessions"' in head:
            return "longmemeval"
        if '"conversation"' in head:
            return "locomo"
    return None


# ---------------------------------------------------------------------------------------------
# The grouping accumulator


class _Doc:
    __slots__ = ("sessions", "turn_ids")

    def __init__(self) -> None:
        self.sessions: dict[str, list[Turn]] = {}
        self.turn_ids: set[str] = set()


class Corpus:
    """Accumulates turns per bank and document across files, in first-appearance order.

    ``reject(record)`` receives ``{"source", "where", "reason", ...}`` for each bad record.
    """

    def __init__(self, reject: RejectFn) -> None:
        self._reject = reject
        self.banks: dict[str, dict[str, _Doc]] = {}
        self.turns = 0
        self.rejects = 0
        self.files = 0

    def reject(self, source: str, where: str, reason: str, n: int = 1, **extra: Any) -> None:
        self.rejects += n
        self._reject({"source": source, "where": where, "reason": reason, "records": n, **extra})

    def add_conversation(self, bank_id: str, document_id: str, turns: Iterable[Turn]) -> None:
        """Add a whole, already validated conversation (LoCoMo, LongMemEval)."""
        doc = self.banks.setdefault(bank_id, {}).setdefault(document_id, _Doc())
        for t in turns:
            doc.sessions.setdefault(t.session_id, []).append(t)
            doc.turn_ids.add(t.turn_id)
            self.turns += 1

    def add_record(self, obj: Any, source: str, where: str) -> None:
        """Validate one generic record and add it, or reject it with the reason."""
        if not isinstance(obj, dict):
            return self.reject(source, where, f"expected an object, got {type(obj).__name__}")
        try:
            raw_bank = obj.get("bank_id")
            if not isinstance(raw_bank, str) or not _BANK_RE.match(raw_bank):
                raise ValueError(f"field 'bank_id': invalid bank id {raw_bank!r}")
            speaker = obj.get("speaker", obj.get("role"))
            if not isinstance(speaker, str) or not speaker.strip():
                raise ValueError("missing field 'speaker' (or its alias 'role')")
            text = obj.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ValueError("missing text (field 'text' absent, empty or not a string)")
            session_id = obj.get("session_id")
            if isinstance(session_id, (int, float)) and not isinstance(session_id, bool):
                session_id = str(session_id)
            if not isinstance(session_id, str) or not session_id.strip():
                raise ValueError("missing field 'session_id'")
            if obj.get("timestamp") is None:
                raise ValueError("missing field 'timestamp'")
            when = _parse_time(obj["timestamp"])
            document_id = obj.get("document_id") or raw_bank
            if not isinstance(document_id, str):
                raise ValueError(f"field 'document_id': expected a string, got {document_id!r}")
            meta: dict[str, Any] = {}
            if obj.get("metadata") is not None:
                if not isinstance(obj["metadata"], dict):
                    raise ValueError("field 'metadata': expected an object")
                meta.update(obj["metadata"])
            if "speaker" in obj and "role" in obj:
                meta["role"] = obj["role"]
            meta.update({k: v for k, v in obj.items() if k not in _GENERIC_KNOWN})
        except ValueError as exc:
            return self.reject(source, where, str(exc), bank_id=obj.get("bank_id"))
        doc = self.banks.setdefault(raw_bank, {}).setdefault(document_id, _Doc())
        session = doc.sessions.setdefault(session_id, [])
        turn_id = obj.get("turn_id")
        if turn_id is None:
            turn_id = f"{session_id}:{len(session) + 1}"
        elif isinstance(turn_id, int) and not isinstance(turn_id, bool):
            turn_id = str(turn_id)
        if not isinstance(turn_id, str) or not turn_id.strip():
            if not session:
                del doc.sessions[session_id]
            return self.reject(source, where, "field 'turn_id': must be a non-empty string", bank_id=raw_bank)
        if turn_id in doc.turn_ids:
            if not session:
                del doc.sessions[session_id]
            return self.reject(
                source, where, f"duplicate turn_id {turn_id!r} in document {document_id!r}", bank_id=raw_bank
            )
        try:
            turn = Turn(
                document_id=document_id,
                session_id=session_id,
                turn_id=turn_id,
                index=len(session),
                speaker=speaker,
                text=text,
                timestamp=when,
                metadata=meta,
            )
        except ValueError as exc:  # pydantic ValidationError is a ValueError
            if not session:
                del doc.sessions[session_id]
            return self.reject(source, where, " ".join(str(exc).split()), bank_id=raw_bank)
        session.append(turn)
        doc.turn_ids.add(turn_id)
        self.turns += 1

    def bank_inputs(self) -> Iterator[BankInput]:
        """Every bank gathered so far, documents in first-appearance order."""
        for bank_id, docs in self.banks.items():
            documents = [
                (doc_id, [t for turns in d.sessions.values() for t in turns]) for doc_id, d in docs.items()
            ]
            documents = [(d, t) for d, t in documents if t]
            if documents:
                yield BankInput(bank_id, documents)


# ---------------------------------------------------------------------------------------------
# Per-format readers


def _read_locomo(path: Path, corpus: Corpus) -> None:
    from memlane.ingest import read_locomo

    for conv in read_locomo(path, reject=corpus.reject):
        corpus.add_conversation(conv.bank_id, conv.document_id, conv.turns)


def _read_longmemeval(path: Path, corpus: Corpus) -> None:
    from memlane.ingest import read_longmemeval

    for q in read_longmemeval(path, reject=corpus.reject):
        for document_id, turns in q.documents:
            corpus.add_conversation(q.bank_id, document_id, turns)


def _read_jsonl(path: Path, corpus: Corpus) -> None:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            where = f"line {lineno}"
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                corpus.reject(path.name, where, f"not valid JSON: {getattr(exc, 'msg', exc)}")
                continue
            corpus.add_record(obj, path.name, where)


def _read_parquet(path: Path, corpus: Corpus) -> None:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is one reject
        return corpus.reject(path.name, "file", f"not a readable Parquet file: {exc}")
    row = 0
    for batch in pf.iter_batches(batch_size=8192):
        for obj in batch.to_pylist():
            row += 1
            if obj.get("metadata") is None:
                obj.pop("metadata", None)
            for key in [k for k, v in obj.items() if v is None and k not in _GENERIC_KNOWN]:
                del obj[key]  # columns absent from this row, not values
            corpus.add_record(obj, path.name, f"row {row}")


_READERS = {
    "locomo": _read_locomo,
    "longmemeval": _read_longmemeval,
    "jsonl": _read_jsonl,
    "parquet": _read_parquet,
}


def read_corpus(path: str | Path, fmt: str = "auto", *, reject: RejectFn) -> Corpus:
    """Read a file or a directory into a :class:`Corpus`. ``fmt`` applies to every file; with
    ``auto`` each file's format is detected, and a file of no known format is one reject."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    path = Path(path)
    corpus = Corpus(reject)
    files = list_files(path)
    if not files:
        raise ValueError(f"{path}: the directory holds no files")
    for file in files:
        kind = detect_format(file) if fmt == "auto" else fmt
        corpus.files += 1
        if kind is None:
            corpus.reject(
                file.name, "file", "unknown format (not LoCoMo, LongMemEval, JSONL or Parquet records)"
            )
            continue
        _READERS[kind](file, corpus)
    return corpus
