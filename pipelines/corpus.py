"""Corpus readers for the backfill: a file or a directory of chat logs -> per-bank documents.

Formats (``format="auto"`` picks per file):

* **LoCoMo JSON** (``locomo``) and **LongMemEval JSON** (``longmemeval``): read by the engine's
  own readers (:func:`memlane.ingest.read_locomo`, :func:`memlane.ingest.read_longmemeval`) in
  their collecting mode, the same readers the evals and ``memlane retain`` use, so a bank, its
  turns and hence its memory ids are the same whoever wrote it. One bank per sample / question,
  :func:`memlane.ingest.bank_id_for` of its ``sample_id`` / ``question_id`` (the id itself when
  it is a valid bank id), one document of the same id. A bad sample, question, session or turn
  is rejected alone, with the reader's reason; the rest still go in.
* **Generic records** (``jsonl`` / ``parquet``): one turn per record, read by the engine's JSON
  Lines rules (:mod:`memlane.ingest.jsonl`, the reader of ``memlane retain``) plus the routing
  key ``bank_id``: ``session_id``, ``timestamp``, ``speaker`` (or ``role``), ``text``; optional
  ``document_id`` (default: the file's stem), ``turn_id`` (default ``{session_id}:{n}``, n the
  1-based position in its session) and ``metadata``; other keys go to the turn's metadata. Ids
  are strings (a numeric ``session_id`` is rejected, as ``memlane retain`` refuses it). Within a
  bank, documents keep their first-appearance order and a document's turns are ordered session
  by session (sessions by first appearance), so a backfill of a file writes what
  ``Memory.retain`` of the same file into the same bank writes.

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
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from actors.wire import decode_bank, encode_bank  # noqa: F401 - re-exported for the driver
from memlane.ingest.common import (
    InputError,
    bank_id_for,  # noqa: F401 - the one bank-id rule, re-exported
    type_name,
)
from memlane.ingest.jsonl import DocumentTurns, parse_line, parse_record
from memlane.records import BANK_ID_PATTERN, Turn

FORMATS = ("auto", "locomo", "longmemeval", "jsonl", "parquet")

_BANK_RE = re.compile(BANK_ID_PATTERN)
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
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


class Corpus:
    """Accumulates turns per bank and document across files, in first-appearance order (the
    engine's :class:`memlane.ingest.jsonl.DocumentTurns`, one per bank).

    ``reject(record)`` receives ``{"source", "where", "reason", ...}`` for each bad record.
    """

    def __init__(self, reject: RejectFn) -> None:
        self._reject = reject
        self.banks: dict[str, DocumentTurns] = {}
        self.turns = 0
        self.rejects = 0
        self.files = 0

    def reject(self, source: str, where: str, reason: str, n: int = 1, **extra: Any) -> None:
        self.rejects += n
        self._reject({"source": source, "where": where, "reason": reason, "records": n, **extra})

    def add_conversation(self, bank_id: str, document_id: str, turns: Iterable[Turn]) -> None:
        """Add a whole, already validated conversation (LoCoMo, LongMemEval)."""
        turns = list(turns)
        self.banks.setdefault(bank_id, DocumentTurns()).extend(document_id, turns)
        self.turns += len(turns)

    def add_record(self, obj: Any, source: str, where: str) -> None:
        """Validate one generic record with the engine's JSONL rules and add it to its bank
        (its document by default: the file's stem, as ``memlane retain`` of the file), or
        reject it with the reason."""
        bank_id = obj.get("bank_id") if isinstance(obj, dict) else None
        try:
            if not isinstance(obj, dict):
                raise InputError(f"expected a JSON object, got {type_name(obj)}")
            if not isinstance(bank_id, str) or not _BANK_RE.match(bank_id):
                raise InputError(f"field 'bank_id': invalid bank id {bank_id!r}")
            rec = parse_record(obj, routing_keys=("bank_id",))
            self.banks.setdefault(bank_id, DocumentTurns()).add(rec, Path(source).stem, f"{source} {where}")
        except InputError as exc:
            return self.reject(source, where, str(exc), bank_id=bank_id)
        self.turns += 1

    def bank_inputs(self) -> Iterator[BankInput]:
        """Every bank gathered so far, documents in first-appearance order."""
        for bank_id, docs in self.banks.items():
            documents = [(doc_id, turns) for doc_id, turns, _ in docs.documents()]
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
    # Line by line from the file (a corpus may not fit in memory as one text).
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            where = f"line {lineno}"
            try:
                obj = parse_line(raw)
            except InputError as exc:
                corpus.reject(path.name, where, str(exc))
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
            # A null is a column this row does not have, not a value.
            corpus.add_record({k: v for k, v in obj.items() if v is not None}, path.name, f"row {row}")


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
