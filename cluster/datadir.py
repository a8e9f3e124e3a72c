"""Which store a command should open for a data directory, and who holds it.

A Milvus Lite directory is opened by one process at a time. When ``memlane serve`` runs, its
Milvus Lite server holds the directory and other commands reach the store through that server
(the URI is in the supervisor's ``serve.json``); when another process holds it (a backfill,
a ``memlane retain``), the kernel's lock table names that process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal


def cmdline(pid: int) -> str:
    """The command line of ``pid``, whitespace collapsed, at most 160 characters ('' if gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(raw.replace(b"\0", b" ").decode(errors="replace").split())[:160]


def lock_holder(path: Path) -> int | None:
    """The pid holding a lock on ``path`` per /proc/locks (Linux), or None. Milvus Lite locks
    ``milvus.db/LOCK`` while a process has the directory open."""
    try:
        inode = path.stat().st_ino
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in table.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a "->" marks a waiter)
        fields = line.split()
        if "->" in fields:
            continue
        try:
            pid, where = int(fields[4]), fields[5]
        except (IndexError, ValueError):
            continue
        if where.rsplit(":", 1)[-1] == str(inode):
            return pid
    return None


@dataclass
class StoreAccess:
    """How to reach a data directory's store: ``mode`` is ``server`` (a Milvus server at
    ``uri``: the one the settings name, or the local service's Milvus Lite server), ``file`` (open the directory in this process), ``held`` (process
    ``pid`` has it open) or ``absent`` (nothing stored yet)."""

    mode: Literal["server", "file", "held", "absent"]
    path: Path
    uri: str | None = None
    pid: int | None = None
    service: dict[str, Any] | None = None

    def settings(self):
        """Settings that open the store, or None when it cannot be opened (held or absent)."""
        from memlane.settings import Settings

        data_dir = self.path.parent
        if self.mode == "server":
            return Settings(data_dir=data_dir, store={"milvus_uri": self.uri})
        if self.mode == "file":
            return Settings(data_dir=data_dir)
        return None

    def why_not(self) -> str:
        if self.mode == "held":
            return f"the store is open in process {self.pid} ({cmdline(self.pid or 0) or '?'}), which must close it first"
        return f"no store in {self.path.parent} yet"


def store_access(data_dir: Path, milvus_uri: str | None = None) -> StoreAccess:
    """How commands reach the store right now, decided here for every command: the Milvus
    server the settings name (``milvus_uri``, default ``MEMLANE_STORE__MILVUS_URI``), else the
    local service's Milvus Lite server for ``data_dir``, else the directory itself."""
    from cluster.service import read_state

    data_dir = Path(data_dir).resolve()
    lite = data_dir / "milvus.db"
    if milvus_uri is None:
        from memlane.settings import Settings

        milvus_uri = Settings(data_dir=data_dir).store.milvus_uri
    if milvus_uri:
        return StoreAccess("server", lite, uri=milvus_uri)
    state = read_state(data_dir) if data_dir.is_dir() else None
    if state and state.get("milvus_uri"):
        return StoreAccess("server", lite, uri=state["milvus_uri"], service=state)
    if not lite.is_dir():
        return StoreAccess("absent", lite)
    holder = lock_holder(lite / "LOCK")
    if holder is not None:
        return StoreAccess("held", lite, pid=holder)
    return StoreAccess("file", lite)
