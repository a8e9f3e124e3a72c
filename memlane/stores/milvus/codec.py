"""Rows of the Milvus collections <-> model objects, and the byte, array and JSON limits a row
must respect. Unit semantics (times, the hit-field form) come from :mod:`memlane.units`; this
module adds only what is particular to storage: microsecond times with a sentinel for None, a
confidence sentinel, the analysed BM25 text and the precomputed occurrence interval
(``t_start``/``t_end``, :func:`memlane.units.effective_interval`, so search_time filters on it).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

from memlane.records import (
    SLOTS_KEY,
    Bank,
    Chunk,
    Disposition,
    Entity,
    FactType,
    Link,
    MemoryUnit,
    OpinionChange,
    check_bank_id,
)
from memlane.records.limits import MAX_ARRAY, MAX_ID_BYTES, MAX_TEXT_BYTES, check_bytes
from memlane.stores.lexical import analyze
from memlane.stores.milvus.capabilities import Capabilities
from memlane.units import (
    HIT_FIELDS,
    LIST_FIELDS,
    TIME_FIELDS,
    effective_interval,
    from_us,
    json_value,
    to_us,
    us_to_s,
)

NO_CONFIDENCE = -1.0  # confidence is in [0, 1]; -1 stands for None
# The field limits (MAX_ID_BYTES, MAX_TEXT_BYTES, MAX_ARRAY, check_bytes) live in
# memlane/records/limits.py, where the readers and the API's items check them too.
PLACEHOLDER = [0.0, 0.0]  # Milvus wants a vector field in every collection

UNIT_OUT = ["id", *HIT_FIELDS]
CHUNK_OUT = ["id", "bank_id", "document_id", "session_id", "index", "text", "turn_ids", "started_at", "tags"]
ENTITY_OUT = ["id", "bank_id", "name", "type", "aliases", "mention_count", "first_seen", "last_seen"]
BANK_OUT = ["id", "name", "background", "disposition", "created_at", "updated_at"]


def truncate_bytes(value: str, limit: int) -> str:
    """Cut an analysed (indexing-only) string to ``limit`` UTF-8 bytes at a token boundary."""
    data = value.encode()
    if len(data) <= limit:
        return value
    return data[:limit].decode(errors="ignore").rsplit(" ", 1)[0]


def check_list(what: str, values: Sequence[str]) -> list[str]:
    if len(values) > MAX_ARRAY:
        raise ValueError(f"{what} has {len(values)} items, the limit is {MAX_ARRAY}")
    for v in values:
        check_bytes(f"an item of {what}", v, MAX_ID_BYTES)
    return list(values)


def check_json(what: str, value: Any) -> Any:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from None
    check_bytes(what, text, MAX_TEXT_BYTES)
    return value


def row_fields(raw: dict[str, Any], keys: Sequence[str] = HIT_FIELDS) -> dict[str, Any]:
    """Stored row -> Hit.fields (times in epoch seconds or None, sentinels hidden), for
    ``keys`` only."""
    if keys is not HIT_FIELDS:
        full = row_fields(raw)
        return {k: full[k] for k in keys}
    f: dict[str, Any] = {}
    for key in HIT_FIELDS:
        f[key] = raw.get(key)
    if "superseded_by" in f:  # a Milvus without nullable fields stores none as ""
        f["superseded_by"] = f["superseded_by"] or None
    for key in TIME_FIELDS:
        f[key] = us_to_s(raw.get(key))
    conf = raw.get("confidence")
    f["confidence"] = None if conf is None or conf < 0 else float(conf)
    for key in LIST_FIELDS:
        f[key] = list(raw.get(key) or [])
    f["links"] = list(json_value(raw.get("links")) or [])
    f["history"] = list(json_value(raw.get("history")) or [])
    meta = json_value(raw.get("metadata")) or {}
    f["metadata"] = {k: v for k, v in meta.items() if k != SLOTS_KEY} if SLOTS_KEY in meta else meta
    f["proof_count"] = int(raw.get("proof_count") or 0)
    return f


def row_unit(bank_id: str, raw: dict[str, Any], with_embedding: bool) -> MemoryUnit:
    """Stored row -> MemoryUnit with exact (microsecond) times."""
    data = row_fields(raw)
    for key in TIME_FIELDS:
        data[key] = from_us(raw.get(key))
    data["links"] = [Link.model_validate(x) for x in data["links"]]
    data["history"] = [OpinionChange.model_validate(x) for x in data["history"]]
    data["id"], data["bank_id"] = raw["id"], bank_id
    data["slots"] = (json_value(raw.get("metadata")) or {}).get(SLOTS_KEY)
    if with_embedding and raw.get("embedding") is not None:
        data["embedding"] = [float(x) for x in raw["embedding"]]
    return MemoryUnit.model_validate(data)


def bank_row(bank: Bank) -> dict[str, Any]:
    check_bank_id(bank.bank_id)
    return {
        "id": bank.bank_id,
        "name": check_bytes("bank name", bank.name, MAX_TEXT_BYTES),
        "background": check_bytes("bank background", bank.background, MAX_TEXT_BYTES),
        # The embedder record rides in the disposition's JSON: the banks collection has no
        # dynamic field, and a new column would need every existing store migrated.
        "disposition": {**bank.disposition.model_dump(mode="json"), _VECTORS: _vectors(bank)},
        "created_at": to_us(bank.created_at),
        "updated_at": to_us(bank.updated_at),
        "_v": PLACEHOLDER,
    }


def row_bank(row: dict[str, Any]) -> Bank:
    disposition = dict(json_value(row.get("disposition")) or {})
    vectors = disposition.pop(_VECTORS, None) or {}  # absent: a bank from before the record
    return Bank(
        bank_id=row["id"],
        name=row.get("name") or "",
        background=row.get("background") or "",
        disposition=Disposition.model_validate(disposition),
        created_at=from_us(row["created_at"]),
        updated_at=from_us(row["updated_at"]),
        embedder=vectors.get("embedder", ""),
        embedding_dim=vectors.get("dim", 0),
        reembedding=vectors.get("reembedding", ""),
    )


# The key of the bank row's disposition JSON that holds the embedder record (see bank_row).
_VECTORS = "_vectors"


def _vectors(bank: Bank) -> dict[str, Any]:
    return {"embedder": bank.embedder, "dim": bank.embedding_dim, "reembedding": bank.reembedding}


def unit_row(
    bank_id: str, u: MemoryUnit, embedding: Sequence[float], dim: int, caps: Capabilities
) -> dict[str, Any]:
    """A unit's row for a Milvus that can do ``caps``; ``embedding`` must have ``dim`` finite
    values."""
    vec = np.asarray(embedding, dtype=np.float32)
    if vec.shape != (dim,):
        raise ValueError(f"unit {u.id!r}: embedding has shape {vec.shape}, the store's dim is {dim}")
    if not np.all(np.isfinite(vec)):
        raise ValueError(f"unit {u.id!r}: embedding has NaN or infinite values")
    t_start, t_end = (to_us(t) for t in effective_interval(u))
    what = f"unit {u.id!r}"
    row = {
        "id": check_bytes(f"{what} id", u.id, MAX_ID_BYTES),
        "bank_id": bank_id,
        "text": check_bytes(f"{what} text", u.text, MAX_TEXT_BYTES),
        "context": check_bytes(f"{what} context", u.context, MAX_TEXT_BYTES),
        "embedding": vec.tolist(),
        "fact_type": FactType(u.fact_type).value,
        "occurred_start": to_us(u.occurred_start),
        "occurred_end": to_us(u.occurred_end),
        "mentioned_at": to_us(u.mentioned_at),
        "valid_from": to_us(u.valid_from),
        "invalid_at": to_us(u.invalid_at),
        "t_start": t_start,
        "t_end": t_end,
        "proof_count": u.proof_count,
        "confidence": NO_CONFIDENCE if u.confidence is None else float(u.confidence),
        "document_id": check_bytes(f"{what} document_id", u.document_id, MAX_ID_BYTES),
        "chunk_id": check_bytes(f"{what} chunk_id", u.chunk_id, MAX_ID_BYTES),
        **{k: check_list(f"{what} {k}", getattr(u, k)) for k in LIST_FIELDS},
        "link_targets": check_list(f"{what} links", list(dict.fromkeys(x.target_id for x in u.links))),
        "superseded_by": (
            (None if caps.nullable else "")  # "" read back as None (row_fields): ids are never ""
            if u.superseded_by is None
            else check_bytes(f"{what} superseded_by", u.superseded_by, MAX_ID_BYTES)
        ),
        "links": [{"target_id": x.target_id, "type": x.type.value, "weight": x.weight} for x in u.links],
        "history": check_json(f"{what} history", [h.model_dump(mode="json") for h in u.history]),
        # the slot signals ride in the metadata column (memlane.records.SLOTS_KEY); read back
        # into the unit by row_unit, and left out of hit fields by row_fields
        "metadata": check_json(
            f"{what} metadata",
            u.metadata if u.slots is None else {**u.metadata, SLOTS_KEY: u.slots.model_dump()},
        ),
    }
    if caps.bm25:  # the BM25 function's input; a Milvus without one has no such field
        row["lexical"] = truncate_bytes(analyze(f"{u.text} {u.context}"), MAX_TEXT_BYTES)
    return row


def chunk_row(bank_id: str, ch: Chunk) -> dict[str, Any]:
    what = f"chunk {ch.chunk_id!r}"
    return {
        "id": check_bytes(f"{what} id", ch.chunk_id, MAX_ID_BYTES),
        "bank_id": bank_id,
        "document_id": check_bytes(f"{what} document_id", ch.document_id, MAX_ID_BYTES),
        "session_id": check_bytes(f"{what} session_id", ch.session_id, MAX_ID_BYTES),
        "index": ch.index,
        "text": check_bytes(f"{what} text", ch.text, MAX_TEXT_BYTES),
        "turn_ids": check_list(f"{what} turn_ids", ch.turn_ids),
        "started_at": to_us(ch.started_at),
        "tags": check_list(f"{what} tags", ch.tags),
        "_v": PLACEHOLDER,
    }


def row_chunk(bank_id: str, r: dict[str, Any]) -> Chunk:
    return Chunk(
        chunk_id=r["id"],
        bank_id=bank_id,
        document_id=r["document_id"],
        session_id=r["session_id"],
        index=int(r["index"]),
        text=r["text"],
        turn_ids=list(r.get("turn_ids") or []),
        started_at=from_us(r["started_at"]),
        tags=list(r.get("tags") or []),
    )


def entity_row(bank_id: str, e: Entity) -> dict[str, Any]:
    what = f"entity {e.entity_id!r}"
    return {
        "id": check_bytes(f"{what} id", e.entity_id, MAX_ID_BYTES),
        "bank_id": bank_id,
        "name": check_bytes(f"{what} name", e.name, MAX_TEXT_BYTES),
        "type": check_bytes(f"{what} type", e.type, MAX_ID_BYTES),
        "aliases": check_list(f"{what} aliases", e.aliases),
        "mention_count": e.mention_count,
        "first_seen": to_us(e.first_seen),
        "last_seen": to_us(e.last_seen),
        "_v": PLACEHOLDER,
    }


def row_entity(bank_id: str, r: dict[str, Any]) -> Entity:
    return Entity(
        entity_id=r["id"],
        bank_id=bank_id,
        name=r["name"],
        type=r["type"],
        aliases=list(r.get("aliases") or []),
        mention_count=int(r["mention_count"]),
        first_seen=from_us(r["first_seen"]),
        last_seen=from_us(r["last_seen"]),
    )
