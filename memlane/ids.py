"""Deterministic ids: the same input always maps to the same primary key, so a retried task or a
re-run backfill upserts instead of duplicating."""

from __future__ import annotations

import hashlib


def make_id(kind: str, *parts: str) -> str:
    """32 hex chars of sha256 over the kind and the parts, separated by a unit separator."""
    h = hashlib.sha256(kind.encode())
    for p in parts:
        h.update(b"\x1f")
        h.update(str(p).encode())
    return h.hexdigest()[:32]


def unit_id(bank_id: str, document_id: str, chunk_id: str, index: int) -> str:
    return make_id("unit", bank_id, document_id, chunk_id, str(index))


def chunk_id(bank_id: str, document_id: str, session_id: str, index: int) -> str:
    return make_id("chunk", bank_id, document_id, session_id, str(index))


def entity_id(bank_id: str, canonical: str) -> str:
    return make_id("entity", bank_id, canonical)
