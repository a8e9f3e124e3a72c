"""The CLI with `memlane serve` running on its data directory: the commands go through the
service (its API, with a key from MEMLANE_API_KEY or this environment's MEMLANE_SERVE__API_KEYS;
its Milvus Lite server for what the API does not offer) and say so in one line; without a key
they stop with one line, exit code 2. A real service (Ray Serve, Milvus Lite server, models),
started once for the module; the CLI runs as a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from fixtures import write_jsonl_fixture
from live import live_service, memlane

pytestmark = pytest.mark.slow

KEYS = {"k-admin": "*", "k-bob": ["bob"]}
ROWS = [
    {
        "speaker": "Ana",
        "text": "I adopted a beagle called Pixel.",
        "timestamp": "2025-03-10T09:00:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ben",
        "text": "Is Pixel settling in?",
        "timestamp": "2025-03-10T09:01:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ana",
        "text": "I started pottery in Porto.",
        "timestamp": "2025-04-02T18:00:00Z",
        "session_id": "s2",
    },
]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-service")
    with live_service(root, keys=KEYS) as state:
        yield {**state, "data": root / "data", "root": root}


def env(**extra: str) -> dict[str, str]:
    """The test's environment without any MEMLANE_ setting (no key, no keys), plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}, **extra}


def cli(service, *args: str, **extra: str):
    r = memlane(*args, "--data-dir", str(service["data"]), env=env(**extra), timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def notes(r) -> list[str]:
    return [line for line in r.stderr.splitlines() if line.startswith("memlane: ")]


def api(service, method: str, path: str, **kw):
    with httpx.Client(base_url=service["url"], timeout=120, headers={"Authorization": "Bearer k-admin"}) as c:
        resp = c.request(method, path, **kw)
    assert resp.status_code < 300, resp.text
    return resp.json()


@pytest.fixture(scope="module")
def retained(service):
    """``memlane retain`` of a file while the service runs: through its Milvus Lite server."""
    path = write_jsonl_fixture(Path(service["root"]) / "chat.jsonl", ROWS)
    r = cli(service, "retain", str(path), "--bank", "ana", "--json", MEMLANE_API_KEY="k-admin")
    assert r.returncode == 0, r.stderr
    assert notes(r) == [
        f"memlane: through the Milvus Lite server of memlane serve on {service['data']} "
        f"({service['milvus_uri']})"
    ]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_retain_goes_through_the_services_store(service, retained):
    assert retained["turns"] == 3 and retained["units"] == 3
    assert api(service, "GET", "/v1/banks/ana/stats")["units"] == 3  # the service sees them


def test_recall_goes_through_the_api_and_says_so(service, retained):
    query = "What is the beagle called?"
    r = cli(service, "recall", "--bank", "ana", query, "--json", MEMLANE_API_KEY="k-admin")
    assert r.returncode == 0, r.stderr
    assert notes(r) == [
        f"memlane: through the service at {service['url']} (memlane serve on {service['data']})"
    ]
    got = json.loads(r.stdout)
    direct = api(service, "POST", "/v1/banks/ana/recall", json={"query": query, "max_tokens": 1024})
    assert [m["unit"]["id"] for m in got["memories"]] == [m["unit"]["id"] for m in direct["memories"]]
    assert "Pixel" in got["memories"][0]["unit"]["text"]
    text = cli(service, "recall", "--bank", "ana", query, MEMLANE_API_KEY="k-admin")
    assert "Pixel" in text.stdout.splitlines()[0] and f", via {service['url']})" in text.stderr


def test_the_key_may_come_from_this_environments_service_keys(service, retained):
    r = cli(service, "recall", "--bank", "ana", "Porto?", MEMLANE_SERVE__API_KEYS=json.dumps(KEYS))
    assert r.returncode == 0, r.stderr
    assert "Porto" in r.stdout


def test_without_a_key_a_command_says_why_in_one_line(service, retained):
    for args in (("recall", "--bank", "ana", "dog"), ("banks",), ("tree", "--bank", "ana")):
        r = cli(service, *args)
        assert r.returncode == 2, (args, r.stderr)
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"error: memlane serve runs on {service['data']} with auth on") and (
            "set MEMLANE_API_KEY" in line
        ), line


def test_the_services_refusals_are_one_line(service, retained):
    wrong = cli(service, "recall", "--bank", "ana", "dog", MEMLANE_API_KEY="nope")
    assert wrong.returncode == 2 and wrong.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "(HTTP 401 from" in wrong.stderr
    other = cli(service, "recall", "--bank", "ana", "dog", MEMLANE_API_KEY="k-bob")
    assert other.returncode == 2 and "(HTTP 403 from" in other.stderr.strip().splitlines()[-1]
    ghost = cli(service, "recall", "--bank", "ghost", "dog", MEMLANE_API_KEY="k-admin")
    assert (
        ghost.returncode == 2
        and "unknown bank 'ghost' (HTTP 404 from" in ghost.stderr.strip().splitlines()[-1]
    )


def test_banks_consolidate_tree_and_directives_through_the_api(service, retained):
    key = {"MEMLANE_API_KEY": "k-admin"}
    listed = cli(service, "banks", **key)
    assert listed.returncode == 0 and listed.stdout == "ana\t3 memories\t\n"
    done = cli(service, "consolidate", "--bank", "ana", "--json", **key)
    assert done.returncode == 0, done.stderr
    assert notes(done) == [
        f"memlane: through the service at {service['url']} (memlane serve on {service['data']})"
    ]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["banks"] == 1 and summary["total_written"] > 0 and summary["failed_banks"] == 0
    nodes = json.loads(cli(service, "tree", "--bank", "ana", "--json", **key).stdout)
    assert nodes == api(service, "GET", "/v1/banks/ana/tree")["nodes"]
    assert len(nodes) == sum(summary["nodes"].values())
    put = cli(service, "directive", "put", "no-ex", "Never mention her ex.", "--bank", "ana", **key)
    assert put.returncode == 0 and "created directive no-ex in bank ana" in put.stdout
    again = cli(service, "directive", "put", "no-ex", "Never mention her ex.", "--bank", "ana", **key)
    assert again.returncode == 0 and "kept directive no-ex in bank ana" in again.stdout
    assert [d["id"] for d in api(service, "GET", "/v1/banks/ana/directives")["directives"]] == ["no-ex"]


def test_doctor_is_not_in_the_api_and_reads_the_services_store(service, retained):
    r = cli(service, "doctor", "--bank", "ana", MEMLANE_API_KEY="k-admin")
    assert r.returncode == 0, r.stderr
    assert notes(r) == [
        f"memlane: through the Milvus Lite server of memlane serve on {service['data']} "
        f"({service['milvus_uri']})"
    ]
    assert r.stdout.startswith("bank ana: ok (3 memories,")


def test_mcp_over_stdio_goes_through_the_service(service, retained, tmp_path):
    """`memlane mcp` without --url on the service's data directory: its tools answer through
    the service (the directory is the service's, so the engine could not open it)."""
    import sys

    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    log = tmp_path / "mcp-stderr.log"
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("memlane")),
        args=["mcp", "--data-dir", str(service["data"]), "--bank", "ana"],
        env={**env(MEMLANE_API_KEY="k-admin"), "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )

    async def main():
        with anyio.fail_after(240), log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=240) as client:
                banks = await client.call_tool("list_banks", {})
                found = await client.call_tool("recall", {"query": "Where is the pottery class?"})
                return banks, found

    banks, found = anyio.run(main)
    assert {b["bank_id"] for b in banks.structured_content["banks"]} >= {"ana"}
    assert any("Porto" in m["text"] for m in found.structured_content["memories"])
    assert f"memlane: through the service at {service['url']}" in log.read_text()


def test_delete_a_document_through_the_api(service, retained):  # last: it empties the bank
    doc = api(service, "GET", "/v1/banks/ana/documents")["documents"][0]["document_id"]
    r = cli(service, "delete", "--bank", "ana", "--document", doc, MEMLANE_API_KEY="k-admin")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"deleted document {doc} of bank ana: 3 memories, ")
    assert api(service, "GET", "/v1/banks/ana/stats")["units"] == 0
