"""Client-side observation of Milvus calls: every call the store makes through its client is
timed and reported to the observers registered in this process.

Milvus Lite exports no metrics of its own, so what the store sees (latency and failures per
operation, rows written, read or deleted) is the only view of it; a Milvus server adds its own
metrics beside these. The engine stays free of any metrics library: the Ray layers register an
observer that records into Ray metrics (``serve/metrics.py``, ``actors/store_metrics.py``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

# An observer gets (operation, seconds, ok, rows). ``rows`` is the rows sent by a write
# (upsert, insert), the rows deleted, or the rows a read returned; 0 when not known.
Observer = Callable[[str, float, bool, int], None]

_observers: list[Observer] = []
_lock = threading.Lock()

# The client methods the store calls; anything else (close, describe) passes through untimed.
OPERATIONS = frozenset(
    {
        "upsert",
        "insert",
        "delete",
        "query",
        "search",
        "flush",
        "has_collection",
        "create_collection",
        "drop_collection",
        "load_collection",
        "create_index",
        "list_collections",
    }
)


def add_observer(fn: Observer) -> None:
    """Report every store call of this process to ``fn`` (once per function)."""
    with _lock:
        if fn not in _observers:
            _observers.append(fn)


def remove_observer(fn: Observer) -> None:
    with _lock:
        if fn in _observers:
            _observers.remove(fn)


def _rows(operation: str, args: tuple, kwargs: dict, result: Any) -> int:
    if operation in ("upsert", "insert"):
        data = kwargs.get("data", args[1] if len(args) > 1 else None)
        return len(data) if isinstance(data, list) else (1 if isinstance(data, dict) else 0)
    if operation == "delete" and isinstance(result, dict):
        return int(result.get("delete_count", 0) or 0)
    if operation == "query" and isinstance(result, list):
        return len(result)
    if operation == "search" and isinstance(result, list):
        return sum(len(hits) for hits in result)
    return 0


def _notify(operation: str, seconds: float, ok: bool, rows: int) -> None:
    for fn in list(_observers):
        try:
            fn(operation, seconds, ok, rows)
        except Exception:  # noqa: BLE001 - an observer must never fail a store call
            pass


class ObservedClient:
    """A MilvusClient whose calls in :data:`OPERATIONS` are timed and reported."""

    def __init__(self, client: Any) -> None:
        self._inner = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in OPERATIONS or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if not _observers:
                return attr(*args, **kwargs)
            start = time.perf_counter()
            try:
                result = attr(*args, **kwargs)
            except Exception:
                _notify(name, time.perf_counter() - start, False, 0)
                raise
            _notify(name, time.perf_counter() - start, True, _rows(name, args, kwargs, result))
            return result

        return call
