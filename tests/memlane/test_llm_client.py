"""The OpenAI-compatible client and structured replies, against a fake server over real HTTP."""

from __future__ import annotations

import json
import threading

import pytest
from llm_fake import FakeLLMServer
from pydantic import BaseModel, Field

from memlane.errors import ConfigError
from memlane.llm import build_llm, role_config
from memlane.llm.config import RoleConfig
from memlane.llm.errors import LLMError, LLMOutputError
from memlane.llm.openai_compat import OpenAICompatLLM
from memlane.llm.structured import complete_json, parse_json_object
from memlane.settings import Settings

MSG = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


@pytest.fixture
def server():
    from memlane.llm import openai_compat

    openai_compat._DIALECTS_LEFT.clear()  # a port of an earlier test's server may come back
    with FakeLLMServer() as s:
        yield s


def _client(server, *, retries=2, timeout=5.0, concurrency=4, mode="auto", key="sk-test"):
    sleeps: list[float] = []
    cfg = RoleConfig(
        role="retain",
        base_url=server.base_url,
        model="fake-model",
        api_key=key,
        timeout_s=timeout,
        max_retries=retries,
        backoff_s=0.25,
        concurrency=concurrency,
        json_mode=mode,
    )
    llm = OpenAICompatLLM(cfg, sleep=sleeps.append)
    return llm, sleeps


class Pet(BaseModel):
    name: str
    legs: int


def test_complete_sends_model_messages_and_key(server):
    server.script = ["hello there"]
    llm, _ = _client(server)
    assert llm.complete(MSG, max_tokens=7, temperature=0.3) == "hello there"
    body = server.requests[0]
    assert body["model"] == "fake-model" and body["messages"] == MSG
    assert body["max_tokens"] == 7 and body["temperature"] == 0.3
    assert "response_format" not in body
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert llm.usage["requests"] == 1 and llm.usage["completion_tokens"] == 5


def test_a_roles_max_tokens_caps_every_request_of_it(server):
    from memlane.llm.config import role_config
    from memlane.settings import Settings

    server.script = ["a", "b", "c"]
    settings = Settings(llm={"base_url": server.base_url, "model": "m", "reflect": {"max_tokens": 256}})
    capped = OpenAICompatLLM(role_config(settings, "reflect"))
    plain = OpenAICompatLLM(role_config(settings, "retain"))  # the cap is the reflect role's only
    capped.complete(MSG, max_tokens=4096)
    plain.complete(MSG, max_tokens=4096)
    assert [r["max_tokens"] for r in server.requests] == [256, 4096]
    capped.complete(MSG, max_tokens=100)
    assert server.requests[-1]["max_tokens"] == 100  # a smaller ask stands


def test_json_schema_is_requested_when_supported(server):
    server.script = ['{"name": "Pixel", "legs": 4}']
    llm, _ = _client(server)
    pet = complete_json(llm, MSG, Pet)
    assert pet == Pet(name="Pixel", legs=4)
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["properties"]["legs"]
    assert llm.schema_supported is True


def test_a_server_that_refuses_json_schema_gets_the_schema_in_the_prompt(server):
    server.responder = lambda body: (
        {"status": 400} if "response_format" in body else '{"name": "Pixel", "legs": 4}'
    )
    llm, _ = _client(server)
    assert complete_json(llm, MSG, Pet).name == "Pixel"
    assert complete_json(llm, MSG, Pet).legs == 4
    assert llm.schema_supported is False and llm.schema_dialect is None
    # Each dialect refused once, then prompt-side JSON only (no more refusals).
    assert [r.get("response_format", {}).get("type") for r in server.requests] == [
        "json_schema",
        "json_object",
        None,
        None,
    ]
    system = server.requests[2]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("be brief")
    assert '"legs"' in system["content"]


def test_llama_cpp_python_dialect_after_its_500_naming_response_format(server):
    """llama-cpp-python's server (0.3.36) knows only ``json_object`` with a ``schema`` and
    answers ``json_schema`` with an HTTP 500 carrying the validation error."""

    def llama_cpp_python(body):
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            detail = "Input should be 'text' or 'json_object' at ('body', 'response_format', 'type')"
            return {"status": 500, "body": {"error": {"message": detail}}}
        assert fmt == {"type": "json_object", "schema": Pet.model_json_schema()}
        return '{"name": "Pixel", "legs": 4}'

    server.responder = llama_cpp_python
    llm, sleeps = _client(server)
    assert complete_json(llm, MSG, Pet) == Pet(name="Pixel", legs=4)
    assert complete_json(llm, MSG, Pet).legs == 4
    assert llm.schema_supported is True and llm.schema_dialect == "json_object"
    types = [r["response_format"]["type"] for r in server.requests]
    assert types == ["json_schema", "json_object", "json_object"] and sleeps == []  # no retry
    # another client of the same server (another role) starts from what this one learned
    other, _ = _client(server)
    assert complete_json(other, MSG, Pet).name == "Pixel"
    assert server.requests[-1]["response_format"]["type"] == "json_object" and len(server.requests) == 4


def test_a_500_that_does_not_name_response_format_is_retried_not_a_refusal(server):
    server.script = [{"status": 500, "body": {"error": "overloaded"}}, '{"name": "Pixel", "legs": 4}']
    llm, sleeps = _client(server)
    assert complete_json(llm, MSG, Pet).name == "Pixel"
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema", "json_schema"]
    assert sleeps == [0.25] and llm.schema_dialect == "json_schema"


class Note(BaseModel):
    text: str = Field(min_length=1, max_length=6000)
    tags: list[str] = Field(default_factory=list, max_length=2)


def test_length_bounds_stay_with_the_client_not_the_servers_grammar(server):
    """llama.cpp compiles a maxLength into nested rules (6,000 crashed llama-cpp-python's
    server): the schema sent has none, the client still rejects a reply past them."""
    server.script = ['{"text": "ok", "tags": ["a", "b", "c"]}', '{"text": "ok", "tags": ["a"]}']
    llm, _ = _client(server)
    assert complete_json(llm, MSG, Note).tags == ["a"]
    sent = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert sent["properties"]["text"] == {"minLength": 1, "title": "Text", "type": "string"}
    assert "maxItems" not in sent["properties"]["tags"]
    assert "tags: List should have at most 2 items" in server.requests[1]["messages"][-1]["content"]


def test_malformed_output_is_repaired_once(server):
    server.script = ["Sure! here it is: {name: Pixel}", '```json\n{"name": "Pixel", "legs": 4}\n```']
    llm, _ = _client(server)
    assert complete_json(llm, MSG, Pet) == Pet(name="Pixel", legs=4)
    repair = server.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "Sure! here it is: {name: Pixel}"}
    assert "rejected: not valid JSON" in repair[-1]["content"]
    server.script = ['{"name": "Rex", "legs": 3}']
    assert complete_json(llm, MSG, Pet).legs == 3
    assert llm.outcomes == {"Pet": {"repaired": 1, "valid": 1}}


def test_output_still_invalid_after_repair_raises_with_the_reason(server):
    server.script = ['{"name": "Pixel"}', '{"name": "Pixel", "legs": "many"}']
    llm, _ = _client(server)
    with pytest.raises(LLMOutputError, match="legs"):
        complete_json(llm, MSG, Pet)
    assert len(server.requests) == 2
    assert llm.outcomes == {"Pet": {"invalid": 1}}


def test_retries_on_5xx_and_429_with_backoff_and_retry_after(server):
    server.script = [{"status": 503}, {"status": 429, "headers": {"Retry-After": "1.5"}}, "ok"]
    llm, sleeps = _client(server, retries=3)
    assert llm.complete(MSG) == "ok"
    assert len(server.requests) == 3
    assert sleeps == [0.25, 1.5]  # backoff 0.25 * 2**0, then the server's Retry-After
    assert llm.usage["retries"] == 2


def test_gives_up_after_the_retries(server):
    server.script = [{"status": 500}] * 3
    llm, sleeps = _client(server, retries=2)
    with pytest.raises(LLMError, match="failed after 3 attempts: HTTP 500"):
        llm.complete(MSG)
    assert len(server.requests) == 3 and sleeps == [0.25, 0.5]


def test_client_errors_are_not_retried(server):
    server.script = [{"status": 401}]
    llm, _ = _client(server)
    with pytest.raises(LLMError, match="refused the request: HTTP 401"):
        llm.complete(MSG)
    assert len(server.requests) == 1


def test_a_timeout_is_retried(server):
    server.script = [{"delay": 2.0, "content": "too late"}, "in time"]
    llm, _ = _client(server, timeout=0.3)
    assert llm.complete(MSG) == "in time"
    assert len(server.requests) == 2


def test_timeouts_exhaust_the_retries(server):
    server.script = [{"delay": 2.0, "content": "late"}] * 2
    llm, _ = _client(server, timeout=0.3, retries=1)
    with pytest.raises(LLMError, match="timed out after 0.3s"):
        llm.complete(MSG)


def test_concurrency_limit_bounds_requests_in_flight(server):
    server.responder = lambda body: {"delay": 0.2, "content": "ok"}
    llm, _ = _client(server, concurrency=2)
    out: list[str] = []
    threads = [threading.Thread(target=lambda: out.append(llm.complete(MSG))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == ["ok"] * 6
    assert server.max_inflight == 2


def test_unreachable_server_is_an_llm_error():
    cfg = RoleConfig(
        role="reflect",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        api_key=None,
        timeout_s=1,
        max_retries=1,
        backoff_s=0,
        concurrency=1,
        json_mode="auto",
    )
    with pytest.raises(LLMError, match="reflect LLM at http://127.0.0.1:9/v1 failed after 2 attempts"):
        OpenAICompatLLM(cfg, sleep=lambda s: None).complete(MSG)


def test_parse_json_object_variants():
    assert parse_json_object('{"a": 1}') == {"a": 1}
    assert parse_json_object('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_object('Here: {"a": {"b": 2}} done') == {"a": {"b": 2}}
    # a raw newline inside a string, as llama.cpp's JSON grammar lets through
    assert parse_json_object('{"summary": "Ana moved.\nShe runs."}') == {"summary": "Ana moved.\nShe runs."}
    with pytest.raises(ValueError, match="expected a JSON object"):
        parse_json_object("[1, 2]")
    with pytest.raises(ValueError, match="empty reply"):
        parse_json_object("  ")


def test_build_llm_per_role_settings(monkeypatch):
    assert build_llm(Settings(), "reflect") is None
    s = Settings(
        llm={
            "base_url": "http://a/v1",
            "model": "small",
            "reflect": {"model": "large", "api_key": "k2"},
            "qa": {"base_url": "http://b/v1/"},
            "api_key": "k1",
        }
    )
    assert role_config(s, "retain").model == "small"
    r = role_config(s, "reflect")
    assert (r.model, r.base_url, r.api_key) == ("large", "http://a/v1", "k2")
    assert role_config(s, "qa").base_url == "http://b/v1"
    assert "k1" not in repr(role_config(s, "retain")) and "k1" not in repr(s)
    llm = build_llm(s, "consolidation")
    assert isinstance(llm, OpenAICompatLLM) and llm.model == "small"
    llm.close()
    with pytest.raises(ConfigError, match="unknown LLM role 'chat'"):
        build_llm(s, "chat")
    with pytest.raises(ConfigError, match="MEMLANE_LLM__MODEL"):
        build_llm(Settings(llm={"base_url": "http://a/v1"}), "retain")
    monkeypatch.setenv("MEMLANE_LLM__BASE_URL", "http://env/v1")
    monkeypatch.setenv("MEMLANE_LLM__MODEL", "m0")
    monkeypatch.setenv("MEMLANE_LLM__RETAIN__MODEL", "m1")
    env = Settings()
    assert role_config(env, "retain").model == "m1" and role_config(env, "reflect").model == "m0"
    assert json.loads(env.model_dump_json())["llm"]["base_url"] == "http://env/v1"
