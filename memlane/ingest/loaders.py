"""Input loaders of the engine: turn a chat-history file into :class:`Conversation` objects of
:class:`Turn`, detecting its format. One reader per format, each in its own module:

* **LoCoMo JSON** (``"locomo"``, :mod:`memlane.ingest.locomo`): one Conversation per sample;
* **JSON Lines** (``"jsonl"``, :mod:`memlane.ingest.jsonl`): one turn object per line, grouped
  into Conversations by ``document_id``;
* **LongMemEval JSON** (:mod:`memlane.ingest.longmemeval`): questions with their haystacks,
  read by the evals and the backfill (not by :func:`load_conversations`).

Validation is all-or-nothing: a file is read and checked completely before anything is
returned, so a caller that writes only after loading never writes part of a bad file. Every
problem is an :class:`InputError` whose message names the file and, where it applies, the line
(JSONL) or JSON path (LoCoMo) and the field, for example
``data.jsonl line 7: field 'timestamp': cannot parse timestamp 'soon'``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memlane.ingest.common import Conversation, InputError, lines, parse_time, read_text
from memlane.ingest.jsonl import TURN_KEYS, read_jsonl
from memlane.ingest.locomo import LOCOMO_TURN_METADATA_KEYS, read_locomo

__all__ = [
    "FORMATS",
    "LOCOMO_TURN_METADATA_KEYS",
    "Conversation",
    "InputError",
    "detect_format",
    "load_conversations",
    "read_text",
]

FORMATS = ("locomo", "jsonl")

_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_JSON_SUFFIXES = {".json"}

# The old private name, kept for callers that parse a timestamp the loaders' way.
_parse_time = parse_time


def detect_format(path: str | Path) -> str:
    """Return ``"locomo"`` or ``"jsonl"`` for the file at ``path``.

    ``.jsonl``/``.ndjson`` files are JSON Lines. ``.json`` files are LoCoMo unless their
    content is plainly JSON Lines (several lines that each hold an object, or a single turn
    object). Other extensions are detected from the content; content that is neither raises
    :class:`InputError`, as do an empty file and one that is not UTF-8.
    """
    path = Path(path)
    return _detect(path, read_text(path))


def load_conversations(path: str | Path, format: str = "auto") -> list[Conversation]:
    """Read and validate the whole file at ``path`` and return its conversations.

    ``format`` is ``"auto"`` (see :func:`detect_format`), ``"locomo"`` or ``"jsonl"``. Raises
    :class:`InputError` on the first problem found; nothing is returned from a bad file.
    """
    path = Path(path)
    if format not in ("auto", *FORMATS):
        raise ValueError(f"unknown format {format!r}: use 'auto', 'locomo' or 'jsonl'")
    text = read_text(path)
    fmt = _detect(path, text) if format == "auto" else format
    if fmt == "locomo":
        return read_locomo(path, text)
    return read_jsonl(path, text)


def _first_object_line(text: str) -> bool:
    for line in lines(text):
        if line.strip():
            try:
                return isinstance(json.loads(line), dict)
            except ValueError:
                return False
    return False


def _detect(path: Path, text: str) -> str:
    suffix = path.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        return "jsonl"
    try:
        whole: Any = json.loads(text)
        parsed = True
    except ValueError:
        whole, parsed = None, False
    if parsed:
        if isinstance(whole, list):
            return "locomo"
        if isinstance(whole, dict):
            if "conversation" in whole or "sample_id" in whole:
                return "locomo"
            if TURN_KEYS.intersection(whole):
                return "jsonl"  # a one-line JSON Lines file
    elif _first_object_line(text):
        return "jsonl"
    if suffix in _JSON_SUFFIXES:
        return "locomo"  # the LoCoMo loader reports what is wrong with it
    raise InputError(
        f"{path.name}: cannot detect the format: the content is neither LoCoMo JSON (a list of "
        "samples or one sample object) nor JSON Lines (one turn object per line); "
        "name the file .json or .jsonl, or pass format='locomo' or 'jsonl'"
    )
