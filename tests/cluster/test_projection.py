"""One memory looks the same to every client of the embedded engine: the projection itself
(memlane/views.py), the MCP engine backend (``memlane mcp --data-dir``) and the CLI's ``--json``,
over one Milvus Lite data directory (real MiniLM and spaCy). The REST API's side, against the
same projection: tests/serving/test_mcp.py."""

from __future__ import annotations

import json

import anyio
from typer.testing import CliRunner

from cluster.cli import app
from memlane.engine import Memory
from memlane.views import recall_view, unit_view
from serve.mcp_backends import EngineBackend

T = "2025-03-10T09:0{}:00Z"
ITEMS = [
    {"speaker": "Ana", "content": "I adopted a beagle called Pixel last week.", "timestamp": T.format(0)},
    {"speaker": "Ben", "content": "Lovely! Is Pixel settling in?", "timestamp": T.format(1)},
    {"speaker": "Ana", "content": "Yes, he sleeps on the sofa all day.", "timestamp": T.format(2)},
]
QUERY = "What is the name of the beagle Ana adopted?"


def _by_id(answer: dict) -> dict[str, dict]:
    return {m["unit"]["id"]: m["unit"] for m in answer["memories"]}


def test_one_memory_looks_the_same_through_the_engine_mcp_and_cli(settings, embedder, extractor):
    memory = Memory(settings, embedder=embedder, extractor=extractor)
    try:
        memory.create_bank("ana")
        memory.retain_items("ana", ITEMS, document_id="chat", tags=["pets"])
        units, _ = memory.browse.list_memories("ana")
        unit = next(u for u in units if "beagle" in u.text)
        # What the projection hides is there to hide: the neighbouring turns, the vector and
        # the slot signals stored for the ranker.
        stored = memory.browse.get_memory("ana", unit.id)
        assert "Pixel settling in" in stored.context and stored.slots is not None
        view = unit_view(stored)
        assert "context" not in view and "embedding" not in view and "slots" not in view
        assert view["text"] == "Ana: I adopted a beagle called Pixel last week." and view["tags"] == ["pets"]
        assert [unit_view(u) for u in units if u.id == unit.id] == [view]

        recalled = recall_view(memory.recall("ana", QUERY))
        assert _by_id(recalled)[unit.id] == view
        mcp = anyio.run(EngineBackend(memory).call, "recall", "ana", {"query": QUERY})
        assert _by_id(mcp)[unit.id] == view
    finally:
        memory.close()

    cli = CliRunner().invoke(
        app, ["recall", "--bank", "ana", QUERY, "--json", "--data-dir", str(settings.data_dir)]
    )
    assert cli.exit_code == 0, cli.stderr
    assert _by_id(json.loads(cli.stdout))[unit.id] == view
