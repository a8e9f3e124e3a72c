"""Bank ids on the Hindsight-compatible surface and in Memlane: one reversible, collision-free
mapping, the only place either side's id is turned into the other's.

Hindsight 1.1.0 takes a new bank id of 1-192 bytes of UTF-8 without control characters that
does not start with ``_`` (its ``validate_new_bank_id``); Memlane's ids are 1-128 letters,
digits, ``_``, ``.``, ``-`` starting with a letter or digit (``memlane.records.BANK_ID_PATTERN``).

* An id Memlane takes that does not start with :data:`PREFIX` is the same id on both sides:
  Hindsight's ``user-123`` is Memlane's ``user-123``, so an agent moved to Memlane finds the
  banks a Memlane client wrote and the other way round.
* Any other id is :data:`PREFIX` followed by its UTF-8 bytes, each byte outside
  ``A-Z a-z 0-9 . -`` written as ``_`` and two lowercase hex digits: ``user:alice`` is
  ``hs_user_3aalice``, ``team a`` is ``hs_team_20a``, ``hs_x`` is ``hs_hs_5fx``.

Collision-free: an id with the prefix is always encoded and one without never is, and the
escape is one-to-one. Reversible: :func:`to_hindsight` decodes, and answers None for a Memlane
id that no Hindsight id maps to (one with the prefix written through the ``/v1`` API, which the
Hindsight surface cannot name). An id whose Memlane form would be longer than 128 characters
cannot be mapped (:class:`BankIdError`, HTTP 400 naming the limit).
"""

from __future__ import annotations

import re
import unicodedata

from memlane.records import BANK_ID_PATTERN

PREFIX = "hs_"
MAX_MEMLANE = 128  # BANK_ID_PATTERN's length
MAX_HINDSIGHT_BYTES = 192  # Hindsight's own limit on a new id
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
_MEMLANE = re.compile(BANK_ID_PATTERN)
_ESCAPED = re.compile(r"_([0-9a-f]{2})")


class BankIdError(ValueError):
    """A Hindsight bank id this surface cannot take (HTTP 400); the message names the rule."""


def to_memlane(bank_id: str) -> str:
    """The Memlane id of Hindsight's ``bank_id``; BankIdError when it has none."""
    if not bank_id:
        raise BankIdError("Bank id must not be empty")
    if _MEMLANE.fullmatch(bank_id) and not bank_id.startswith(PREFIX):
        return bank_id
    encoded = PREFIX + "".join(chr(b) if b in _SAFE else f"_{b:02x}" for b in bank_id.encode("utf-8"))
    if len(encoded) > MAX_MEMLANE:
        raise BankIdError(
            f"Bank id is too long for Memlane: it is stored as {len(encoded)} characters "
            f"(at most {MAX_MEMLANE}; characters other than letters, digits, '.' and '-' take 3 each)"
        )
    return encoded


def to_hindsight(memlane_id: str) -> str | None:
    """The Hindsight id that maps to ``memlane_id``, or None when none does."""
    if not memlane_id.startswith(PREFIX):
        return memlane_id
    raw = bytearray()
    rest = memlane_id[len(PREFIX) :]
    i = 0
    while i < len(rest):
        m = _ESCAPED.match(rest, i)
        if m:
            raw.append(int(m.group(1), 16))
            i = m.end()
        elif rest[i] != "_":
            raw.extend(rest[i].encode("utf-8"))
            i += 1
        else:
            return None
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return decoded if to_memlane(decoded) == memlane_id else None  # only the canonical form
    except BankIdError:
        return None


def check_new(bank_id: str) -> str:
    """``bank_id`` if Hindsight would create a bank of that id (its rules, checked only when a
    bank is created, as Hindsight does) and it maps to a Memlane id; BankIdError otherwise."""
    if not bank_id:
        raise BankIdError("Bank id must not be empty")
    if len(bank_id.encode("utf-8")) > MAX_HINDSIGHT_BYTES:
        raise BankIdError("Bank id is too long: at most 192 bytes of UTF-8 are allowed")
    if any(unicodedata.category(ch) == "Cc" for ch in bank_id):
        raise BankIdError("Bank id must not contain control characters")
    if bank_id.startswith("_"):
        raise BankIdError("Bank id must not start with '_': that prefix is reserved")
    to_memlane(bank_id)
    return bank_id
