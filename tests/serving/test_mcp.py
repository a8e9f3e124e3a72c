"""The MCP endpoint of the service: `memlane serve` on loopback (real Ray Serve or the
one-process runtime, Milvus Lite server, the embedder, spaCy), driven with the MCP SDK's own
Streamable HTTP client at /mcp, with the REST API's keys. On Ray, two Ingress replicas: the
endpoint is stateless, so any replica answers any request. Also `memlane mcp --url` (stdio)
against the same service."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from live import live_service

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"k-alice": ["alice"], "k-bob": ["bob"], "k-admin": "*"}
TOOLS = {"retain", "recall", "reflect", "list_banks", "create_bank", "delete_document", "get_tree"}
LIMIT_S = 240  # one MCP session, including the first retain's model loads


@pytest.fixture(scope="module", params=["ray", "process"])
def service(request, tmp_path_factory):
    # Ray: two Ingress replicas, so the requests of one MCP client land on both
    replicas = {"Ingress": 2} if request.param == "ray" else None
    root = tmp_path_factory.mktemp(f"mcp-service-{request.param}")
    with live_service(root, keys=KEYS, replicas=replicas, runtime=request.param) as state:
        yield state


def _session(service, key: str | None, body, mode: str = "auto"):
    """Run ``body(client)`` in one MCP client session at /mcp with ``key``, bounded in time."""
    import httpx2  # the SDK's HTTP client
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def main():
        with anyio.fail_after(LIMIT_S):
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=LIMIT_S))
            transport = streamable_http_client(f"{service['url']}/mcp", http_client=http)
            async with http, Client(transport, mode=mode, read_timeout_seconds=LIMIT_S) as client:
                return await body(client)

    return anyio.run(main)


def _text(result) -> str:
    assert result.content, result
    return result.content[0].text


def test_tools_are_listed_with_their_schemas(service):
    async def body(client):
        return (await client.list_tools()).tools

    tools = {t.name: t for t in _session(service, "k-alice", body)}
    assert set(tools) == TOOLS
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["retain"].input_schema["required"] == ["content"]
    assert tools["create_bank"].input_schema["required"] == ["bank"]
    assert tools["reflect"].input_schema["properties"]["answer_max_tokens"]["maximum"] == 32_768
    tree = tools["get_tree"].input_schema
    assert set(tree["properties"]) == {"bank", "level", "from", "to"} and not tree.get("required")
    assert tools["get_tree"].annotations.read_only_hint is True


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_retain_then_recall_through_the_deployments(service, mode):
    """Both protocol eras: a 2026-07-28 client (sessionless) and a handshake-era client, whose
    requests reach two Ingress replicas and still work because the endpoint is stateless."""
    fact = f"My dog is called Biscuit ({mode})."

    async def body(client):
        out = {"create": await client.call_tool("create_bank", {"bank": "alice", "name": "Alice"})}
        out["retain"] = await client.call_tool(
            "retain", {"bank": "alice", "content": fact, "speaker": "Alice", "document_id": mode}
        )
        out["recall"] = [
            await client.call_tool("recall", {"bank": "alice", "query": f"What is the dog called ({mode})?"})
            for _ in range(4)
        ]
        out["banks"] = await client.call_tool("list_banks", {})
        return out

    out = _session(service, "k-alice", body, mode=mode)
    assert not out["create"].is_error, _text(out["create"])
    assert not out["retain"].is_error, _text(out["retain"])
    assert out["retain"].structured_content["units"] == 1
    for result in out["recall"]:  # on either replica, right after the retain returned
        assert not result.is_error, _text(result)
        assert result.structured_content["memories"][0]["text"] == f"Alice: {fact}"
    assert out["banks"].structured_content["banks"] == [{"bank_id": "alice", "name": "Alice"}]
    with httpx.Client(base_url=service["url"], headers={"Authorization": "Bearer k-admin"}) as rest:
        docs = {d["document_id"] for d in rest.get("/v1/banks/alice/documents").json()["documents"]}
    assert mode in docs  # the same bank the REST API sees


def test_a_key_without_the_bank_gets_a_tool_error_and_changes_nothing(service):
    with httpx.Client(base_url=service["url"], headers={"Authorization": "Bearer k-bob"}) as rest:
        assert rest.put("/v1/banks/bob", json={"name": "Bob"}).status_code in (200, 201)
        rest.post("/v1/banks/bob/memories", json={"items": [{"content": "Bob's locker code is 4417."}]})

    async def body(client):
        return {
            "recall": await client.call_tool("recall", {"bank": "bob", "query": "locker code"}),
            "retain": await client.call_tool("retain", {"bank": "bob", "content": "hijack"}),
            "create": await client.call_tool("create_bank", {"bank": "bob", "name": "hijack"}),
            "delete": await client.call_tool("delete_document", {"bank": "bob", "document_id": "x"}),
            "banks": await client.call_tool("list_banks", {}),
        }

    out = _session(service, "k-alice", body)
    for key in ("recall", "retain", "create", "delete"):
        assert out[key].is_error, key
        assert "forbidden: this API key may not use bank 'bob'" in _text(out[key])
    assert "bob" not in {b["bank_id"] for b in out["banks"].structured_content["banks"]}
    with httpx.Client(base_url=service["url"], headers={"Authorization": "Bearer k-bob"}) as rest:
        assert rest.get("/v1/banks/bob").json()["name"] == "Bob"
        assert rest.get("/v1/banks/bob/memories").json()["total"] == 1


def _tree_of_alice(service):
    """TREE_ITEMS in bank alice (document "tree"), consolidated through the REST API."""
    from tree_samples import TREE_ITEMS

    with httpx.Client(
        base_url=service["url"], headers={"Authorization": "Bearer k-admin"}, timeout=300
    ) as rest:
        assert rest.put("/v1/banks/alice", json={"name": "Alice"}).status_code in (200, 201)
        rest.post(
            "/v1/banks/alice/memories", json={"items": TREE_ITEMS, "document_id": "tree"}
        ).raise_for_status()
        rest.post("/v1/banks/alice/consolidate", json={"consolidator": "rules"}).raise_for_status()


# May 2024 holds only TREE_ITEMS (the other tests of this module retain with today's time)
MAY = {"from": "2024-05-01T00:00:00Z", "to": "2024-06-01T00:00:00Z"}


def test_get_tree_lists_the_consolidated_tree_and_refuses_what_the_rest_api_refuses(service):
    _tree_of_alice(service)

    async def body(client):
        return {
            "weeks": await client.call_tool("get_tree", {"bank": "alice", "level": "week", **MAY}),
            "days": await client.call_tool(
                "get_tree", {"bank": "alice", "level": "day", "from": "2024-05-07T00:00:00Z", "to": MAY["to"]}
            ),
            "bad_level": await client.call_tool("get_tree", {"bank": "alice", "level": "year"}),
            "backwards": await client.call_tool(
                "get_tree", {"bank": "alice", "from": MAY["to"], "to": MAY["from"]}
            ),
            "bad_time": await client.call_tool("get_tree", {"bank": "alice", "from": "last spring"}),
        }

    out = _session(service, "k-alice", body)
    weeks = out["weeks"]
    assert not weeks.is_error, _text(weeks)
    assert [(n["level"], n["start"], n["end"], n["children"]) for n in weeks.structured_content["nodes"]] == [
        ("week", "2024-05-06T09:00:00Z", "2024-05-08T18:10:00Z", 2),
        ("week", "2024-05-14T08:30:00Z", "2024-05-14T08:40:00Z", 1),
    ]
    assert [n["start"][:10] for n in out["days"].structured_content["nodes"]] == ["2024-05-08", "2024-05-14"]
    for key in ("bad_level", "backwards", "bad_time"):
        assert out[key].is_error, key
    assert "level" in _text(out["bad_level"])
    assert "invalid_argument: to: must be after from" in _text(out["backwards"])
    assert "from" in _text(out["bad_time"])

    async def foreign(client):
        return {
            "forbidden": await client.call_tool("get_tree", {"bank": "alice"}),
            "unknown": await client.call_tool("get_tree", {"bank": "nobody"}),
        }

    other = _session(service, "k-bob", foreign)
    assert other["forbidden"].is_error and "forbidden: this API key may not use bank 'alice'" in _text(
        other["forbidden"]
    )
    assert other["unknown"].is_error and "forbidden" in _text(other["unknown"])  # not even its existence
    admin = _session(service, "k-admin", lambda c: c.call_tool("get_tree", {"bank": "nobody"}))
    assert admin.is_error and "bank_not_found: unknown bank 'nobody'" in _text(admin)


@pytest.mark.parametrize("key", [None, "nope"])
def test_a_missing_or_unknown_key_is_401(service, key):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    r = httpx.post(f"{service['url']}/mcp", json=ping, headers=headers, timeout=60)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthorized"
    assert r.headers["WWW-Authenticate"] == "Bearer"

    async def body(client):
        return await client.list_tools()

    from mcp import MCPError

    with pytest.raises(BaseException) as failed:  # the SDK client cannot even connect
        _session(service, key, body)
    assert any(isinstance(e, MCPError) for e in _leaves(failed.value)), repr(failed.value)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def test_bad_arguments_and_reflect_without_an_llm_are_tool_errors(service):
    async def body(client):
        await client.call_tool("create_bank", {"bank": "alice"})
        return {
            "zero": await client.call_tool("recall", {"bank": "alice", "query": "dog", "max_tokens": 0}),
            "budget": await client.call_tool("recall", {"bank": "alice", "query": "dog", "budget": "huge"}),
            "no_query": await client.call_tool("recall", {"bank": "alice"}),
            "no_bank": await client.call_tool("recall", {"query": "dog"}),
            "unknown": await client.call_tool("recall", {"bank": "nobody", "query": "dog"}),
            "reflect": await client.call_tool("reflect", {"bank": "alice", "query": "Should I get a cat?"}),
        }

    out = _session(service, "k-admin", body)
    for key, result in out.items():
        assert result.is_error, (key, result)
    assert "max_tokens" in _text(out["zero"]) and "greater than 0" in _text(out["zero"])
    assert "budget" in _text(out["budget"]) and "'low', 'mid' or 'high'" in _text(out["budget"])
    assert "query" in _text(out["no_query"]) and "required" in _text(out["no_query"]).lower()
    assert "no bank given" in _text(out["no_bank"])  # the HTTP endpoint has no default bank
    assert "bank_not_found: unknown bank 'nobody'" in _text(out["unknown"])
    assert "llm_not_configured" in _text(out["reflect"]) and "MEMLANE_LLM__BASE_URL" in _text(out["reflect"])


def test_stdio_with_url_uses_the_service_and_its_key(service):
    """`memlane mcp --url` (stdio, SDK client backend): the key's banks are enforced by the service."""
    from mcp import Client

    _tree_of_alice(service)  # for get_tree (idempotent: the same tree whichever test ran first)
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("memlane")),
        args=["mcp", "--url", service["url"], "--bank", "alice"],
        env={"PYTHONPATH": str(ROOT), "MEMLANE_API_KEY": "k-alice"},
        cwd=str(ROOT),
    )

    async def main():
        with anyio.fail_after(LIMIT_S):
            async with Client(params, read_timeout_seconds=LIMIT_S) as client:
                await client.call_tool("create_bank", {"bank": "alice", "name": "Alice"})
                return {
                    "retain": await client.call_tool(
                        "retain", {"content": "Alice's sister lives in Porto.", "document_id": "sister"}
                    ),
                    "recall": await client.call_tool("recall", {"query": "Where does the sister live?"}),
                    "forbidden": await client.call_tool("recall", {"bank": "bob", "query": "locker"}),
                    "reflect": await client.call_tool("reflect", {"query": "Should I visit?"}),
                    "tree": await client.call_tool("get_tree", {"level": "day", **MAY}),
                    "tree_forbidden": await client.call_tool("get_tree", {"bank": "bob"}),
                }

    out = anyio.run(main)
    assert not out["retain"].is_error, _text(out["retain"])
    texts = [m["text"] for m in out["recall"].structured_content["memories"]]
    assert "user: Alice's sister lives in Porto." in texts
    assert out["forbidden"].is_error and "forbidden" in _text(out["forbidden"])
    assert out["reflect"].is_error and "llm_not_configured" in _text(out["reflect"])
    assert not out["tree"].is_error, _text(out["tree"])
    assert [n["start"][:10] for n in out["tree"].structured_content["nodes"]] == [
        "2024-05-06",
        "2024-05-08",
        "2024-05-14",
    ]
    assert out["tree_forbidden"].is_error and "forbidden" in _text(out["tree_forbidden"])


PROJECTION_ITEMS = [
    {
        "speaker": "Ana",
        "content": "I adopted a beagle called Pixel last week.",
        "timestamp": "2025-03-10T09:00:00Z",
    },
    {"speaker": "Ben", "content": "Lovely! Is Pixel settling in?", "timestamp": "2025-03-10T09:01:00Z"},
    {"speaker": "Ana", "content": "Yes, he sleeps on the sofa all day.", "timestamp": "2025-03-10T09:02:00Z"},
]
PROJECTION_QUERY = "What is the name of the beagle Ana adopted?"


def test_one_memory_looks_the_same_through_rest_mcp_and_the_engine(service, tmp_path, embedder):
    """The client projection (memlane/views.py) on every path of the service: REST list, get,
    recall and an entity's memories (what the explorer reads), the MCP endpoint's recall, and
    the engine's own view of the record in the service's store, through the MCP engine backend
    too. The CLI's --json beside the engine: tests/cluster/test_projection.py."""
    from memlane.engine import Memory
    from memlane.settings import Settings
    from memlane.views import unit_view
    from serve.mcp_backends import EngineBackend

    with httpx.Client(
        base_url=service["url"], headers={"Authorization": "Bearer k-admin"}, timeout=120
    ) as rest:
        assert rest.put("/v1/banks/ana", json={"name": "Ana"}).status_code in (200, 201)
        body = {"items": PROJECTION_ITEMS, "document_id": "chat", "tags": ["pets"]}
        rest.post("/v1/banks/ana/memories", json=body).raise_for_status()
        # The fact pass follows the retain in the background (MEMLANE_BACKGROUND__DELAY_S
        # after it) and adds the unit's facts to its metadata: a recall that came after it and
        # a listing before it differed (seen on the process runtime). Compared once it ran.
        deadline = time.monotonic() + 120
        while True:
            listed = rest.get("/v1/banks/ana/memories").json()["items"]
            unit = next(u for u in listed if "beagle" in u["text"])
            if "facts" in unit["metadata"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert "facts" in unit["metadata"], unit
        got = rest.get(f"/v1/banks/ana/memories/{unit['id']}").json()
        recalled = rest.post("/v1/banks/ana/recall", json={"query": PROJECTION_QUERY}).json()
        entity = rest.get(f"/v1/banks/ana/entities/{unit['entity_ids'][0]}").json()
    assert "context" not in unit and "embedding" not in unit and unit["tags"] == ["pets"]
    assert got == unit
    assert {m["unit"]["id"]: m["unit"] for m in recalled["memories"]}[unit["id"]] == unit
    assert {u["id"]: u for u in entity["memories"]}[unit["id"]] == unit

    tool = _session(
        service, "k-admin", lambda c: c.call_tool("recall", {"bank": "ana", "query": PROJECTION_QUERY})
    )
    row = {m["id"]: m for m in tool.structured_content["memories"]}[unit["id"]]
    assert (row["text"], row["type"], row["when"]) == (
        unit["text"],
        unit["fact_type"],
        unit["occurred_start"] or unit["mentioned_at"],
    )

    store = {"milvus_uri": service["milvus_uri"]}
    memory = Memory(Settings(data_dir=tmp_path / "data", store=store), embedder=embedder)
    try:
        stored = memory.browse.get_memory("ana", unit["id"])
        assert "Pixel settling in" in stored.context  # hidden, not missing
        assert unit_view(stored) == unit
        mcp = anyio.run(EngineBackend(memory).call, "recall", "ana", {"query": PROJECTION_QUERY})
        assert {m["unit"]["id"]: m["unit"] for m in mcp["memories"]}[unit["id"]] == unit
    finally:
        memory.close()
