"""`memlane mcp` over stdio, driven by the MCP SDK's own client: the command runs as a
subprocess on a temporary data directory (real engine, Milvus Lite, MiniLM, spaCy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"retain", "recall", "reflect", "list_banks", "create_bank", "delete_document", "get_tree"}
LIMIT_S = 300  # one server start plus the first model loads, on 2 busy cores


def _params(data_dir: Path, *args: str):
    from mcp.client.stdio import StdioServerParameters

    exe = Path(sys.executable).with_name("memlane")
    # The SDK passes a minimal environment to the server; no LLM setting reaches it.
    return StdioServerParameters(
        command=str(exe),
        args=["mcp", "--data-dir", str(data_dir), *args],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )


def _session(data_dir: Path, *args: str, body):
    """Run ``body(client)`` against a fresh `memlane mcp` within LIMIT_S seconds."""
    return _run(_params(data_dir, *args), body)


def _run(params, body):
    from mcp import Client

    async def main():
        with anyio.fail_after(LIMIT_S):
            async with Client(params, read_timeout_seconds=LIMIT_S) as client:
                return await body(client)

    return anyio.run(main)


def _text(result) -> str:
    assert result.content, result
    return result.content[0].text


def test_tools_are_listed_with_their_schemas(tmp_path):
    async def body(client):
        return (await client.list_tools()).tools

    tools = {t.name: t for t in _session(tmp_path / "data", "--bank", "ana", body=body)}
    assert set(tools) == TOOLS
    assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
    for name, required in (
        ("retain", {"content"}),
        ("recall", {"query"}),
        ("reflect", {"query"}),
        ("create_bank", {"bank"}),
        ("delete_document", {"document_id"}),
        ("list_banks", set()),
        ("get_tree", set()),
    ):
        schema = tools[name].input_schema
        assert set(schema.get("required", [])) == required, (name, schema)
        assert tools[name].description
    recall = tools["recall"].input_schema["properties"]
    assert recall["max_tokens"]["exclusiveMinimum"] == 0 and recall["max_tokens"]["maximum"] == 1_000_000
    assert recall["budget"]["enum"] == ["low", "mid", "high"]
    assert tools["retain"].input_schema["properties"]["content"]["maxLength"] == 60_000
    assert "description" in tools["retain"].input_schema["properties"]["bank"]
    tree = tools["get_tree"].input_schema["properties"]
    assert set(tree) == {"bank", "level", "from", "to"}
    assert "description" in tree["from"] and "description" in tree["to"]


def test_get_tree_reads_the_tree_the_engine_consolidated(tmp_path, embedder, extractor):
    from tree_samples import TREE_ITEMS, TREE_SHAPE

    from memlane.engine import Memory
    from memlane.settings import Settings

    data = tmp_path / "data"
    with Memory(Settings(data_dir=data), embedder=embedder, extractor=extractor) as memory:
        memory.create_bank("ana", name="Ana")
        memory.retain_items("ana", TREE_ITEMS, document_id="chat")
        memory.wait_background()
        memory.consolidate("ana")
        expected = [(n.level.name, n.start, n.end) for n in memory.tree.nodes("ana")]
    assert len(expected) == sum(TREE_SHAPE.values())

    async def body(client):
        return {
            "all": await client.call_tool("get_tree", {}),
            "sessions": await client.call_tool(
                "get_tree", {"level": "session", "from": "2024-05-08T00:00:00Z", "to": "2024-05-09T00:00:00Z"}
            ),
            "backwards": await client.call_tool(
                "get_tree", {"from": "2024-05-09T00:00:00Z", "to": "2024-05-08"}
            ),
            "unknown": await client.call_tool("get_tree", {"bank": "nobody"}),
            "out_of_range": await client.call_tool("get_tree", {"from": "0001-01-01T00:00:00+01:00"}),
            "recall": await client.call_tool("recall", {"query": "What did Ana do in May 2024?"}),
        }

    out = _session(data, "--bank", "ana", body=body)
    assert not out["all"].is_error, _text(out["all"])
    got = out["all"].structured_content
    assert got["bank_id"] == "ana"
    assert [(n["level"], n["start"], n["end"]) for n in got["nodes"]] == [
        (lv, s.isoformat().replace("+00:00", "Z"), e.isoformat().replace("+00:00", "Z"))
        for lv, s, e in expected
    ]
    (s2,) = out["sessions"].structured_content["nodes"]
    assert (s2["start"], s2["end"], s2["children"]) == ("2024-05-08T18:00:00Z", "2024-05-08T18:10:00Z", 2)
    assert out["backwards"].is_error and "invalid_argument: to: must be after from" in _text(out["backwards"])
    assert out["unknown"].is_error and "bank_not_found: unknown bank 'nobody'" in _text(out["unknown"])
    # recall carries the tree's nodes it chose beside the memories (nodes of this tree only)
    recalled = out["recall"].structured_content
    assert recalled["memories"] or recalled["nodes"]
    tree_ids = {n["id"] for n in got["nodes"]}
    assert all(n["id"] in tree_ids and n["level"] in TREE_SHAPE for n in recalled["nodes"])
    assert out["out_of_range"].is_error and "invalid_argument: from, to: out of the range" in _text(
        out["out_of_range"]
    )


def test_retain_then_recall_then_delete_on_the_default_bank(tmp_path):
    async def body(client):
        out = {}
        out["create"] = await client.call_tool("create_bank", {"bank": "ana", "name": "Ana"})
        out["retain"] = await client.call_tool(
            "retain",
            {
                "content": "I adopted a beagle called Pixel last week.",
                "speaker": "Ana",
                "timestamp": "2025-03-10T09:00:00Z",
                "document_id": "chat-1",
            },
        )
        out["recall"] = await client.call_tool("recall", {"query": "What is the beagle called?"})
        # bank_id is no parameter: refused by name, not answered from the default bank
        misnamed = await client.call_tool("recall", {"query": "What is the beagle called?", "bank_id": "bob"})
        out["banks"] = await client.call_tool("list_banks", {})
        out["delete"] = await client.call_tool("delete_document", {"document_id": "chat-1"})
        out["after"] = await client.call_tool(
            "recall", {"query": "What is the beagle called?", "bank": "ana"}
        )
        return out, misnamed

    out, misnamed = _session(tmp_path / "data", "--bank", "ana", body=body)
    assert misnamed.is_error and _text(misnamed).startswith(
        "invalid_argument: bank_id: not a parameter of recall"
    )
    for step, result in out.items():
        assert not result.is_error, (step, _text(result))
    assert out["create"].structured_content == {"bank_id": "ana", "name": "Ana", "created": True}
    assert out["retain"].structured_content["units"] == 1
    memories = out["recall"].structured_content["memories"]
    assert memories and memories[0]["text"] == "Ana: I adopted a beagle called Pixel last week."
    assert memories[0]["type"] == "experience"  # spoken by the bank's owner
    assert "Pixel" in _text(out["recall"])  # the text the model reads carries the memory
    assert out["banks"].structured_content["banks"] == [{"bank_id": "ana", "name": "Ana"}]
    assert out["delete"].structured_content["deleted"]["units"] == 1
    assert out["after"].structured_content["memories"] == []


def test_bad_arguments_unknown_bank_and_reflect_without_llm_are_tool_errors(tmp_path):
    async def body(client):
        await client.call_tool("create_bank", {"bank": "ana"})
        calls = {
            "zero_tokens": ("recall", {"query": "dog", "bank": "ana", "max_tokens": 0}),
            "blank_query": ("recall", {"query": "   ", "bank": "ana"}),
            "bad_bank_id": ("recall", {"query": "dog", "bank": "no spaces"}),
            "missing_content": ("retain", {"bank": "ana"}),
            "unknown_bank": ("recall", {"query": "dog", "bank": "nobody"}),
            "retain_unknown_bank": ("retain", {"content": "hi", "bank": "nobody"}),
            "no_bank": ("recall", {"query": "dog"}),
            "reflect": ("reflect", {"query": "Should I get a second dog?", "bank": "ana"}),
            "unknown_document": ("delete_document", {"document_id": "nope", "bank": "ana"}),
            # a misnamed argument is refused by name, never dropped (it answered from the default bank)
            "misnamed_bank": ("recall", {"query": "dog", "bank_id": "ana"}),
            "extra_retain": ("retain", {"content": "hi", "bank": "ana", "user": "ana"}),
        }
        return {k: await client.call_tool(name, args) for k, (name, args) in calls.items()}

    out = _session(tmp_path / "data", body=body)  # no --bank: no default bank
    for key, result in out.items():
        assert result.is_error, (key, result)
    assert "max_tokens" in _text(out["zero_tokens"]) and "greater than 0" in _text(out["zero_tokens"])
    assert "query" in _text(out["blank_query"])
    assert "bank" in _text(out["bad_bank_id"]) and "pattern" in _text(out["bad_bank_id"])
    assert "content" in _text(out["missing_content"]) and "required" in _text(out["missing_content"]).lower()
    assert "bank_not_found: unknown bank 'nobody'" in _text(out["unknown_bank"])
    assert "bank_not_found" in _text(out["retain_unknown_bank"]) and "create_bank" in _text(
        out["retain_unknown_bank"]
    )
    assert "no bank given" in _text(out["no_bank"])
    assert "llm_not_configured" in _text(out["reflect"]) and "MEMLANE_LLM__BASE_URL" in _text(out["reflect"])
    assert "not_found: document 'nope'" in _text(out["unknown_document"])
    assert _text(out["misnamed_bank"]).startswith(
        "invalid_argument: bank_id: not a parameter of recall (it takes "
    )
    assert "bank, budget," in _text(out["misnamed_bank"])
    assert _text(out["extra_retain"]).startswith("invalid_argument: user: not a parameter of retain")


def test_stdout_carries_only_the_protocol(tmp_path):
    """A raw client: every line the server writes on stdout is a JSON-RPC message, through a
    retain that starts Milvus Lite and loads the models (whose chatter goes to stderr)."""
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    calls = [
        ("initialize", initialize),
        ("tools/call", {"name": "create_bank", "arguments": {}}),
        ("tools/call", {"name": "create_bank", "arguments": {"bank": "ana"}}),
        ("tools/call", {"name": "retain", "arguments": {"content": "My dog is called Biscuit"}}),
        ("tools/call", {"name": "list_banks", "arguments": {}}),
    ]
    params = _params(tmp_path / "data", "--bank", "ana")
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    timer = threading.Timer(LIMIT_S, proc.kill)  # bounded even if the server hangs
    timer.start()
    replies = []
    try:
        for i, (method, params_) in enumerate(calls, start=1):  # one at a time: calls may run concurrently
            proc.stdin.write(
                json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params_}) + "\n"
            )
            if i == 1:
                proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
            proc.stdin.flush()
            while True:
                line = proc.stdout.readline()
                assert line, "the server closed stdout before answering"
                message = json.loads(line)  # anything but JSON fails here
                assert message["jsonrpc"] == "2.0"
                if message.get("id") == i:
                    replies.append(message)
                    break
        proc.stdin.close()  # EOF: the server stops
        assert proc.wait(timeout=120) == 0
        rest = proc.stdout.read()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in rest.splitlines() if line.strip())
    assert replies[1]["result"]["isError"] is True  # no bank: a schema error, as a tool error
    assert replies[2]["result"]["isError"] is False
    assert replies[3]["result"]["structuredContent"]["units"] == 1
    assert replies[4]["result"]["structuredContent"] == {
        "banks": [{"bank_id": "ana", "name": "ana"}],
        "default_bank": "ana",
    }


@pytest.mark.parametrize(
    "args, message",
    [(["--bank", "has space"], "--bank"), (["--url", "http://x", "--log-level", "LOUD"], "--log-level")],
)
def test_bad_options_exit_2(tmp_path, args, message):
    exe = Path(sys.executable).with_name("memlane")
    r = subprocess.run(
        [str(exe), "mcp", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2 and message in r.stderr and r.stdout == ""


def test_an_unusable_data_directory_stops_the_server_at_start(tmp_path):
    """The store opens before the first call: a data directory that is a file exits 2 with one
    error line naming it, and nothing but protocol on stdout."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    exe = Path(sys.executable).with_name("memlane")
    r = subprocess.run(
        [str(exe), "mcp", "--data-dir", str(not_a_dir)],
        input=json.dumps(hello) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the MCP server stopped:") and str(not_a_dir) in last
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in r.stdout.splitlines() if line.strip())


def test_url_without_a_service_is_a_tool_error_naming_it():
    from mcp.client.stdio import StdioServerParameters

    from cluster.local import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("memlane")),
        args=["mcp", "--url", url, "--api-key", "k"],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )

    async def body(client):
        return await client.call_tool("recall", {"query": "dog", "bank": "ana"})

    result = _run(params, body)
    assert result.is_error and f"service_unreachable: cannot reach {url}" in _text(result)
