"""The supervisor of the local Milvus server (cluster/milvus_server.py starts it detached as
``python -m cluster.milvus_supervisor DATA_DIR PORT``): it binds the host's 127.0.0.1:PORT,
moves into a network namespace of its own, starts Milvus there and relays each connection to
it, so nothing of Milvus is reachable from outside; Milvus dies with it (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from cluster.milvus_server import BASE_DIR, LOG_FILE, START_TIMEOUT_S, STOP_GRACE_S, write_state

INNER_PORT = 19530  # Milvus's own gRPC port inside its namespace (nothing else is there)
CLONE_NEWNET = 0x40000000
# Milvus's defaults are set for a cluster; one standalone server on one machine can check more
# often. Measured here with pymilvus on an empty 8-d collection: load 2.7-3.1 s and a Strong
# query 0.24-0.26 s with the defaults; with these, load 2.9-3.1 s (other loops set its pace)
# and a Strong query 0.04-0.05 s.
TUNING = {
    "queryCoord.checkInterval": 100,  # ms between the query coordinator's checks (1000)
    "queryCoord.distPullInterval": 100,  # ms between pulls of the segments' placement (500)
    "proxy.timeTickInterval": 20,  # ms: a Strong read waits for the next tick (200)
    # Its graceful stop waits up to this (1800 s by default; a first SIGTERM then hung > 60 s
    # here with nothing left to flush), then quits by itself.
    "common.gracefulStopTimeout": 10,
}


def _loopback_up() -> None:
    """Bring up ``lo`` in this (new) network namespace: SIOCGIFFLAGS, then SIOCSIFFLAGS with
    IFF_UP | IFF_RUNNING (no ``ip`` binary needed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifr))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 0x1 | 0x40, b""))


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _relay(client: socket.socket) -> None:
    try:
        upstream = socket.create_connection(("127.0.0.1", INNER_PORT), timeout=10)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
    _pump(client, upstream)
    client.close()
    upstream.close()


def _supervise(data_dir: Path, port: int) -> int:
    """Bind the host's 127.0.0.1:``port``, move to a new network namespace, run Milvus there,
    relay connections to it; SIGTERM stops Milvus (gracefully, at most 60 s) and exits."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", port))
    except OSError as exc:
        print(f"port {port} on 127.0.0.1 is in use: {exc}", flush=True)
        return 1
    listener.listen(128)
    write_state(data_dir, pid=os.getpid(), port=port, ready=False)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        print(
            f"cannot make a network namespace for Milvus ({os.strerror(err)}): the local Milvus "
            "server keeps Milvus off the network this way and needs root (CAP_SYS_ADMIN)",
            flush=True,
        )
        return 1
    _loopback_up()
    base = data_dir / BASE_DIR
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    print(f"starting Milvus 2.3 in its own network namespace, data {base}", flush=True)
    t0 = time.monotonic()
    try:
        proc, health = _launch(base)
        while not _healthy(health):
            if proc.poll() is not None or stopping.is_set() or time.monotonic() - t0 > START_TIMEOUT_S:
                why = f"exited with code {proc.returncode}" if proc.poll() is not None else "did not answer"
                raise RuntimeError(f"Milvus {why}")
            time.sleep(0.2)
    except Exception as exc:  # noqa: BLE001 - reported as the supervisor's last line
        print(f"Milvus did not start: {exc} (logs {base / 'logs'})", flush=True)
        if "proc" in locals():
            _stop_milvus(proc)
        return 1
    print(
        f"Milvus (pid {proc.pid}) answers after {time.monotonic() - t0:.1f}s; relay 127.0.0.1:{port}",
        flush=True,
    )
    write_state(
        data_dir,
        pid=os.getpid(),
        port=port,
        milvus_pid=proc.pid,
        base_dir=str(base),
        log=str(data_dir / LOG_FILE),
        ready=True,
    )
    listener.settimeout(0.5)
    while not stopping.is_set():
        if proc.poll() is not None:
            print(f"Milvus exited with code {proc.returncode}", flush=True)
            break
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        threading.Thread(target=_relay, args=(conn,), daemon=True).start()
    listener.close()
    print(f"stopping Milvus: {_stop_milvus(proc)}", flush=True)
    return 0


def _launch(base: Path) -> tuple[subprocess.Popen, str]:
    """Start the package's Milvus binary on ``base`` (config written from the package's
    template with :data:`TUNING`); it dies with this process (PR_SET_PDEATHSIG), so a killed
    supervisor leaves no Milvus behind. Returns the process and its health URL."""
    import milvus  # the milvus-server extra

    config = milvus.MilvusServerConfig()
    config.configs.update(data_dir=str(base))
    config.resolve_storage()
    config.set("proxy_port", INNER_PORT)
    for key, value in TUNING.items():
        config.set(key, value)
    config.resolve()  # picks free ports for its components (in this namespace) and writes it
    milvus._initialize_data_files(str(base))  # unpacks the binary once (md5-checked)
    with socket.socket() as s:  # the health/metrics port: any free one here
        s.bind(("127.0.0.1", 0))
        health_port = s.getsockname()[1]
    exe = base / "bin" / "milvus"
    env = {
        **os.environ,
        "DEPLOY_MODE": "STANDALONE",
        "METRICS_PORT": str(health_port),
        "MILVUS_RUN_DIR": str(base / "run"),
        "LD_LIBRARY_PATH": f"{exe.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}",
    }
    logs = base / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)

    def die_with_parent() -> None:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    with open(logs / "milvus-stdout.log", "ab") as out, open(logs / "milvus-stderr.log", "ab") as err:
        proc = subprocess.Popen(
            [str(exe), "run", "standalone"],
            cwd=str(base),
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
    return proc, f"http://127.0.0.1:{health_port}/healthz"


def _healthy(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return b"OK" in resp.read()
    except (urllib.error.URLError, OSError):
        return False


def _stop_milvus(proc: subprocess.Popen) -> str:
    """SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`; says how it went."""
    if proc.poll() is not None:
        return f"already exited ({proc.returncode})"
    t0 = time.monotonic()
    proc.terminate()
    try:
        proc.wait(timeout=STOP_GRACE_S)
        return f"exited after {time.monotonic() - t0:.1f}s"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        return f"killed after {STOP_GRACE_S:.0f}s"


if __name__ == "__main__":
    sys.exit(_supervise(Path(sys.argv[1]), int(sys.argv[2])))
