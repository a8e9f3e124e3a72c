"""What every input reader shares: the error type, the conversation record, reading a file as
text, timestamps and turns with errors that name the place, the reject callback of the
collecting mode, and the one bank-id rule.

**Bank ids.** A reader that makes one bank per conversation (a LoCoMo sample, a LongMemEval
question) names it :func:`bank_id_for` of the conversation's own id (``sample_id``,
``question_id``): the id itself when it is a valid bank id, else a sanitised id with a hash
suffix. The backfill, the CLI and the evals all use it, so a bank one of them wrote is the bank
the others look for (``memlane eval ... --reuse-banks`` over a ``memlane backfill``).

**Two modes.** A reader called without ``reject`` validates the whole file and raises
:class:`InputError` on the first problem (nothing is returned from a bad file). Called with
``reject`` (the backfill), it hands each bad record to ``reject(source, where, reason,
records, **extra)`` and goes on with the rest.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Protocol

from pydantic import ValidationError

from memlane.errors import InvalidInput
from memlane.records import BANK_ID_PATTERN, Turn

_BANK_RE = re.compile(BANK_ID_PATTERN)


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
    def bank_id(self) -> str:
        """The bank this conversation goes into when each gets its own: :func:`bank_id_for`
        of its document id."""
        return bank_id_for(self.document_id)

    @property
    def session_ids(self) -> list[str]:
        """Distinct session ids in turn order."""
        return list(dict.fromkeys(t.session_id for t in self.turns))


class Reject(Protocol):
    """The collecting mode's callback: one bad record (or ``n`` of them) with where it
    is (``"$[3].haystack_dates[1]"``, ``"line 7"``) and why; ``extra`` may name a ``bank_id``."""

    def __call__(self, source: str, where: str, reason: str, n: int = 1, **extra: Any) -> None: ...


def bank_id_for(raw: str) -> str:
    """The bank of a conversation whose own id is ``raw``: ``raw`` when it is a valid bank id,
    else a sanitised id plus a hash suffix (so two raw ids that sanitise alike stay apart)."""
    if _BANK_RE.match(raw):
        return raw
    clean = re.sub(r"[^A-Za-z0-9_.\-]", "_", raw).lstrip("_.-")[:100] or "bank"
    return f"{clean}-{hashlib.sha256(raw.encode()).hexdigest()[:8]}"


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


def lines(text: str) -> list[str]:
    """The lines of a JSON Lines text (a trailing ``\\r`` dropped)."""
    # Split on "\n" only: str.splitlines() would also split on U+2028 and friends, which JSON
    # allows unescaped inside strings.
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for messages (``"null"``, ``"array"``, ...)."""
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "number",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), type(value).__name__)


def parse_time(value: Any, where: Callable[[], str]) -> datetime:
    """A timestamp as a UTC datetime; an :class:`InputError` prefixed with ``where()`` when it
    cannot be parsed (the parser's reason kept)."""
    from memlane.temporal import parse_timestamp  # lazy: memlane.temporal is a sibling module

    try:
        return parse_timestamp(value)
    except (ValueError, TypeError, OverflowError) as exc:
        # Keep the parser's reason when it gives one beyond naming the value.
        head = f"cannot parse timestamp {value!r}"
        detail = str(exc)
        if detail.startswith(head):
            reason = detail[len(head) :]
        else:
            reason = f": {detail}" if detail else ""
        raise InputError(f"{where()}: {head}{reason}") from exc


def json_message(exc: ValueError) -> str:
    """What a JSON parser refused, without json's trailing "at" ("Invalid control character
    '\\n' at", "Unterminated string starting at"), which a message's place would double."""
    return str(getattr(exc, "msg", None) or exc).removesuffix(" at")


def json_problem(exc: ValueError) -> str:
    """What a JSON parser refused and where on its line: ``Expecting ',' delimiter at column 19``."""
    col = getattr(exc, "colno", None)
    return json_message(exc) + (f" at column {col}" if col is not None else "")


def field_error(exc: ValidationError) -> str:
    """The first field a model refused and why (``field 'speaker': ...``), for messages."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    msg = err.get("msg", "invalid value")
    if not loc:  # a rule of the whole turn (its size): its own message names what is wrong
        return msg.removeprefix("Value error, ")
    return f"field {loc!r}: {msg}"


def make_turn(where: str, **fields: Any) -> Turn:
    """A validated :class:`Turn`; an :class:`InputError` naming ``where`` and the field."""
    try:
        return Turn(**fields)
    except ValidationError as exc:
        raise InputError(f"{where}: {field_error(exc)}") from None
