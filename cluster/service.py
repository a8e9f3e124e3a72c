"""The local service: a supervisor process started in the background, a client side that waits
until it is healthy, and its stop. Two runtimes:

* ``process`` (the default of ``memlane serve`` on one machine): the supervisor serves the app
  itself, one uvicorn process over one engine, beside the Milvus Lite server
  (cluster/service_process.py, serve/process.py);
* ``ray`` (``--runtime ray``, a ``--config``, ``--address``): the supervisor owns a loopback
  Ray (or joins the cluster at ``--address``), the Milvus Lite server and the Serve application
  of serve/config.yaml (:func:`supervise`).

``memlane serve`` runs :func:`start_background`: it launches ``python -m cluster.service`` in
its own session (logs in ``DATA_DIR/serve.log``), polls ``GET /v1/health`` and returns when it
answers 200. The supervisor writes ``DATA_DIR/serve.json`` (its pid, the runtime, the HTTP URL,
the Milvus URI, the metrics export port; under Ray also the Ray address and dashboard URL) and on
SIGTERM or SIGINT shuts down what it started (Serve, then Ray; the Milvus Lite server last,
which closes its data cleanly on SIGINT). ``memlane serve --stop`` sends that SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from serve.routing import CALLBACK as ROUTING_CALLBACK

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "serve" / "config.yaml"
STATE_FILE = "serve.json"
LOG_FILE = "serve.log"


class ServiceError(RuntimeError):
    """The service did not start or stop; the message says why."""


def load_config(path: Path, port: int, env_vars: dict[str, str]):
    """The Serve deploy config from ``path`` with the HTTP port and Memlane's environment set,
    validated by Ray's own schema (what ``serve deploy`` checks)."""
    import yaml
    from ray.serve.schema import ServeDeploySchema

    raw = yaml.safe_load(Path(path).read_text())
    raw.setdefault("http_options", {})
    raw["http_options"]["host"] = "127.0.0.1"
    raw["http_options"]["port"] = port
    for app in raw.get("applications", []):
        runtime_env = app.setdefault("runtime_env", {}) or {}
        app["runtime_env"] = runtime_env
        runtime_env["env_vars"] = {**(runtime_env.get("env_vars") or {}), **env_vars}
    return ServeDeploySchema.model_validate(raw)


SECRETS_FILE = "secrets.env"
LOOPBACK_HOOK = "serve.loopback.bind_replicas_to_loopback"


def _memlane_env(data_dir: Path, milvus_uri: str) -> dict[str, str]:
    """The MEMLANE_* variables every replica gets through the runtime_env, without secrets:
    API keys, LLM keys and the Milvus token go to ``DATA_DIR/secrets.env`` (mode 0600, removed
    at stop), after the lines of the user's own MEMLANE_SECRETS_FILE, and only that file's path
    travels (see memlane.settings.is_secret)."""
    from memlane.settings import SECRETS_FILE_VAR, split_secrets

    env, secrets = split_secrets(os.environ)
    env.update(MEMLANE_STORE__MILVUS_URI=milvus_uri, MEMLANE_DATA_DIR=str(data_dir))
    if secrets:
        lines = []
        if env.get(SECRETS_FILE_VAR):
            lines.append(Path(env[SECRETS_FILE_VAR]).read_text())  # later lines win: ours
        lines += [f"{name}={json.dumps(value, ensure_ascii=False)}\n" for name, value in secrets.items()]
        path = data_dir / SECRETS_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(lines))
        env[SECRETS_FILE_VAR] = str(path)
    return env


def _gist(message: str) -> str:
    """A Serve failure message on one line: its first sentence and its end, where the
    replica's own exception is (the traceback between them runs to thousands of characters)."""
    text = " ".join(message.split())
    return text if len(text) <= 700 else f"{text[:200]} ... {text[-500:]}"


def _wait_deployed(stop: threading.Event, app: str) -> str | None:
    """Wait until the application runs (None), Serve gives up deploying it (its message: a
    replica whose constructor keeps failing, e.g. a model path that does not exist), or stop."""
    from ray import serve

    while not stop.wait(2.0):
        try:
            status = serve.status().applications.get(app)
        except Exception:  # noqa: BLE001 - the controller is still starting
            continue
        if status is None:
            continue
        if status.status == "RUNNING":
            return None
        if status.status == "DEPLOY_FAILED":
            # the deployments' messages hold the replica's exception; the app's only names them
            why = [
                f"{name}: {_gist(dep.message)}"
                for name, dep in status.deployments.items()
                if str(dep.status) != "HEALTHY" and dep.message
            ]
            return " | ".join(why) or _gist(str(status.message)) or "DEPLOY_FAILED"
    return None


RUNTIMES = ("process", "ray")


def runtime_of(runtime: str | None, *, config: Path | None = None, address: str | None = None) -> str:
    """The runtime a start uses: the one named, else ``ray`` when a Serve config or a Ray
    address is given (they mean Ray Serve), else ``process``."""
    if runtime is not None:
        return runtime
    return "ray" if config is not None or address else "process"


def supervise(
    data_dir: Path, port: int, config_path: Path, num_cpus: float | None, address: str | None = None
) -> int:
    """Run the Ray runtime until SIGTERM or SIGINT (the body of ``python -m cluster.service
    --runtime ray``); the exit code: 1 when the application failed to deploy. ``address``: a
    running Ray cluster to deploy on instead of a new loopback one."""
    from cluster.local import MilvusLiteServer, connect_local, start_local_ray

    data_dir = data_dir.resolve()
    stop = threading.Event()
    began = time.monotonic()

    def phase(what: str) -> None:
        # where a start's time goes, in the service's log (serve.log)
        print(f"memlane service supervisor: {what} at {time.monotonic() - began:.1f}s", flush=True)

    def on_signal(*_):
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    from memlane.settings import Settings

    # A Milvus server the operator runs (MEMLANE_STORE__MILVUS_URI: `memlane store server`, or
    # a cluster's) is used as it is; without one, the service runs Milvus Lite in data_dir.
    settings = Settings(data_dir=data_dir)
    uri = settings.store.milvus_uri
    server = None
    if not uri:
        # launched now, waited for after Ray's start: the two start side by side (the server
        # alone took 1.1-1.3 s, and was ready when Ray was: cluster/local.py)
        server = MilvusLiteServer(data_dir).launch()
        uri = server.uri
    exit_code = 0
    try:
        env = _memlane_env(data_dir, uri)
        # Serve's HTTP proxy tags each bank's requests with the bank id (serve/routing.py);
        # the proxy reads this when it starts, from its environment.
        env.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", ROUTING_CALLBACK)
        os.environ.update(env)
        config = load_config(config_path, port, env)
        import ray
        from ray.serve._private import api as serve_api

        # serve/loopback.py: Serve binds each replica's gRPC server to all interfaces
        runtime_env = {"env_vars": env, "worker_process_setup_hook": LOOPBACK_HOOK}
        if address:
            ctx = connect_local(address, runtime_env=runtime_env)
        else:
            # Fractional CPU requests (serve/config.yaml) fit six deployments and their
            # autoscaled replicas in 4 logical CPUs; on 2 cores most replicas wait on others.
            ctx = start_local_ray(
                num_cpus or max(4, os.cpu_count() or 1),
                include_dashboard=settings.serve.ray_dashboard,
                runtime_env=runtime_env,
                # Ray starts one idle worker per logical CPU ahead of any task, ~44 MB PSS
                # each; the service runs only actors (Serve's), which start their own workers.
                _system_config={"enable_worker_prestart": False, "prestart_worker_first_driver": False},
            )
        # ray.init installs Ray's own SIGTERM handler, which dies without cleanup: take the
        # signals back so a stop shuts Serve, Ray and Milvus down in order.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        phase("ray up")
        try:
            if server is not None:  # inside the try: a server that fails to start stops Ray too
                server.wait_ready()
                phase("milvus lite up")
            # What `serve run CONFIG` and `serve deploy CONFIG` do with a config file.
            client = serve_api.serve_start(
                http_options=config.http_options.model_dump(), proxy_location=config.proxy_location
            )
            phase("serve controller and proxy up")
            client.deploy_apps(config, _blocking=False)
            state = {
                "pid": os.getpid(),
                "runtime": "ray",
                "url": f"http://127.0.0.1:{port}",
                "ray_address": ctx.address_info.get("gcs_address"),
                "dashboard_url": f"http://{ctx.dashboard_url}" if ctx.dashboard_url else None,
                # This node's Prometheus endpoint (Ray's metrics agent): Ray's, Serve's and
                # Memlane's metrics, for infra/prometheus/ and the dashboards' test.
                "metrics_export_port": ctx.address_info.get("metrics_export_port"),
                "milvus_uri": uri,
                "ray_session_dir": ctx.address_info.get("session_dir"),
                "data_dir": str(data_dir),
                "config": str(config_path),
                # the CLI's commands go through the API: with a key only when auth is on
                "auth": settings.serve.auth,
            }
            (data_dir / STATE_FILE).write_text(json.dumps(state, indent=1))
            print(f"memlane service supervisor: {json.dumps(state)}", flush=True)
            failure = _wait_deployed(stop, config.applications[0].name)
            if failure is None and not stop.is_set():
                phase("application running")
            if failure is not None:
                # memlane serve then reports this (the log's tail) instead of waiting out its
                # health timeout while Serve retries nothing more.
                print(f"memlane service supervisor: deploy failed: {failure}", flush=True)
                exit_code = 1
            else:
                stop.wait()
            print("memlane service supervisor: stopping", flush=True)
            from ray import serve

            serve.shutdown()
        finally:
            ray.shutdown()
    finally:
        if server is not None:
            server.stop()
        (data_dir / STATE_FILE).unlink(missing_ok=True)
        (data_dir / SECRETS_FILE).unlink(missing_ok=True)
    return exit_code


def read_state(data_dir: Path) -> dict[str, Any] | None:
    path = Path(data_dir) / STATE_FILE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text())
        os.kill(int(state["pid"]), 0)
    except (ValueError, KeyError, OSError):
        return None  # a stale file from a killed supervisor
    return state


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/v1/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def start_background(
    data_dir: Path,
    port: int,
    config_path: Path | None = None,
    *,
    timeout_s: float = 600.0,
    num_cpus: float | None = None,
    progress=None,
    runtime: str | None = None,
    address: str | None = None,
) -> dict[str, Any]:
    """Start the supervisor detached and return its state once ``/v1/health`` answers 200.
    ``runtime``: "process" or "ray" (default: :func:`runtime_of`: Ray with a config or an
    address); ``address``: a Ray cluster for the Ray runtime to deploy on."""
    from cluster.local import _port_free

    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if read_state(data_dir):
        raise ServiceError(f"a service is already running for {data_dir} (stop it with memlane serve --stop)")
    if not _port_free(port):
        raise ServiceError(f"port {port} on 127.0.0.1 is in use (choose another with --port)")
    runtime = runtime_of(runtime, config=config_path, address=address)
    if runtime not in RUNTIMES:
        raise ServiceError(f"unknown runtime {runtime!r} (choose one of {', '.join(RUNTIMES)})")
    if runtime == "process" and (config_path is not None or address):
        raise ServiceError("--config and --address are Ray Serve's: use them with --runtime ray")
    log_path = data_dir / LOG_FILE
    cmd = [sys.executable, "-m", "cluster.service", "--runtime", runtime]
    cmd += ["--data-dir", str(data_dir), "--port", str(port)]
    if runtime == "ray":
        config_path = Path(config_path or DEFAULT_CONFIG)
        if not config_path.is_file():
            raise ServiceError(f"serve config not found: {config_path}")
        cmd += ["--config", str(config_path.resolve())]
        if num_cpus:
            cmd += ["--num-cpus", str(num_cpus)]
        if address:
            cmd += ["--address", address]
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
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            text = log_path.read_text(errors="replace")
            marker = "memlane service supervisor: deploy failed: "
            if marker in text:  # the application's own failure, not the shutdown after it
                why = text.rsplit(marker, 1)[1].splitlines()[0]
                raise ServiceError(f"the application failed to deploy: {why[:800]} (log {log_path})")
            raise ServiceError(
                f"the service exited with code {proc.returncode}; log "
                f"{log_path}: ...{' '.join(text[-1500:].split())[-600:]}"
            )
        state = read_state(data_dir)
        if state and _healthy(url):
            return state
        if time.monotonic() > deadline:
            stop(data_dir)
            raise ServiceError(
                f"the service was not healthy on {url} within {timeout_s:.0f}s (log: {log_path})"
            )
        if progress:
            progress()
        time.sleep(1.0)


def stop(data_dir: Path, timeout_s: float = 90.0) -> bool:
    """Stop the supervisor of ``data_dir``; False when none was running."""
    state = read_state(Path(data_dir).resolve())
    if state is None:
        return False
    pid = int(state["pid"])
    for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.3)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Memlane service supervisor (used by memlane serve)")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--num-cpus", type=float, default=None)
    parser.add_argument("--runtime", choices=RUNTIMES, default="ray")
    parser.add_argument("--address", default=None)
    args = parser.parse_args(argv)
    if args.runtime == "process":
        from cluster.service_process import supervise_process

        sys.exit(supervise_process(args.data_dir, args.port))
    sys.exit(supervise(args.data_dir, args.port, args.config, args.num_cpus, args.address))


if __name__ == "__main__":
    main()
