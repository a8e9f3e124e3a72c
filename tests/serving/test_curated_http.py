"""Mental models and directives over HTTP, on one live ``memlane serve`` (Ray Serve, Milvus
Lite, MiniLM) whose reflect role calls the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from live import live_service
from llm_fake import FakeLLMServer

from memlane_client import MemlaneAPIError, MemlaneClient

KEYS = {"key-priya": ["priya"], "key-admin": "*"}
QUESTION = "How does Priya like to travel?"
TRAVEL = [
    "Priya prefers trains to planes because she hates flying on short trips.",
    "Priya always books a window seat on the train to Edinburgh for the views.",
    "Priya adopted a grey cat called Miso from the shelter in Leeds.",
]


def _items(texts, day):
    return [
        {"content": t, "speaker": "Priya", "timestamp": f"2025-03-{day:02d}T09:{i:02d}:00Z"}
        for i, t in enumerate(texts)
    ]


def _reply(body):
    if body["messages"][-1]["content"].startswith("Question:"):
        return json.dumps({"answer": "By train.", "cited": [], "opinions": []})
    return {"status": 400}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    with FakeLLMServer() as llm:
        llm.responder = _reply
        env = {"MEMLANE_LLM__REFLECT__BASE_URL": llm.base_url, "MEMLANE_LLM__REFLECT__MODEL": "fake"}
        with live_service(tmp_path_factory.mktemp("curated"), keys=KEYS, env=env) as state:
            yield state, llm


def _client(state, key="key-priya"):
    return MemlaneClient(state["url"], api_key=key, timeout=120)


def _error(resp: httpx.Response) -> dict:
    return resp.json()["error"]


def test_models_over_http(service):
    state, _ = service
    url = state["url"]
    with (
        _client(state) as m,
        httpx.Client(base_url=url, headers={"Authorization": "Bearer key-priya"}) as raw,
    ):
        m.put_bank("priya", name="")
        m.retain("priya", _items(TRAVEL, 1), document_id="chat-1")

        r = raw.put("/v1/banks/priya/models/travel", json={"question": QUESTION})
        assert r.status_code == 201, r.text
        model = r.json()
        assert model["id"] == "travel" and model["recalled"] == 3 and model["sources"]
        units = {u["id"]: u for u in m.list_memories("priya")["items"]}
        for s in model["sources"]:
            assert (
                s["text"] == units[s["memory_id"]]["text"]
                and s["turns"] == units[s["memory_id"]]["source_turns"]
            )
        r = raw.put("/v1/banks/priya/models/travel", json={"question": QUESTION})
        assert r.status_code == 200 and r.json() == model  # idempotent
        assert m.list_mental_models("priya") == [model]
        assert m.get_mental_model("priya", "travel") == model

        hit = raw.post(
            "/v1/banks/priya/recall", json={"query": "What are Priya's travel preferences?"}
        ).json()
        assert next(iter(hit)) == "mental_models"  # first in the answer
        [found] = hit["mental_models"]
        assert found["model"] == model and found["score"] >= 0.8
        assert m.recall("priya", "What is the cat called?")["mental_models"] == []

        # a related fact refreshes it in the background (on the Memory replica)
        ferry = "Priya now takes the ferry to Dublin whenever she travels to Ireland."
        m.retain("priya", _items([ferry], 2), document_id="chat-2")
        deadline = time.monotonic() + 120
        while (after := m.get_mental_model("priya", "travel"))["refreshed_at"] == model["refreshed_at"]:
            assert time.monotonic() < deadline, "the model was not refreshed"
            time.sleep(0.5)
        assert after["recalled"] == 4 and any(ferry in s["text"] for s in after["sources"])
        again = m.refresh_mental_model("priya", "travel")
        assert again["refreshed_at"] > after["refreshed_at"] and again["sources"] == after["sources"]

        # bad input: 4xx with the error body, naming the field; nothing written
        r = raw.put("/v1/banks/priya/models/Bad%20Id", json={"question": QUESTION})
        assert r.status_code == 422 and _error(r)["field"] == "model_id"
        r = raw.put("/v1/banks/priya/models/other", json={"question": ""})
        assert r.status_code == 422 and _error(r)["field"] == "question"
        r = raw.put("/v1/banks/priya/models/other", json={"question": "  "})
        assert r.status_code == 422 and _error(r)["field"] == "question"
        r = raw.put("/v1/banks/priya/models/other", json={"question": QUESTION, "answer": "x"})
        assert r.status_code == 422
        r = raw.get("/v1/banks/priya/models/nope")
        assert r.status_code == 404 and _error(r) == {
            "code": "not_found",
            "message": "mental model 'nope' is not in bank 'priya'",
            "field": "model_id",
        }
        assert [x["id"] for x in m.list_mental_models("priya")] == ["travel"]

        assert raw.delete("/v1/banks/priya/models/travel").json() == {"deleted": "travel"}
        assert raw.delete("/v1/banks/priya/models/travel").status_code == 404
        assert m.list_mental_models("priya") == []


def test_keys_and_banks(service):
    state, _ = service
    with httpx.Client(base_url=state["url"]) as raw:
        r = raw.get("/v1/banks/priya/models", headers={"Authorization": "Bearer key-priya"})
        assert r.status_code == 200
        r = raw.get("/v1/banks/other/directives", headers={"Authorization": "Bearer key-priya"})
        assert r.status_code == 403 and _error(r)["code"] == "forbidden"
        r = raw.put("/v1/banks/priya/directives/x", json={"text": "Be brief."})
        assert r.status_code == 401
        r = raw.put(
            "/v1/banks/nobody/models/x",
            json={"question": QUESTION},
            headers={"Authorization": "Bearer key-admin"},
        )
        assert r.status_code == 404 and _error(r)["code"] == "bank_not_found"


def test_directives_reach_reflect_and_go_with_the_bank(service):
    state, llm = service
    with _client(state) as m:
        m.put_bank("priya", name="Priya")
        m.retain("priya", _items(TRAVEL, 1), document_id="chat-1")
        d = m.put_directive("priya", "no-ex", "Never mention her ex.")
        assert d["tags"] == [] and m.put_directive("priya", "no-ex", "Never mention her ex.") == d
        m.put_directive("priya", "work", "Keep work talk formal.", tags=["work"])
        assert [x["id"] for x in m.list_directives("priya")] == ["no-ex", "work"]
        llm.requests.clear()
        assert m.reflect("priya", QUESTION)["answer"] == "By train."
        [ask] = [r for r in llm.requests if r["messages"][-1]["content"].startswith("Question:")]
        system = ask["messages"][0]["content"]
        assert "- Never mention her ex." in system and "formal" not in system
        m.put_mental_model("priya", "travel", QUESTION)

        m.delete_bank("priya")
        m.put_bank("priya", name="")
        assert m.list_directives("priya") == [] and m.list_mental_models("priya") == []
        with pytest.raises(MemlaneAPIError) as err:
            m.delete_directive("priya", "no-ex")
        assert err.value.status == 404 and err.value.field == "directive_id"
