"""Reflect over HTTP with an LLM configured: the Reflect deployment calls a fake
OpenAI-compatible server (real HTTP) and the opinion it forms is stored in the bank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from llm_fake import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]


def _memlane(*args, env=None, timeout=600):
    exe = Path(sys.executable).with_name("memlane")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )


def _reply(body: dict):
    last = body["messages"][-1]["content"]
    if last.startswith("Question: What went wrong"):
        return {"status": 503, "body": {"error": "the model server is overloaded"}}
    if last.startswith("Question: Say something odd") or last.startswith("That reply was rejected"):
        return "Sure! Here is my answer: Biscuit."  # no JSON, also after the repair request
    if last.startswith("Question:"):
        return json.dumps(
            {
                "answer": "Biscuit is my dog [M1].",
                "cited": ["M1", "M42"],
                "opinions": [
                    {
                        "statement": "I think Biscuit is a very good dog.",
                        "confidence": 0.7,
                        "entities": ["Biscuit"],
                    }
                ],
            }
        )
    return {"status": 400}


@pytest.fixture(scope="module")
def llm_service(tmp_path_factory):
    from cluster.local import free_port

    root = tmp_path_factory.mktemp("reflect-service")
    with FakeLLMServer() as llm:
        llm.responder = _reply
        # Only the reflect role has an LLM: retain stays LLM-free and consolidation off.
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_LLM")}
        env.update(
            MEMLANE_SERVE__AUTH="off",
            MEMLANE_LLM__REFLECT__BASE_URL=llm.base_url,
            MEMLANE_LLM__REFLECT__MODEL="fake-model",
        )
        started = _memlane(
            "serve",
            "--port",
            str(free_port()),
            "--data-dir",
            str(root / "data"),
            "--timeout",
            "420",
            "--json",
            env=env,
            timeout=480,
        )
        assert started.returncode == 0, started.stderr
        state = json.loads(started.stdout.strip().splitlines()[-1])
        try:
            yield state, llm
        finally:
            stopped = _memlane("serve", "--stop", "--data-dir", str(root / "data"), timeout=200)
            assert stopped.returncode == 0


def test_reflect_answers_cites_and_stores_its_opinion(llm_service):
    state, llm = llm_service
    with httpx.Client(base_url=state["url"], timeout=120) as http:
        assert (
            http.put(
                "/v1/banks/ana",
                json={"name": "Ana", "background": "I am a vet.", "disposition": {"skepticism": 5}},
            ).status_code
            == 201
        )
        r = http.post(
            "/v1/banks/ana/memories",
            json={
                "items": [
                    {
                        "content": "My dog Biscuit learned to fetch today.",
                        "speaker": "Ana",
                        "timestamp": "2024-05-01T10:00:00Z",
                    }
                ],
                "document_id": "d1",
            },
        )
        assert r.status_code == 200, r.text
        fact_id = http.get("/v1/banks/ana/memories").json()["items"][0]["id"]

        r = http.post("/v1/banks/ana/reflect", json={"query": "Tell me about Biscuit", "budget": "low"})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["answer"] == "Biscuit is my dog [M1]."
        assert out["memory_ids"] == [fact_id]  # M1 is the fact; M42 is no memory and dropped
        [opinion] = out["opinions"]
        assert opinion["confidence"] == 0.7 and "embedding" not in opinion

        # the system message carried the bank's background and its disposition
        sent = next(b for b in llm.requests if b["messages"][-1]["content"].startswith("Question:"))
        assert "I am a vet." in sent["messages"][0]["content"]
        assert sent["model"] == "fake-model"

        stored = http.get("/v1/banks/ana/memories", params={"type": "opinion"}).json()
        assert [m["id"] for m in stored["items"]] == [opinion["id"]]
        assert stored["items"][0]["text"] == "I think Biscuit is a very good dog."

        bad = http.post("/v1/banks/ana/reflect", json={"query": "x", "budget": "huge"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "budget"


def test_a_failing_model_is_a_503_with_the_json_error_and_nothing_is_stored(llm_service):
    state, _ = llm_service
    with httpx.Client(base_url=state["url"], timeout=120) as http:
        http.put("/v1/banks/bo", json={"name": "Bo"})
        item = {
            "content": "My cat Miso sleeps on the piano.",
            "speaker": "Bo",
            "timestamp": "2024-05-01T10:00:00Z",
        }
        assert (
            http.post("/v1/banks/bo/memories", json={"items": [item], "document_id": "d1"}).status_code == 200
        )
        before = http.get("/v1/banks/bo/memories").json()["items"]

        down = http.post("/v1/banks/bo/reflect", json={"query": "What went wrong with Miso?"})
        assert down.status_code == 503
        error = down.json()["error"]
        assert error["code"] == "llm_unavailable"
        assert "reflect LLM at http://127.0.0.1:" in error["message"] and "HTTP 503" in error["message"]

        odd = http.post("/v1/banks/bo/reflect", json={"query": "Say something odd about Miso"})
        assert odd.status_code == 503
        assert odd.json()["error"]["code"] == "llm_bad_output"
        assert "invalid ReflectReply after one repair" in odd.json()["error"]["message"]

        # no opinion written (compared by what each memory is: the background consolidation
        # may add its facts' resolution to a memory's metadata meanwhile)
        def said(items):
            return sorted((m["id"], m["fact_type"], m["text"]) for m in items)

        assert said(http.get("/v1/banks/bo/memories").json()["items"]) == said(before)
