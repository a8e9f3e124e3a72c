"""The local Milvus server: the standalone Milvus 2.3.5 binary of the ``milvus`` package
("embedded Milvus", the ``milvus-server`` extra), reachable from 127.0.0.1 only.

Milvus 2.3 listens on every interface (gRPC 19530, HTTP 9091, its components' ports) and its
``ip`` settings choose only the address it advertises, so no setting keeps it off the network.
It runs instead in a network namespace of its own, which holds nothing but a loopback device:
a supervisor process binds the one port clients use on the host's 127.0.0.1 *before* it leaves
the host's namespace (``unshare(CLONE_NEWNET)``, which needs root), then starts Milvus in the
new namespace and relays each accepted connection to Milvus's 127.0.0.1:19530 there. The host's
socket table holds that one loopback listener; nothing of Milvus is reachable from outside.

One server per data directory: its state (supervisor pid, port, Milvus's pid) is in
``<data dir>/milvus-server.json``, the supervisor's log in ``<data dir>/milvus-server.log``,
Milvus's data (etcd, segments, its own logs) under ``<data dir>/milvus-server/``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cluster.processes import terminate

STATE_FILE = "milvus-server.json"
LOG_FILE = "milvus-server.log"
BASE_DIR = "milvus-server"
DEFAULT_PORT = 19530
INSTALL_HINT = (
    "install the milvus-server extra: .venv/bin/pip install -e '.[milvus-server]' (make install does)"
)
# Measured here: a start answers after 7.4-8.7 s on 2 cores, the first one included (it unpacks
# the binary); ../shared/ARCHITECTURE.md saw ~67 s through the package's own start. The bound
# leaves room for a loaded machine.
START_TIMEOUT_S = 240.0
# After SIGTERM, Milvus gets this long before SIGKILL (its own graceful bound is 10 s:
# cluster/milvus_supervisor.py's TUNING).
STOP_GRACE_S = 20.0


class MilvusServerError(Exception):
    """The local Milvus server could not be started, found or stopped; the message is one line."""


@dataclass(frozen=True)
class MilvusServer:
    """A running local Milvus server (its supervisor's pid and the host port)."""

    pid: int
    port: int
    milvus_pid: int
    base_dir: str
    log: str

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The setting that points every Memlane command, the service and Ray jobs at it."""
        return {"MEMLANE_STORE__MILVUS_URI": self.uri}


def read_state(data_dir: Path) -> MilvusServer | None:
    """The server started for ``data_dir`` and ready, or None (none, still starting, or gone)."""
    try:
        state = json.loads((Path(data_dir) / STATE_FILE).read_text())
        if not state.pop("ready", False):
            return None
        server = MilvusServer(**state)
        os.kill(server.pid, 0)
    except (OSError, ValueError, TypeError):
        return None
    return server


def write_state(data_dir: Path, **state: Any) -> None:
    """Replace the state file atomically (the supervisor writes it; readers see all or none)."""
    tmp = Path(data_dir) / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(Path(data_dir) / STATE_FILE)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def server_version(uri: str, timeout_s: float = 5.0) -> str | None:
    """The version a Milvus server at ``uri`` reports, or None when it does not answer."""
    from pymilvus import MilvusClient
    from pymilvus.exceptions import MilvusException

    try:
        client = MilvusClient(uri=uri, timeout=timeout_s, dedicated=True)
    except MilvusException:  # it does not answer (pymilvus wraps grpc's errors)
        return None
    try:
        return str(client.get_server_version())
    except MilvusException:
        return None
    finally:
        client.close()


def start(
    data_dir: Path,
    *,
    port: int = DEFAULT_PORT,
    timeout_s: float = START_TIMEOUT_S,
    progress: Callable[[], None] | None = None,
) -> MilvusServer:
    """Start the server detached and return it once it answers through the loopback relay.
    Raises MilvusServerError (one line) for a missing extra, a busy port, a server already
    running for the directory, no network namespace (not root), or a server that exits or does
    not answer within ``timeout_s`` (it is stopped then; the log keeps why)."""
    if importlib.util.find_spec("milvus") is None:
        raise MilvusServerError(f"the milvus package is not installed: {INSTALL_HINT}")
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    running = read_state(data_dir)
    if running is not None:
        raise MilvusServerError(
            f"a Milvus server is already running for {data_dir} at {running.uri} "
            "(stop it with memlane store server stop)"
        )
    _stop_stale(data_dir)
    if not _port_free(port):
        raise MilvusServerError(f"port {port} on 127.0.0.1 is in use (choose another with --port)")
    log_path = data_dir / LOG_FILE
    cmd = [sys.executable, "-m", "cluster.milvus_supervisor", str(data_dir), str(port)]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(Path(__file__).resolve().parent.parent),
        )
    deadline = time.monotonic() + timeout_s
    while True:
        server = read_state(data_dir)
        if server is not None and server.pid == proc.pid:
            return server
        if proc.poll() is not None:
            (data_dir / STATE_FILE).unlink(missing_ok=True)
            lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
            why = lines[-1] if lines else "no output"
            raise MilvusServerError(
                f"the Milvus server exited with code {proc.returncode} (log {log_path}): {why}"
            )
        if time.monotonic() > deadline:
            terminate(proc.pid, 60.0)
            (data_dir / STATE_FILE).unlink(missing_ok=True)
            raise MilvusServerError(
                f"the Milvus server did not answer within {timeout_s:.0f}s (log {log_path})"
            )
        if progress:
            progress()
        time.sleep(0.5)


def _stop_stale(data_dir: Path) -> None:
    """A supervisor still starting or left behind for the directory (state without ``ready``)."""
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return
    if not state.get("ready"):
        terminate(int(state.get("pid", 0)), 60.0)
    (data_dir / STATE_FILE).unlink(missing_ok=True)


def stop(data_dir: Path, timeout_s: float = STOP_GRACE_S + 20.0) -> bool:
    """Stop the server of ``data_dir`` (its supervisor stops Milvus gracefully, then exits);
    False when none was running."""
    data_dir = Path(data_dir)
    server = read_state(data_dir)
    if server is None:
        _stop_stale(data_dir)
        return False
    terminate(server.pid, timeout_s)
    (data_dir / STATE_FILE).unlink(missing_ok=True)
    return True


def status(data_dir: Path) -> dict[str, Any] | None:
    """What ``memlane store server status`` prints: the server, its version when it answers."""
    server = read_state(Path(data_dir))
    if server is None:
        return None
    version = server_version(server.uri)
    return {**server.__dict__, "uri": server.uri, "answers": version is not None, "version": version}
