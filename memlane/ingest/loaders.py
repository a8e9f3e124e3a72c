"""Input loaders: turn a chat-history file into :class:`Conversation` objects of :class:`Turn`.

Two formats are read:

* **LoCoMo JSON** (``"locomo"``): a list of samples, or one sample object, each with a
  ``sample_id`` and a ``conversation`` holding ``session_N`` turn lists and their
  ``session_N_date_time`` strings. One Conversation per sample.
* **JSON Lines** (``"jsonl"``): one turn object per line with ``speaker`` (or its alias
  ``role``), ``text``, ``timestamp`` and ``session_id``; optional ``document_id`` (default: the
  file stem), ``turn_id`` (default ``"{session_id}:{n}"``, n the 1-based position in its session)
  and ``metadata`` (an object). Turns are grouped into Conversations by ``document_id``.

Validation is all-or-nothing: a file is read and checked completely before anything is
returned, so a caller that writes only after loading never writes part of a bad file. Every
problem is an :class:`InputError` whose message names the file and, where it applies, the line
(JSONL) or JSON path (LoCoMo) and the field, for example
``data.jsonl line 7: field 'timestamp': cannot parse timestamp 'soon'``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from memlane.errors import InvalidInput
from memlane.model import Turn

FORMATS = ("locomo", "jsonl")

# Turn keys of LoCoMo that carry image information; kept in Turn.metadata when present.
LOCOMO_TURN_METADATA_KEYS = ("blip_caption", "query", "img_url")

_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_JSON_SUFFIXES = {".json"}
_SESSION_RE = re.compile(r"^session_(\d+)$")
_SESSION_DATE_RE = re.compile(r"^session_(\d+)_date_time$")
# JSONL keys the loader interprets itself; any other key is kept in Turn.metadata.
_TURN_KEYS = {"speaker", "role", "text", "timestamp", "session_id", "turn_id"}
_JSONL_KNOWN_KEYS = {"speaker", "role", "text", "timestamp", "session_id", "document_id",
                     "turn_id", "metadata"}


class InputError(InvalidInput):
    """A chat-history file that cannot be loaded. The message names the file and, where it
    applies, the line or JSON path and the reason. A ``ValueError`` (through
    :class:`memlane.errors.InvalidInput`), so callers map it to a 4xx / exit code 2."""


@dataclass
class Conversation:
    """One document's turns, ordered by session and then by index within the session.

    ``speakers`` lists the distinct speakers (for LoCoMo, ``speaker_a`` and ``speaker_b`` first);
    ``metadata`` holds format-level information (``format``, ``source`` and, for LoCoMo, the
    speaker names and any ``session_N_date_time`` keys without a session list)."""

    document_id: str
    turns: list[Turn]
    speakers: list[str]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def session_ids(self) -> list[str]:
        """Distinct session ids in turn order."""
        return list(dict.fromkeys(t.session_id for t in self.turns))


# --------------------------------------------------------------------------------------------
# Public API


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
        return _load_locomo(path, text)
    return _load_jsonl(path, text)


# --------------------------------------------------------------------------------------------
# Reading and detection


def read_text(path: Path) -> str:
    """A whole input file as text, with InputErrors that name the file (and the line of a
    bad byte)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{path.name} line {line}: not UTF-8 text (invalid byte 0x{data[exc.start]:02x} "
            f"at offset {exc.start})"
        ) from None
    if text.startswith("\ufeff"):  # a UTF-8 byte-order mark
        text = text[1:]
    if not text.strip():
        raise InputError(f"{path.name}: file is empty")
    return text


def _lines(text: str) -> list[str]:
    # Split on "\n" only: str.splitlines() would also split on U+2028 and friends, which JSON
    # allows unescaped inside strings.
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def _first_object_line(text: str) -> bool:
    for line in _lines(text):
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
            if _TURN_KEYS.intersection(whole):
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


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def _parse_time(value: Any, where: Callable[[], str]) -> datetime:
    from memlane.temporal import parse_timestamp  # lazy: memlane.temporal is a sibling module

    try:
        return parse_timestamp(value)
    except (ValueError, TypeError, OverflowError) as exc:
        # Keep the parser's reason when it gives one beyond naming the value.
        head = f"cannot parse timestamp {value!r}"
        detail = str(exc)
        if detail.startswith(head):
            reason = detail[len(head):]
        else:
            reason = f": {detail}" if detail else ""
        raise InputError(f"{where()}: {head}{reason}") from exc


def _make_turn(where: str, **fields: Any) -> Turn:
    try:
        return Turn(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or "turn"
        raise InputError(f"{where}: field {loc!r}: {err.get('msg', 'invalid value')}") from None


# --------------------------------------------------------------------------------------------
# LoCoMo


def _load_locomo(path: Path, text: str) -> list[Conversation]:
    name = path.name
    try:
        data = json.loads(text)
    except ValueError as exc:
        lineno = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        msg = getattr(exc, "msg", str(exc))
        at = f" line {lineno} column {col}" if lineno is not None else ""
        raise InputError(f"{name}{at}: not valid JSON: {msg}") from None

    if isinstance(data, dict):
        samples, paths = [data], ["$"]
    elif isinstance(data, list):
        samples, paths = data, [f"$[{i}]" for i in range(len(data))]
    else:
        raise InputError(
            f"{name}: $: expected a list of LoCoMo samples or one sample object, "
            f"got {_type_name(data)}"
        )
    if not samples:
        raise InputError(f"{name}: $: the list holds no samples")

    conversations: list[Conversation] = []
    seen: dict[str, str] = {}
    for sample, jpath in zip(samples, paths):
        conv = _locomo_sample(name, sample, jpath)
        if conv.document_id in seen:
            raise InputError(
                f"{name}: {jpath}.sample_id: duplicate sample_id {conv.document_id!r} "
                f"(first at {seen[conv.document_id]})"
            )
        seen[conv.document_id] = jpath
        conversations.append(conv)
    return conversations


def _locomo_sample(name: str, sample: Any, jpath: str) -> Conversation:
    if not isinstance(sample, dict):
        raise InputError(f"{name}: {jpath}: expected a sample object, got {_type_name(sample)}")
    sample_id = sample.get("sample_id")
    if "sample_id" not in sample:
        raise InputError(f"{name}: {jpath}: missing field 'sample_id'")
    if not isinstance(sample_id, str) or not sample_id.strip():
        raise InputError(
            f"{name}: {jpath}.sample_id: expected a non-empty string, got {sample_id!r}"
        )
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        what = "missing field 'conversation'" if "conversation" not in sample else (
            f"field 'conversation': expected an object, got {_type_name(conv)}")
        raise InputError(f"{name}: {jpath}: {what}")
    cpath = f"{jpath}.conversation"

    sessions: dict[int, str] = {}
    dates: dict[int, str] = {}
    for key, value in conv.items():
        m = _SESSION_RE.match(key)
        if m:
            if not isinstance(value, list):
                raise InputError(
                    f"{name}: {cpath}.{key}: expected a list of turns, got {_type_name(value)}"
                )
            sessions[int(m.group(1))] = key
            continue
        m = _SESSION_DATE_RE.match(key)
        if m:
            dates[int(m.group(1))] = key
    if not sessions:
        raise InputError(f"{name}: {cpath}: no session_N turn lists")

    speakers: list[str] = []
    for key in ("speaker_a", "speaker_b"):
        value = conv.get(key)
        if isinstance(value, str) and value.strip() and value not in speakers:
            speakers.append(value)

    turns: list[Turn] = []
    first_seen: dict[str, str] = {}
    for n in sorted(sessions):
        skey = sessions[n]
        dkey = f"{skey}_date_time"
        if n not in dates:
            raise InputError(f"{name}: {cpath}.{skey}: session has no '{dkey}'")
        raw_date = conv[dkey]
        if not isinstance(raw_date, str) or not raw_date.strip():
            raise InputError(
                f"{name}: {cpath}.{dkey}: expected a non-empty date string, got {raw_date!r}"
            )
        when = _parse_time(raw_date, lambda: f"{name}: {cpath}.{dkey}")
        for i, raw in enumerate(conv[skey]):
            tpath = f"{cpath}.{skey}[{i}]"
            if not isinstance(raw, dict):
                raise InputError(f"{name}: {tpath}: expected a turn object, got {_type_name(raw)}")
            for fname in ("speaker", "dia_id", "text"):
                if fname not in raw:
                    raise InputError(f"{name}: {tpath}: missing field {fname!r}")
                value = raw[fname]
                if not isinstance(value, str):
                    raise InputError(
                        f"{name}: {tpath}.{fname}: expected a string, got {_type_name(value)}"
                    )
                if fname != "text" and not value.strip():
                    raise InputError(f"{name}: {tpath}.{fname}: must not be empty")
            dia_id = raw["dia_id"]
            if dia_id in first_seen:
                raise InputError(
                    f"{name}: {tpath}.dia_id: duplicate dia_id {dia_id!r} in sample "
                    f"{sample_id!r} (first at {first_seen[dia_id]})"
                )
            first_seen[dia_id] = tpath
            speaker = raw["speaker"]
            if speaker not in speakers:
                speakers.append(speaker)
            meta = {k: raw[k] for k in LOCOMO_TURN_METADATA_KEYS if k in raw}
            turns.append(_make_turn(
                f"{name}: {tpath}", document_id=sample_id, session_id=skey, turn_id=dia_id,
                index=i, speaker=speaker, text=raw["text"], timestamp=when, metadata=meta,
            ))

    metadata: dict[str, Any] = {"format": "locomo", "source": name}
    for key in ("speaker_a", "speaker_b"):
        if isinstance(conv.get(key), str):
            metadata[key] = conv[key]
    orphans = [dates[n] for n in sorted(dates) if n not in sessions]
    if orphans:  # conv-26 carries date keys for sessions it does not have
        metadata["dates_without_session"] = orphans
    return Conversation(document_id=sample_id, turns=turns, speakers=speakers, metadata=metadata)


# --------------------------------------------------------------------------------------------
# JSON Lines


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
        raise InputError(f"{where}: field {key!r}: expected a string, got {_type_name(value)}")
    if not value.strip():
        raise InputError(f"{where}: field {key!r}: must not be empty")
    return value


@dataclass
class _Doc:
    speakers: list[str] = field(default_factory=list)
    sessions: dict[str, list[Turn]] = field(default_factory=dict)  # first-appearance order
    turn_lines: dict[str, int] = field(default_factory=dict)


def _load_jsonl(path: Path, text: str) -> list[Conversation]:
    name = path.name
    docs: dict[str, _Doc] = {}
    for lineno, line in enumerate(_lines(text), start=1):
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
            raise InputError(f"{where}: expected a JSON object, got {_type_name(obj)}")

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
                f"{where}: field 'timestamp': expected a string or a number, "
                f"got {_type_name(raw_ts)}"
            )
        if isinstance(raw_ts, str) and not raw_ts.strip():
            raise InputError(f"{where}: field 'timestamp': must not be empty")
        when = _parse_time(raw_ts, lambda: f"{where}: field 'timestamp'")
        document_id = path.stem
        if "document_id" in obj:
            document_id = _non_empty_str(obj["document_id"], "document_id", where)
        meta: dict[str, Any] = {}
        if "metadata" in obj:
            if not isinstance(obj["metadata"], dict):
                raise InputError(
                    f"{where}: field 'metadata': expected an object, "
                    f"got {_type_name(obj['metadata'])}"
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
        session.append(_make_turn(
            where, document_id=document_id, session_id=session_id, turn_id=turn_id, index=index,
            speaker=speaker, text=text_value, timestamp=when, metadata=meta,
        ))

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
