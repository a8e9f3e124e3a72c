"""What a memory unit means to search, in one place: the filter rule, the occurrence interval
and the field codec.

Every backend answers the same questions about a unit (does it pass this filter? when did it
happen?) and used to answer them in its own code, which drifted apart: a unit with an end time
and no start was [end, end] on Milvus and [mentioned_at, end] in process, so the temporal channel
depended on ``MEMLANE_STORE__SEARCH_BACKEND``. Here each rule is written once, and its implementations
for each execution engine sit beside it:

* the filter (:class:`~memlane.interfaces.UnitFilter`): :func:`matches` (a Python check on
  hit fields), :func:`milvus_expr` (a Milvus filter expression over stored rows) and
  :func:`filter_mask` (a numpy mask over :class:`memlane.recall.index.BankIndex` columns);
* the occurrence interval: :func:`occurrence` (generic), :func:`effective_interval` (a unit)
  and :func:`fields_interval` (hit fields);
* the field codec: :func:`unit_fields` (unit -> hit fields, times in epoch seconds) and
  :func:`unit_from_fields` (back), over the field names and epoch conversions the stores
  share (:mod:`memlane.stored_fields`, re-exported here).

``tests/memlane/test_units.py`` runs one table of cases against all three filter
implementations and both interval forms.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from memlane.interfaces import UnitFilter
from memlane.records import TAG_MODES, FactType, MemoryUnit
from memlane.stored_fields import (
    CANDIDATE_FIELDS,
    FACT_CODES,
    HIT_FIELDS,
    LIST_FIELDS,
    NONE_TIME_US,
    TIME_FIELDS,
    from_us,
    json_value,
    to_dt,
    to_s,
    to_us,
    us_to_s,
)

__all__ = [
    "NONE_TIME_US",
    "TIME_FIELDS",
    "LIST_FIELDS",
    "HIT_FIELDS",
    "CANDIDATE_FIELDS",
    "FACT_CODES",
    "to_us",
    "from_us",
    "us_to_s",
    "to_s",
    "to_dt",
    "json_value",
    "escape_string",
    "str_list",
    "nan_if_none",
    "occurrence",
    "effective_interval",
    "fields_interval",
    "valid_at",
    "check_filter",
    "FilterError",
    "matches",
    "milvus_expr",
    "filter_mask",
    "unit_fields",
    "unit_from_fields",
]

# ---------------------------------------------------------------------------------------------
# The occurrence interval
# ---------------------------------------------------------------------------------------------
T = TypeVar("T", datetime, int, float)


def occurrence(start: T | None, end: T | None, mentioned: T) -> tuple[T, T]:
    """The interval a unit occupies on the time axis, for the temporal channel, its boost and
    the graph's temporal order. One rule for every backend:

    * both ends known: [start, end] (swapped if reversed);
    * start only: [start, start];
    * end only: [end, end]. Not [mentioned, end]: the mention time is when the fact was *said*,
      on another axis than when it happened. LLM extractors emit end-only units for "finished
      X by Friday"; their mention is usually after the end, so [mentioned, end] was reversed
      and overlapped no query, or, for a plan mentioned before its deadline, claimed the event
      ran from the conversation to the deadline. The end is the one occurrence time we know;
    * neither: [mentioned, mentioned] (when it was said is the best estimate we have).
    """
    lo = start if start is not None else end if end is not None else mentioned
    hi = end if end is not None else start if start is not None else mentioned
    return (lo, hi) if lo <= hi else (hi, lo)


def effective_interval(unit: MemoryUnit) -> tuple[datetime, datetime]:
    """:func:`occurrence` of a unit."""
    return occurrence(unit.occurred_start, unit.occurred_end, unit.mentioned_at)


def fields_interval(fields: Mapping[str, Any]) -> tuple[float, float] | None:
    """:func:`occurrence` of hit fields (epoch seconds); None when they hold no time at all."""
    mentioned = fields.get("mentioned_at")
    start, end = fields.get("occurred_start"), fields.get("occurred_end")
    if mentioned is None:
        if start is None and end is None:
            return None
        mentioned = start if start is not None else end
    return occurrence(start, end, mentioned)


# ---------------------------------------------------------------------------------------------
# The filter rule
#
#   fact_types   the unit's type is one of them (None or empty: any type)
#   tags         by tags_match (TAG_MODES): "any": shares a tag with them; "all": has every one
#                of them; "any_or_untagged" / "all_or_untagged": the same, or has no tag at all;
#                "exact": its tag set is theirs. None/empty tags: any unit, except for "exact",
#                where they select the untagged units (Hindsight's "global scope"). Stored tags
#                are unique (MemoryUnit), so Milvus can compare a set by its length.
#   document_id  the unit's document is exactly this one (None or "": any, as UnitFilter says)
#   mentioned_since / mentioned_until
#                a window on the mention time: since <= mentioned_at < until (either open)
#   entity_id    the unit names this entity (entity_ids contains it; None or "": any)
#   as_of        known by then (mentioned_at <= as_of), valid by then (valid_from, which
#                defaults to the mention, <= as_of) and not yet invalidated then
#                (invalid_at None or > as_of: invalidation is exclusive)
#   only_valid   without as_of: invalidated units (invalid_at set) are hidden
#
# Python and numpy compare epoch seconds, Milvus microseconds: hit fields carry whole seconds,
# so only sub-second differences between a unit's times and as_of can answer differently.
# ---------------------------------------------------------------------------------------------
class FilterError(ValueError):
    """A filter no implementation can apply; ``field`` names the UnitFilter field at fault, so
    a caller can name its own parameter without reading the message."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_filter(flt: UnitFilter | None) -> None:
    """Raise :class:`FilterError` for a filter no implementation can apply."""
    if flt is not None and flt.tags_match not in TAG_MODES:
        modes = ", ".join(repr(m) for m in TAG_MODES)
        raise FilterError("tags_match", f"tags_match must be one of {modes}, got {flt.tags_match!r}")
    if flt is not None and flt.mentioned_since and flt.mentioned_until:
        if flt.mentioned_since >= flt.mentioned_until:
            raise FilterError("mentioned_until", "mentioned_since must be before mentioned_until")


def _window_pass(mentioned: float | None, flt: UnitFilter) -> bool:
    """The mention window on epoch seconds; fields without a mention time pass no window."""
    if flt.mentioned_since is None and flt.mentioned_until is None:
        return True
    if mentioned is None:
        return False
    if flt.mentioned_since is not None and mentioned < flt.mentioned_since.timestamp():
        return False
    return flt.mentioned_until is None or mentioned < flt.mentioned_until.timestamp()


def _types(flt: UnitFilter) -> list[str]:
    return [FactType(t).value for t in flt.fact_types or ()]


def _by_tags(flt: UnitFilter) -> bool:
    """Whether the filter restricts by tags: tags given, or an exact match (with none:
    untagged units only)."""
    return bool(flt.tags) or flt.tags_match == "exact"


def _tags_pass(tags: Iterable[str], flt: UnitFilter) -> bool:
    have = tags if isinstance(tags, (set, frozenset)) else set(tags)
    wanted, mode = set(flt.tags or ()), flt.tags_match
    if mode == "exact":
        return have == wanted
    hit = wanted <= have if mode in ("all", "all_or_untagged") else bool(wanted & have)
    return hit or (mode in ("any_or_untagged", "all_or_untagged") and not have)


def valid_at(mentioned: T, valid_from: T | None, invalid_at: T | None, when: T) -> bool:
    """The as_of clause: known and valid at ``when`` and not invalidated by then."""
    start = valid_from if valid_from is not None else mentioned
    return mentioned <= when and start <= when and (invalid_at is None or invalid_at > when)


def matches(fields: Mapping[str, Any], flt: UnitFilter | None) -> bool:
    """The filter on hit fields (times in epoch seconds): for candidates that reach recall
    through the graph (ids only) and for stores that fetch fields by id."""
    if flt is None:
        return True
    check_filter(flt)
    if flt.fact_types and fields.get("fact_type") not in _types(flt):
        return False
    if flt.document_id and fields.get("document_id") != flt.document_id:
        return False
    if _by_tags(flt) and not _tags_pass(fields.get("tags") or (), flt):
        return False
    if flt.entity_id and flt.entity_id not in (fields.get("entity_ids") or ()):
        return False
    if not _window_pass(fields.get("mentioned_at"), flt):
        return False
    invalid_at = fields.get("invalid_at")
    if flt.as_of is not None:
        mentioned = fields.get("mentioned_at")
        t = flt.as_of.timestamp()
        if mentioned is None:  # fields without times: only the invalidation can be checked
            return invalid_at is None or invalid_at > t
        return valid_at(mentioned, fields.get("valid_from"), invalid_at, t)
    return not (flt.only_valid and invalid_at is not None)


def escape_string(value: str) -> str:
    """Return ``value`` as a double-quoted Milvus filter string literal.

    Backslash, double quote, newline, carriage return and tab are escaped, so a value can neither
    end the literal early nor inject expression syntax."""
    if not isinstance(value, str):
        raise ValueError(f"filter value must be a string, got {type(value).__name__}")
    out = (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{out}"'


def str_list(values: Iterable[str]) -> str:
    """A Milvus list literal of escaped strings."""
    return "[" + ", ".join(escape_string(v) for v in values) + "]"


def milvus_expr(flt: UnitFilter | None) -> str:
    """The filter as a Milvus expression over a units collection ("" for no restriction).
    Stored times are microseconds with NONE_TIME_US for None."""
    if flt is None:
        return ""
    check_filter(flt)
    parts: list[str] = []
    if flt.fact_types:
        parts.append(f"fact_type in {str_list(_types(flt))}")
    if _by_tags(flt):
        parts.append(_milvus_tags(flt))
    if flt.document_id:
        parts.append(f"document_id == {escape_string(flt.document_id)}")
    if flt.entity_id:
        parts.append(f"array_contains(entity_ids, {escape_string(flt.entity_id)})")
    if flt.mentioned_since is not None:
        parts.append(f"mentioned_at >= {to_us(flt.mentioned_since)}")
    if flt.mentioned_until is not None:
        parts.append(f"mentioned_at < {to_us(flt.mentioned_until)}")
    if flt.as_of is not None:
        at = to_us(flt.as_of)
        parts.append(f"mentioned_at <= {at}")
        parts.append(f"(valid_from == {NONE_TIME_US} or valid_from <= {at})")
        parts.append(f"(invalid_at == {NONE_TIME_US} or invalid_at > {at})")
    elif flt.only_valid:
        parts.append(f"invalid_at == {NONE_TIME_US}")
    return " and ".join(f"({p})" for p in parts)


def _milvus_tags(flt: UnitFilter) -> str:
    wanted = sorted(set(flt.tags or ()))
    untagged = "array_length(tags) == 0"
    if flt.tags_match == "exact":
        if not wanted:
            return untagged
        return f"array_length(tags) == {len(wanted)} and array_contains_all(tags, {str_list(wanted)})"
    fn = "array_contains_all" if flt.tags_match in ("all", "all_or_untagged") else "array_contains_any"
    hit = f"{fn}(tags, {str_list(wanted)})"
    return f"{hit} or {untagged}" if flt.tags_match.endswith("_or_untagged") else hit


def filter_mask(
    flt: UnitFilter | None,
    *,
    fact_code: np.ndarray,
    mentioned: np.ndarray,
    valid_from: np.ndarray,
    invalid_at: np.ndarray,
    document_ids: Sequence[str],
    tags: Sequence[frozenset[str]],
    entity_ids: Callable[[], Iterable[Iterable[str]]] | None = None,
) -> np.ndarray:
    """The filter as a boolean mask over column arrays of equal length n: fact codes
    (:data:`FACT_CODES`), times in epoch seconds with NaN for None, and per-row documents and
    tag sets. ``entity_ids`` gives the rows' entity ids, asked for only when the filter names
    an entity (few searches do, and building the column costs a pass over the rows)."""
    n = len(fact_code)
    mask = np.ones(n, dtype=bool)
    if flt is None:
        return mask
    check_filter(flt)
    if flt.fact_types:
        mask &= np.isin(fact_code, [FACT_CODES[t] for t in _types(flt)])
    if flt.document_id:
        mask &= np.fromiter((d == flt.document_id for d in document_ids), bool, n)
    if _by_tags(flt):
        mask &= np.fromiter((_tags_pass(t, flt) for t in tags), bool, n)
    if flt.entity_id:
        if entity_ids is None:
            raise ValueError("this filter names an entity: pass the rows' entity_ids")
        mask &= np.fromiter((flt.entity_id in set(e) for e in entity_ids()), bool, n)
    # NaN compares False, so a row without a mention time passes no window (as in matches).
    if flt.mentioned_since is not None:
        mask &= mentioned >= flt.mentioned_since.timestamp()
    if flt.mentioned_until is not None:
        mask &= mentioned < flt.mentioned_until.timestamp()
    if flt.as_of is not None:
        t = flt.as_of.timestamp()
        start = np.where(np.isnan(valid_from), mentioned, valid_from)
        mask &= (mentioned <= t) & (start <= t) & (np.isnan(invalid_at) | (invalid_at > t))
    elif flt.only_valid:
        mask &= np.isnan(invalid_at)
    return mask


# ---------------------------------------------------------------------------------------------
# The field codec
# ---------------------------------------------------------------------------------------------
def unit_fields(unit: MemoryUnit, keys: Sequence[str] = HIT_FIELDS) -> dict[str, Any]:
    """A unit in hit-field form: times as whole epoch seconds, enums as values, links and
    history as JSON-style dicts; ``keys`` only."""
    out: dict[str, Any] = {}
    for key in keys:
        value = getattr(unit, key)
        if key in TIME_FIELDS:
            value = to_s(value)
        elif key == "fact_type":
            value = FactType(value).value
        elif key in ("links", "history"):
            value = [x.model_dump(mode="json") for x in value]
        elif key in LIST_FIELDS:
            value = list(value)
        elif key == "metadata":
            value = dict(value)
        out[key] = value
    return out


# pydantic's ``model_fields`` is a property resolved on every access: read per key, the key
# filter took 6.2 us a memory, 0.9 us from this set (timeit; ~72 memories a recall).
_UNIT_KEYS = frozenset(MemoryUnit.model_fields)


def unit_from_fields(bank_id: str, id: str, fields: Mapping[str, Any]) -> MemoryUnit:  # noqa: A002
    """Build a MemoryUnit from hit fields without another round trip.

    Times may be epoch seconds (as in ``Hit.fields``), ISO strings or datetimes; hits carry
    whole seconds, so sub-second parts are lost (``get_units`` returns exact times). An
    ``embedding`` key, when present, is kept. Unknown keys are ignored."""
    data = {k: v for k, v in fields.items() if k in _UNIT_KEYS}
    for key in TIME_FIELDS:
        if key in data:
            data[key] = to_dt(data[key])
    # Links and opinion changes are validated with the unit, in one call: a model_validate per
    # link made this 71 us a unit of 30 links, against 53 (timeit), and recall builds ~70 units.
    if "links" in data:
        data["links"] = [x if isinstance(x, dict) else json_value(x) for x in json_value(data["links"])]
    if "history" in data:
        data["history"] = [x if isinstance(x, dict) else json_value(x) for x in json_value(data["history"])]
    if "metadata" in data:
        data["metadata"] = json_value(data["metadata"]) or {}
    data["id"], data["bank_id"] = id, bank_id
    return MemoryUnit.model_validate(data)


def nan_if_none(value: float | None) -> float:
    """Epoch seconds or NaN, the None of numpy time columns."""
    return math.nan if value is None else float(value)
