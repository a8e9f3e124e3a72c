"""Opening Milvus: the client, the shared in-process Lite server, collection naming."""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path

from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

from memlane.errors import StoreUnavailable
from memlane.records import check_bank_id
from memlane.settings import Settings
from memlane.stores.milvus.lite_files import remove_half_created_collections

PREFIX_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

# Milvus Lite file targets opened by stores of this process: path -> open stores. The in-process
# Lite server is shared per path (pymilvus reuses it), so it is released with the last store.
_LITE_REFS: dict[str, int] = {}
_LITE_LOCK = threading.Lock()


def _bank_slug(bank_id: str) -> str:
    # Deterministic and collision-free: the sanitised id keeps names readable, the hash of the
    # exact id separates ids that sanitise alike ("a.b" / "a-b") or differ only in case.
    slug = re.sub(r"[^A-Za-z0-9_]", "_", bank_id)[:48]
    digest = hashlib.sha256(bank_id.encode("utf-8")).hexdigest()[:12]
    return f"{slug}_{digest}"


def collection_names(prefix: str, bank_id: str) -> dict[str, str]:
    """The collection names of one bank: ``{"units": ..., "chunks": ..., "entities": ...,
    "tree": ...}`` (the tree's collection is created by the first consolidation, not with the
    bank: most banks written by a retain never need it).

    Valid Milvus names (letters, digits, underscores; under 255 chars) derived from any valid
    bank id, deterministic and collision-free (sanitised prefix of the id plus a 48-bit hash
    of it)."""
    check_bank_id(bank_id)
    slug = _bank_slug(bank_id)
    return {
        "units": f"{prefix}_u_{slug}",
        "chunks": f"{prefix}_c_{slug}",
        "entities": f"{prefix}_e_{slug}",
        "tree": f"{prefix}_t_{slug}",
    }


def is_missing(exc: Exception) -> bool:
    """True when a Milvus error says the collection does not exist (dropped meanwhile)."""
    msg = str(exc).lower()
    return ("not exist" in msg or "not found" in msg) and "collection" in msg


# The client's gRPC keepalive. pymilvus pings every 10 s, also with no call in flight; Milvus
# Lite's server (gRPC's default policy: a ping without data at most every 5 min) answers an
# idle client with GOAWAY "too_many_pings", which gRPC prints on stderr in every process that
# waits on something else for a minute or two (an eval embedding, a Ray worker re-embedding).
# Measured 27 Nov 2026: a Lite client idle 100 s between two calls printed 3 GOAWAY lines with
# pymilvus's defaults and none with these. A dead server is still found by the next call.
KEEPALIVE = {"grpc.keepalive_time_ms": 330_000, "grpc.keepalive_permit_without_calls": False}


def open_client(settings: Settings) -> tuple[MilvusClient, str | None, str]:
    """Connect as ``settings`` says: ``(client, lite_path or None, server version)``. A Lite file's
    directory is created and its in-process server referenced (see :func:`release_lite`).

    A server's connection is the client's own (``dedicated``), closed with the store. A pooled
    one outlives its client: a job's driver that opened a store again after a Ray job had left
    the pooled channel idle for a minute got it back, pymilvus "recovered" it, and the recovery
    failed on the server's GOAWAY "too_many_pings" (the bank listing after a backfill and the
    consolidate tests, 3 of 3 runs under pytest, Nov 2026)."""
    lite_path: str | None = None
    target = settings.milvus_target()
    if not settings.store.milvus_uri:
        Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
        lite_path = str(Path(target).resolve())
        target = lite_path
        with _LITE_LOCK:
            if not _LITE_REFS.get(lite_path):  # the first opener in this process
                remove_half_created_collections(lite_path)
            _LITE_REFS[lite_path] = _LITE_REFS.get(lite_path, 0) + 1
    try:
        client = MilvusClient(
            uri=target,
            token=settings.store.milvus_token or "",
            dedicated=lite_path is None,
            grpc_options=dict(KEEPALIVE),
        )
        db = settings.store.milvus_db or "default"
        if db != "default":
            if db not in client.list_databases():
                try:
                    client.create_database(db)
                except MilvusException:  # created meanwhile by another client
                    pass
            client.use_database(db)
        version = str(client.get_server_version())
    except MilvusException as exc:
        release_lite(lite_path)
        if lite_path is None:
            raise StoreUnavailable(
                f"the Milvus server at {target} does not answer ({exc.message}): "
                "start it (memlane store server start) or fix MEMLANE_STORE__MILVUS_URI / --milvus-uri"
            ) from exc
        raise StoreUnavailable(
            f"cannot open Milvus Lite at {lite_path} ({exc.message}): a data directory is opened "
            "by one process at a time, and another has it (`memlane status` names it); stop "
            "it, or share the directory through `memlane serve`, whose commands go through it"
        ) from exc
    except Exception:
        release_lite(lite_path)
        raise
    return client, lite_path, version


def release_lite(lite_path: str | None) -> None:
    """Drop one reference to a Lite file's in-process server; the last one stops it (flushing
    it and freeing the data-directory lock)."""
    if lite_path is None:
        return
    with _LITE_LOCK:
        left = _LITE_REFS.get(lite_path, 1) - 1
        if left > 0:
            _LITE_REFS[lite_path] = left
            return
        _LITE_REFS.pop(lite_path, None)
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(lite_path)
