"""The same filter the store applies, in Python, for candidates that reach fusion through the
graph (the graph knows ids, not fields)."""

from __future__ import annotations

from typing import Any, Mapping

from memlane.interfaces import UnitFilter


def matches(fields: Mapping[str, Any], flt: UnitFilter | None) -> bool:
    if flt is None:
        return True
    if flt.fact_types and fields.get("fact_type") not in {t.value for t in flt.fact_types}:
        return False
    if flt.document_id is not None and fields.get("document_id") != flt.document_id:
        return False
    if flt.tags:
        tags = set(fields.get("tags") or ())
        wanted = set(flt.tags)
        if (flt.tags_match == "all" and not wanted <= tags) or (flt.tags_match != "all" and not wanted & tags):
            return False
    invalid_at = fields.get("invalid_at")
    if flt.as_of is not None:
        t = flt.as_of.timestamp()
        start = fields.get("valid_from") or fields.get("mentioned_at")
        if fields.get("mentioned_at") is not None and fields["mentioned_at"] > t:
            return False
        if start is not None and start > t:
            return False
        if invalid_at is not None and invalid_at <= t:
            return False
    elif flt.only_valid and invalid_at is not None:
        return False
    return True
