"""The local default cluster: Ray and a Milvus Lite gRPC server, both bound to 127.0.0.1.

* :class:`MilvusLiteServer` runs ``milvus-lite server --data-dir DIR --host 127.0.0.1 --port P``
  (a console script of the milvus-lite package) over ``DATA_DIR/milvus.db``, the same directory
  the engine opens in-process, so what a backfill writes is what ``memlane recall`` reads later.
  Every Ray worker connects with ``MEMLANE_STORE__MILVUS_URI=http://127.0.0.1:P``: the client path of
  a production Milvus server. The server is started in its own session, so a Ctrl-C in the
  terminal reaches the driver only; the driver stops the server last, with SIGINT (Lite drains
  in-flight requests and closes its data cleanly on SIGINT), then SIGTERM, then SIGKILL.
* :func:`start_local_ray` starts a single-node Ray whose every port is on loopback. Ray 2.60
  rewrites ``_node_ip_address="127.0.0.1"`` to the machine's routable address
  (``services.resolve_ip_for_localhost``) and its GCS, raylet and worker ports then listen on all
  interfaces (checked with ``ss -ltnp``: 8 listeners on ``*`` or ``0.0.0.0``). Ray uses the
  loopback address as the node IP only when ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (its
  "no multi-node cluster" switch, which despite the name applies on Linux too); with it every
  Ray listener is on 127.0.0.1 (checked the same way). It must be set before ``import ray``
  in this process and is inherited by the processes Ray starts, so it is set here first.
  The dashboard (127.0.0.1:8265 by default) asks for the token in ``~/.ray/auth_token``: Ray
  2.60 turns token auth on for local clusters and writes that file when it is missing.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

LOOPBACK = "127.0.0.1"


DASHBOARD_PORT = 8265


def _port_free(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _milvus_lite_command() -> list[str]:
    exe = Path(sys.executable).with_name("milvus-lite")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("milvus-lite")
    if found:
        return [found]
    return [sys.executable, "-m", "milvus_lite"]


def _on_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _die_with_parent(sig: int = signal.SIGINT) -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to send ``sig`` to the child when its parent dies
    (prctl PR_SET_PDEATHSIG); None elsewhere. The signal follows the parent *thread*, so it is
    used only for children started from the main thread (which lives as long as the process)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None
    PR_SET_PDEATHSIG = 1

    def preexec() -> None:
        # An ignored signal stays ignored across exec: a driver started in the background by a
        # script (whose shell ignores SIGINT for it) would give the server a death signal it
        # ignores, and the server outlived a kill -9 of the driver (the backfill crash test,
        # run from such a script, Nov 2026). The server gets the default disposition back.
        signal.signal(sig, signal.SIG_DFL)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)

    return preexec


class MilvusLiteServer:
    """A ``milvus-lite server`` subprocess on loopback; a context manager.

    ``uri`` is ``http://127.0.0.1:PORT`` once :meth:`start` returns. The server holds the data
    directory's lock, so no process may open the same directory as a Lite file meanwhile.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        port: int | None = None,
        start_timeout_s: float = 60.0,
        log_path: str | Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.db_dir = self.data_dir / "milvus.db"
        self.port = port
        self.start_timeout_s = start_timeout_s
        self.log_path = Path(log_path) if log_path else self.data_dir / "milvus-lite-server.log"
        self.proc: subprocess.Popen | None = None
        self._launched_at = 0.0

    @property
    def uri(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> MilvusLiteServer:
        """Start the server and wait until it answers a client call."""
        return self.launch().wait_ready()

    def launch(self) -> MilvusLiteServer:
        """Start the server process without waiting for it (``uri`` is known from here on):
        the service starts Ray meanwhile and waits with :meth:`wait_ready` after. Alone, the
        server's start took 1.1-1.3 s on the loaded 2-core machine (Nov 2026); beside Ray's
        (4.1-4.8 s) it was ready when Ray was."""
        from memlane.stores.milvus.lite_files import remove_half_created_collections

        self.data_dir.mkdir(parents=True, exist_ok=True)
        remove_half_created_collections(self.db_dir)  # left by a server killed mid-create
        self.port = self.port or free_port()
        cmd = [
            *_milvus_lite_command(),
            "server",
            "--data-dir",
            str(self.db_dir),
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
        ]
        log = open(self.log_path, "ab")
        try:
            # start_new_session: a terminal Ctrl-C goes to the driver, which stops us in order.
            # preexec_fn: when the driver dies without stopping us (kill -9), the kernel sends
            # SIGINT, the clean close; an orphaned server kept the data directory's lock, and
            # the re-run of `memlane backfill` could not start (tests/pipelines/
            # test_backfill_crash.py).
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent() if _on_main_thread() else None,
            )
        finally:
            log.close()
        self._launched_at = time.monotonic()
        return self

    def wait_ready(self) -> MilvusLiteServer:
        """Wait until the launched server answers a client call (start_timeout_s from its
        launch); stops it and raises RuntimeError when it exits or does not answer."""
        assert self.proc is not None, "launch() first"
        deadline = self._launched_at + self.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-800:]
                raise RuntimeError(
                    f"milvus-lite server exited with code {self.proc.returncode}: {' '.join(tail.split())}"
                )
            if self._ready():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"milvus-lite server did not answer on {self.uri} within "
                    f"{self.start_timeout_s:.0f}s (log: {self.log_path})"
                )
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=0.5):
                pass
        except OSError:
            return False
        try:
            from pymilvus import MilvusClient

            # dedicated: a connection of its own, closed with the client. A shared one stayed
            # in pymilvus's pool; the driver's first store reused it after Ray's start had left
            # it idle for over 30 s, pymilvus then "recovered" it, and the recovery failed on
            # the server's GOAWAY "too_many_pings" (CONNECT_FAILED): the re-run after a kill in
            # tests/pipelines/test_backfill_crash.py, 1 of its first 2 trials.
            client = MilvusClient(uri=self.uri, timeout=5, dedicated=True)
            try:
                client.list_collections()
            finally:
                client.close()
            return True
        except Exception:  # noqa: BLE001 - not up yet
            return False

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGINT (clean close), then SIGTERM, then SIGKILL. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGINT, timeout_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> MilvusLiteServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def bind_ray_to_loopback() -> None:
    """Make the Ray started by this process use 127.0.0.1 as its node IP (see the module
    docstring). Ray reads the switch into ``ray_constants.ENABLE_RAY_CLUSTER`` when it is first
    imported and looks the constant up at call time, so when Ray was imported already (a test
    session, a notebook) the constant is set too."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False


def is_startup_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is one of Ray's fixed-window startup timeouts (see
    :func:`retry_startup`)."""
    text = str(exc)
    return "timed out during startup" in text or "Timed out waiting for file" in text


def descendants(root: int) -> set[int]:
    """PIDs of all descendants of ``root`` (Linux /proc; empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    frontier = [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in out:
                out.add(child)
                frontier.append(child)
    return out


def _kill(pids: set[int]) -> None:
    """SIGKILL ``pids``. Not reaped here: their Popen owners (Ray's) may still wait on them."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def retry_startup(
    start: Callable[[], T], cleanup: Callable[[], None], *, attempts: int = 3, pause_s: float = 5.0
) -> T:
    """``start()``; when it fails on a Ray startup timeout, ``cleanup()``, kill what the failed
    attempt spawned, pause and start again (``attempts`` in all).

    On this 2-core machine the raylet sometimes misses Ray's fixed 30 s registration window
    ("The current node timed out during startup"), never writing a log line: in ~1 of 6 test
    runs while other jobs kept both cores busy, once in CI, and twice in a row right after a
    benchmark or the test suite had stopped its own cluster; a later start succeeded each time.
    The cause is not found. The GCS port file can time out the same way ("Timed out waiting
    for file .../gcs_server_port_")."""
    for attempt in range(1, attempts + 1):
        before = descendants(os.getpid())
        try:
            return start()
        except Exception as exc:  # noqa: BLE001
            if attempt == attempts or not is_startup_timeout(exc):
                raise
            log.warning(
                "Ray start %d of %d timed out (%s); retrying",
                attempt,
                attempts,
                " ".join(str(exc).split())[:120],
            )
            cleanup()
            # A start that fails inside Ray's Node() leaves its GCS, dashboard and monitors
            # running, unknown to ray.shutdown: a retry then found 127.0.0.1:8265 taken and
            # came up without a dashboard. Processes that were there before (the Milvus Lite
            # server) are kept.
            _kill(descendants(os.getpid()) - before)
            time.sleep(pause_s)
    raise AssertionError("unreachable")


def start_local_ray(num_cpus: int | None = None, *, include_dashboard: bool | None = None, **kwargs):
    """``ray.init`` of a new single-node cluster with every listener on 127.0.0.1."""
    bind_ray_to_loopback()
    import ray

    # Ray's default dashboard port, unless something holds it (another local Ray, or one still
    # shutting down: two pipeline tests failed on "127.0.0.1:8265 already occupied").
    if include_dashboard is not False and "dashboard_port" not in kwargs:
        kwargs["dashboard_port"] = DASHBOARD_PORT if _port_free(DASHBOARD_PORT) else free_port()

    def start():
        # address="local": always a new cluster. Without it ray.init joins the cluster named
        # in /tmp/ray/ray_current_cluster (any `ray start` or cluster_utils.Cluster on the
        # machine), which then rejects num_cpus.
        return ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=include_dashboard,
            dashboard_host=LOOPBACK,
            _node_ip_address=LOOPBACK,
            logging_level="WARNING",
            **kwargs,
        )

    def cleanup():
        ray.shutdown()
        if "dashboard_port" in kwargs and not _port_free(kwargs["dashboard_port"]):
            kwargs["dashboard_port"] = free_port()

    ctx = retry_startup(start, cleanup)
    node_ip = ctx.address_info.get("node_ip_address")
    if node_ip != LOOPBACK:
        ray.shutdown()
        raise RuntimeError(
            f"Ray started on {node_ip}, not on {LOOPBACK}: the local default must "
            "not listen on other interfaces"
        )
    return ctx


def connect_local(address: str, **kwargs):
    """``ray.init`` as a second driver of a loopback cluster started by :func:`start_local_ray`
    (a running ``memlane serve``). Without the loopback switch Ray rewrites 127.0.0.1 to the
    machine's routable address and never reaches the GCS. A local cluster uses token auth
    (Ray 2.60's default); a driver joining it by address only sends the token from
    ~/.ray/auth_token when RAY_AUTH_MODE=token says so."""
    bind_ray_to_loopback()
    import ray
    from ray._raylet import Config

    if "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"
        # Ray caches its config on first use in a process (a test session, say): reload it.
        Config.initialize("")

    return ray.init(address=address, **kwargs)


@contextmanager
def local_cluster(
    data_dir: str | Path,
    *,
    num_cpus: int | None = None,
    include_dashboard: bool | None = None,
    runtime_env: dict | None = None,
) -> Iterator[str]:
    """Start the Milvus Lite server over ``data_dir`` and a loopback Ray; yield the Milvus
    URI; on exit (Ctrl-C included) shut Ray down first, then the server."""
    server = MilvusLiteServer(data_dir)
    server.start()
    try:
        import ray

        start_local_ray(num_cpus, include_dashboard=include_dashboard, runtime_env=runtime_env)
        try:
            yield server.uri
        finally:
            ray.shutdown()
    finally:
        server.stop()
