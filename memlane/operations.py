"""Background operations (an async retain): records any process can read, kept in the store.

A record is written when the operation is accepted, updated as it progresses (at most every
few seconds: each update is one upsert) and closed with its result or error. The process that
runs it may die (a replica scaled down or killed); a running record whose heartbeat is older
than ``stale_after_s`` is then reported as failed, and the client retries: retains are
idempotent, so a retry finishes the work without duplicates.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from memlane.interfaces import VectorStore
from memlane.records import now_utc

QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"


class OperationLog:
    """Create, update and read operation records through a :class:`VectorStore`."""

    def __init__(self, store: VectorStore, *, stale_after_s: float = 120.0, heartbeat_s: float = 2.0) -> None:
        self.store = store
        self.stale_after_s = stale_after_s
        self.heartbeat_s = heartbeat_s

    def create(self, bank_id: str, kind: str, *, total: int = 0, op_id: str | None = None) -> dict[str, Any]:
        """A new queued operation; ``op_id``: the caller's id (default ``op-`` and a random
        UUID's hex)."""
        op: dict[str, Any] = {
            "operation_id": op_id or f"op-{uuid.uuid4().hex}",
            "bank_id": bank_id,
            "kind": kind,
            "status": QUEUED,
            "done": 0,
            "total": total,
            "result": None,
            "error": None,
            "created_at": now_utc().isoformat(),
            "updated_at": now_utc().isoformat(),
            "heartbeat": time.time(),
        }
        self.store.put_operation(op["operation_id"], op)
        return op

    def update(self, op: dict[str, Any], **fields: Any) -> None:
        op.update(fields, updated_at=now_utc().isoformat(), heartbeat=time.time())
        self.store.put_operation(op["operation_id"], op)

    def progress(self, op: dict[str, Any]):
        """A progress callback (``n`` more items done) that writes at most every heartbeat."""
        last = [0.0]

        def advance(n: int) -> None:
            op["done"] += n
            if time.monotonic() - last[0] >= self.heartbeat_s:
                last[0] = time.monotonic()
                self.update(op, status=RUNNING)

        return advance

    def get(self, op_id: str, bank_id: str | None = None) -> dict[str, Any] | None:
        """The record (None when unknown or of another bank), with a lost worker reported."""
        op = self.store.get_operation(op_id)
        if op is None or (bank_id is not None and op.get("bank_id") != bank_id):
            return None
        if op["status"] in (QUEUED, RUNNING) and time.time() - op["heartbeat"] > self.stale_after_s:
            op = {
                **op,
                "status": FAILED,
                "error": "the worker running this operation stopped reporting; retry the "
                "request (retains are idempotent)",
            }
        return {k: v for k, v in op.items() if k != "heartbeat"}
