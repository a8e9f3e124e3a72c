"""The write paths a user has, each driven through its own surface, for
tests/serving/test_write_paths.py: `memlane retain`, `memlane backfill` and `memlane
consolidate` run in this process (their batch jobs' pools too, or on a local Ray), REST and the
Hindsight surface over HTTP, MCP's retain tool at /mcp, LangGraph's ``put`` over the SDK."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
from typer.testing import CliRunner

WAIT_S = 300  # a bound on an async retain on a loaded 2-core machine, not an assertion on speed


def jsonl_file(path: Path, bank: str, docs: dict[str, list[dict[str, Any]]]) -> Path:
    """The chats as the JSON Lines a user backfills (and retains again with `memlane retain
    --bank`): one line per turn, the bank in each."""
    lines = [
        {
            "bank_id": bank,
            "document_id": doc,
            "session_id": it["session_id"],
            "speaker": it["speaker"],
            "timestamp": it["timestamp"],
            "text": it["content"],
        }
        for doc in sorted(docs)
        for it in docs[doc]
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def cli(*args: str) -> dict[str, Any]:
    """A command's JSON output (its last line), after checking it succeeded."""
    from cluster.cli import app

    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (args, result.output)
    return json.loads(result.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def cli_models(fresh) -> Iterator[None]:
    """`memlane retain`'s engine as the command opens it (the service's Milvus Lite server),
    with the models already loaded here: a new engine per command, as in a new process."""
    from cluster.route import store_settings
    from memlane.engine import Memory

    def open_memory(data_dir, **_):
        return Memory(store_settings(data_dir), embedder=fresh.embedder, extractor=fresh.extractor)

    with mock.patch("cluster.cli.open_memory", open_memory):
        yield


def _rows(out: Any) -> Iterator[dict[str, Any]]:
    cols = out if isinstance(out, dict) else out.to_pydict()
    keys = list(cols)
    for values in zip(*(cols[k] for k in keys)):
        yield dict(zip(keys, values))


def _run_here(rows, actor, constructor_kwargs, pool, **_) -> Iterator[dict[str, Any]]:
    """pipelines.job.run_pool's contract without Ray: one instance of the job's actor class,
    called with each row as a one-row pyarrow batch, in order; its engine closed at the end."""
    import pyarrow as pa

    worker = actor(**constructor_kwargs)
    try:
        for row in rows:
            yield from _rows(worker(pa.Table.from_pylist([row])))
    finally:
        worker.worker.memory.close()


@contextlib.contextmanager
def jobs_here(fresh) -> Iterator[None]:
    """The batch jobs' pools in this process, no Ray started: their workers' engines built as
    the workers build them, with the models already loaded here, and outside a Ray worker as
    the workers' code expects it (asked for its runtime context outside Ray, Ray starts a
    local instance instead of failing: 18 s here, and a Ray left running)."""
    import memlane.engine
    from pipelines.job import Pool

    engine = memlane.engine.Memory

    def memory(settings, **kw):
        return engine(settings, **{"embedder": fresh.embedder, "extractor": fresh.extractor, **kw})

    def pool(*_, **__) -> Pool:
        return Pool(1, 1.0)

    def outside_ray():
        raise RuntimeError("not in a Ray worker")

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch("memlane.engine.Memory", memory))
        stack.enter_context(mock.patch("ray.get_runtime_context", outside_ray))
        stack.enter_context(
            mock.patch("cluster.consolidate_cmd.ray_session", lambda _: contextlib.nullcontext())
        )
        for module in ("pipelines.backfill", "pipelines.consolidate"):
            stack.enter_context(mock.patch(f"{module}.run_pool", _run_here))
            stack.enter_context(mock.patch(f"{module}.cluster_pool", pool))
        yield


def api(service) -> httpx.Client:
    return httpx.Client(base_url=service["url"], timeout=WAIT_S)


def rest(service, bank: str, items: list[dict[str, Any]], *, wait: bool) -> None:
    with api(service) as http:
        resp = http.post(f"/v1/banks/{bank}/memories", json={"items": items, "async": not wait})
        if wait:
            assert resp.status_code == 200, resp.text
            return
        assert resp.status_code == 202, resp.text
        op = resp.json()
        deadline = time.monotonic() + WAIT_S
        while op["status"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.2)
            op = http.get(f"/v1/banks/{bank}/operations/{op['operation_id']}").json()
        assert op["status"] == "succeeded", op


def hindsight(service, bank: str, doc: str, items: list[dict[str, Any]]) -> None:
    """Hindsight's retain: an item per turn, its text "speaker: text", the document's id."""
    body = {
        "items": [
            {"content": f"{it['speaker']}: {it['content']}", "timestamp": it["timestamp"], "document_id": doc}
            for it in items
        ]
    }
    with api(service) as http:
        resp = http.post(f"/hindsight/v1/default/banks/{bank}/memories", json=body)
    assert resp.status_code == 200, resp.text


def mcp(service, bank: str, item: dict[str, Any]) -> None:
    import anyio
    import httpx2  # the MCP SDK's HTTP client
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    args = {
        "bank": bank,
        "content": item["content"],
        "speaker": item["speaker"],
        "timestamp": item["timestamp"],
        "document_id": item["document_id"],
        "session_id": item["session_id"],
    }

    async def main():
        with anyio.fail_after(WAIT_S):
            http = httpx2.AsyncClient(timeout=httpx2.Timeout(60, read=WAIT_S))
            transport = streamable_http_client(f"{service['url']}/mcp", http_client=http)
            async with http, Client(transport, read_timeout_seconds=WAIT_S) as client:
                return await client.call_tool("retain", args)

    result = anyio.run(main)
    assert not result.is_error, result.content


def langgraph(
    service, reader, bank: str, namespace: str, key: str, value: dict[str, Any]
) -> list[dict[str, Any]]:
    """LangGraph's put over the service; the item as retain items. The put says no time, so
    the turn's is the service's clock at the put: read from the bank."""
    from memlane.integrations.langgraph import MemlaneStore
    from memlane_client import MemlaneClient

    with MemlaneClient(service["url"], "", timeout=WAIT_S) as client:
        MemlaneStore(client).put((bank, namespace), key, value)
    doc = MemlaneStore._document_id((bank, namespace), key)
    (unit,) = [u for page in reader.store.iter_units(bank) for u in page if u.document_id == doc]
    return [
        {
            "content": json.dumps(value, ensure_ascii=False),
            "speaker": "langgraph",
            "document_id": doc,
            "timestamp": unit.mentioned_at.isoformat(),
            # the documented mapping: the store's tag, every prefix of the namespace, the key
            "tags": sorted(["lg:store", f"lg:ns={bank}", f"lg:ns={bank}.{namespace}", f"lg:key={key}"]),
        }
    ]
