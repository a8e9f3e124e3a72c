"""Stored unit fields: their names and the time conversions the stores and
:mod:`memlane.units` share (times are INT64 microseconds when stored, epoch seconds in hits)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from memlane.records import FactType, utc

#: Stored times are INT64 microseconds since the epoch (exact round trips of datetimes); this
#: value stands for None. It lies far outside datetime's range (year 1 is -6.2e16 us).
NONE_TIME_US = -(2**62)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TIME_FIELDS = ("occurred_start", "occurred_end", "mentioned_at", "valid_from", "invalid_at")
LIST_FIELDS = ("source_turns", "entity_ids", "tags", "source_fact_ids")
#: Unit fields that hits carry (every unit field but id and the vector); times in epoch seconds.
HIT_FIELDS = (
    "bank_id",
    "text",
    "context",
    "fact_type",
    "occurred_start",
    "occurred_end",
    "mentioned_at",
    "confidence",
    "document_id",
    "chunk_id",
    "source_turns",
    "entity_ids",
    "tags",
    "links",
    "proof_count",
    "source_fact_ids",
    "history",
    "valid_from",
    "invalid_at",
    "superseded_by",
    "metadata",
)
#: What recall scores and returns of a candidate: the hit fields less the lexical-only context
#: (often larger than the memory itself; fetching 200 candidates with it cost 25 ms on Lite).
CANDIDATE_FIELDS = tuple(k for k in HIT_FIELDS if k != "context")
#: Small integer codes of the fact types, for numpy columns.
FACT_CODES = {t.value: i for i, t in enumerate(FactType)}


def to_us(dt: datetime | None) -> int:
    """Aware datetime -> integer microseconds since the epoch (exact); None -> NONE_TIME_US."""
    if dt is None:
        return NONE_TIME_US
    d = utc(dt) - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def from_us(us: int | None) -> datetime | None:
    """Inverse of :func:`to_us`."""
    if us is None or us == NONE_TIME_US:
        return None
    return _EPOCH + timedelta(microseconds=int(us))


def us_to_s(us: int | None) -> int | None:
    """Stored microseconds -> whole epoch seconds (floor), the unit of hit fields."""
    if us is None or us == NONE_TIME_US:
        return None
    return int(us) // 1_000_000


def to_s(dt: datetime | None) -> int | None:
    """Datetime -> whole epoch seconds as hit fields carry them (the same floor as us_to_s)."""
    return us_to_s(to_us(dt))


def to_dt(value: Any) -> datetime | None:
    """Epoch seconds (int/float), an ISO string or a datetime -> aware UTC datetime."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, (int, float)):
        return _EPOCH + timedelta(seconds=value)
    if isinstance(value, str):
        return utc(datetime.fromisoformat(value))
    raise ValueError(f"not a time: {value!r}")


#: The key a list is stored under in a JSON field of a Milvus whose JSON must be an object
#: (Milvus 2.3: "json: cannot unmarshal array into Go value of type map"); see
#: memlane/stores/milvus/capabilities.py. :func:`json_value` unwraps it on every backend.
JSON_LIST_KEY = "__memlane_list__"


def json_value(value: Any) -> Any:
    """A stored JSON field's value (parsed when it comes back as text)."""
    if isinstance(value, (str, bytes, bytearray)):
        value = json.loads(value)
    if isinstance(value, dict) and len(value) == 1 and JSON_LIST_KEY in value:
        return value[JSON_LIST_KEY]
    return value
