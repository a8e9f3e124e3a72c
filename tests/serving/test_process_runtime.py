"""The one-process runtime, ``memlane serve``'s default on one machine: the same app and engine
as Ray Serve's Ingress, in one uvicorn process beside the data directory's Milvus Lite server
(real engine, real Milvus Lite, real models). The REST checks of tests/serving/test_service.py
run on it too (its ``service`` is parametrized over the runtime); here: what differs (no Ray,
the processes, the CLI beside the running service, the stop), and the Hindsight-compatible
surface's client checks of tests/serving/test_hindsight.py (whose own module needs the local
LLM), run against this runtime."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from live import live_service, memlane

# the Hindsight client's checks, collected here with this module's fixtures
from tests.serving.test_hindsight import (  # noqa: F401
    KEY,
    test_an_async_retain_is_an_operation_to_poll,
    test_the_client_retains_recalls_and_reads_banks_and_documents,
)

KEYS = {KEY: "*", "k-one": ["user-123"], "k-cli": ["cli-bank"]}


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    """The live service's state: ``memlane serve`` with no runtime named."""
    with live_service(tmp_path_factory.mktemp("process-runtime"), keys=KEYS) as state:
        yield state


@pytest.fixture(scope="module")
def service(state):
    """``(base, state)``: the Hindsight surface's URL, as tests/serving/test_hindsight.py's."""
    pytest.importorskip("hindsight_client", reason='the hindsight extra: pip install -e ".[hindsight]"')
    return state["url"] + "/hindsight", state


@pytest.fixture
def client(service):
    from hindsight_client import Hindsight

    c = Hindsight(base_url=service[0], api_key=KEY, timeout=300)
    yield c
    c.close()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_the_default_runtime_is_one_process_beside_milvus_lite_without_ray(state):
    from listeners import listeners_of, process_tree

    assert state["runtime"] == "process" and "ray_address" not in state
    tree = process_tree(state["pid"])
    commands = {pid: _cmdline(pid) for pid in tree}
    # the service process and the Milvus Lite server (with whatever it runs itself)
    assert any("cluster.service" in c and "--runtime process" in c for c in commands.values()), commands
    milvus = [pid for pid, c in commands.items() if "milvus" in c and "server" in c]
    assert milvus, commands
    assert not [c for c in commands.values() if "ray::" in c or "raylet" in c or "gcs_server" in c]
    assert len(tree) <= 4, commands
    # Ray's native module is never loaded in the service process
    assert "_raylet" not in Path(f"/proc/{state['pid']}/maps").read_text()
    # it serves HTTP itself, on loopback
    port = int(state["url"].rsplit(":", 1)[1])
    served = {(addr, p) for pid, addr, p in listeners_of([state["pid"]])}
    assert ("127.0.0.1", port) in served
    with httpx.Client(base_url=state["url"], timeout=60) as http:
        assert http.get("/v1/health").json() == {"status": "ok", "store": "ok"}
        assert http.get("/v1/banks").status_code == 401  # auth on
        r = http.get("/v1/nowhere", headers={"Authorization": f"Bearer {KEY}"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        assert http.get("/ui/").status_code == 200  # the explorer's pages
        assert "/v1/banks/{bank_id}/recall" in http.get("/openapi.json").json()["paths"]


def test_the_cli_writes_through_the_services_store_and_the_service_recalls_it(state, tmp_path):
    """The CLI's commands that open the engine here (a file's retain) reach the store through
    the service's Milvus Lite server while it runs (cluster/route.py), and the service's
    recall sees what they wrote."""
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        "\n".join(
            json.dumps(t)
            for t in (
                {
                    "speaker": "Ivo",
                    "text": "My sailboat is called Petrel.",
                    "session_id": "s1",
                    "timestamp": "2024-06-01T10:00:00Z",
                },
                {
                    "speaker": "Ivo",
                    "text": "I moor it at the marina in Split.",
                    "session_id": "s1",
                    "timestamp": "2024-06-01T10:01:00Z",
                },
            )
        )
    )
    env = {**os.environ, "MEMLANE_SERVE__AUTH": "on", "MEMLANE_SERVE__API_KEYS": json.dumps(KEYS)}
    data = state["data_dir"]
    r = memlane(
        "retain", str(turns), "--bank", "cli-bank", "--data-dir", data, "--json", env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert "Milvus Lite server of memlane serve" in r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["units"] == 2
    with httpx.Client(base_url=state["url"], headers={"Authorization": "Bearer k-cli"}, timeout=60) as http:
        hits = http.post("/v1/banks/cli-bank/recall", json={"query": "What is the sailboat called?"})
        assert hits.status_code == 200, hits.text
        assert hits.json()["memories"][0]["unit"]["text"].endswith("Petrel.")
        assert http.get("/v1/banks/other/stats").status_code == 403
    s = memlane("status", "--data-dir", data, "--json", env=env, timeout=120)
    assert s.returncode == 0, s.stderr
    status = json.loads(s.stdout)
    assert status["service"] == {**status["service"], "runtime": "process", "healthy": True}
    assert status["ray"]["running"] is False
    assert {b["bank_id"]: b["memories"] for b in status["banks"]["banks"]}["cli-bank"] == 2


def test_mcp_over_http_lists_the_tools_and_retains_then_recalls(state):
    from tests.serving.test_mcp import TOOLS, _session

    async def body(client):
        tools = {t.name for t in (await client.list_tools()).tools}
        await client.call_tool("create_bank", {"bank": "mcp-bank"})
        retained = await client.call_tool("retain", {"bank": "mcp-bank", "content": "My kite is orange."})
        recalled = await client.call_tool("recall", {"bank": "mcp-bank", "query": "What colour is the kite?"})
        return tools, retained, recalled

    tools, retained, recalled = _session(state, KEY, body)
    assert tools == TOOLS
    assert not retained.is_error and retained.structured_content["units"] == 1
    assert recalled.structured_content["memories"][0]["text"].endswith("My kite is orange.")


def test_a_stop_ends_the_process_and_its_milvus_server_and_a_restart_finds_the_data(tmp_path):
    from cluster.local import free_port

    data = tmp_path / "data"
    env = {**os.environ, "MEMLANE_SERVE__AUTH": "off"}
    bad = memlane(
        "serve", "--runtime", "process", "--config", "serve/config.yaml", "--data-dir", str(data), env=env
    )
    assert bad.returncode == 2 and "--runtime ray" in bad.stderr and bad.stderr.strip().count("\n") == 0
    assert not (data / "serve.json").exists()
    args = ["serve", "--port", str(free_port()), "--data-dir", str(data), "--json"]
    started = memlane(*args, env=env, timeout=300)
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout.strip().splitlines()[-1])
    try:
        again = memlane(*args, env=env, timeout=120)  # one service per data directory
        assert again.returncode == 2 and "already running" in again.stderr
        with httpx.Client(base_url=state["url"], timeout=120) as http:
            http.put("/v1/banks/keep", json={})
            r = http.post(
                "/v1/banks/keep/memories", json={"items": [{"content": "The spare key is under the fern."}]}
            )
            assert r.status_code == 200 and r.json()["units"] == 1
        from listeners import process_tree

        tree = process_tree(state["pid"])
    finally:
        stopped = memlane("serve", "--stop", "--data-dir", str(data), timeout=120)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    for pid in tree:  # the service process, the Milvus Lite server and its children
        assert not Path(f"/proc/{pid}").exists() or "zombie" in _status(pid), _cmdline(pid)
    assert not (data / "serve.json").exists()
    assert "Application shutdown complete" in (data / "serve.log").read_text()
    restarted = memlane(*args, env=env, timeout=300)
    assert restarted.returncode == 0, restarted.stderr
    url = json.loads(restarted.stdout.strip().splitlines()[-1])["url"]
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            hits = http.post("/v1/banks/keep/recall", json={"query": "Where is the spare key?"}).json()
            assert hits["memories"][0]["unit"]["text"].endswith("under the fern.")
    finally:
        assert memlane("serve", "--stop", "--data-dir", str(data), timeout=120).returncode == 0


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"
