"""A fake OpenAI-compatible chat server for tests: a small FastAPI app on 127.0.0.1, over real
HTTP (uvicorn in a thread), that answers ``POST /v1/chat/completions`` from a script.

A script entry (or what a responder function returns for a request body) is one of:

* a ``str``: a 200 completion with that content;
* a ``dict`` with optional keys ``status`` (HTTP status, default 200), ``content``,
  ``delay`` (seconds to wait before answering: timeouts), ``headers``, ``body`` (raw JSON
  body instead of a completion), ``finish_reason``.

Every request body is recorded in ``requests`` in arrival order.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any, Callable

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


def completion(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake",
        "choices": [
            {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class FakeLLMServer:
    """Start with :meth:`start` (or as a context manager); ``base_url`` ends in ``/v1``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.inflight = 0
        self.max_inflight = 0
        self.script: list[Any] = []
        self.responder: Callable[[dict[str, Any]], Any] | None = None
        self._lock = threading.Lock()
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            with self._lock:
                self.requests.append(body)
                self.headers.append(dict(request.headers))
                self.inflight += 1
                self.max_inflight = max(self.max_inflight, self.inflight)
                if self.script:
                    entry = self.script.pop(0)
                elif self.responder is not None:
                    entry = None
                else:
                    entry = {"status": 500, "body": {"error": "script exhausted"}}
            try:
                if entry is None:
                    entry = self.responder(body)
                if isinstance(entry, str):
                    entry = {"content": entry}
                if entry.get("delay"):
                    await asyncio.sleep(entry["delay"])
            finally:
                with self._lock:
                    self.inflight -= 1
            status = entry.get("status", 200)
            payload = entry.get("body")
            if payload is None:
                payload = (
                    completion(entry.get("content", ""), entry.get("finish_reason", "stop"))
                    if status == 200
                    else {"error": {"message": f"fake error {status}"}}
                )
            return JSONResponse(payload, status_code=status, headers=entry.get("headers"))

        self.app = app
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeLLMServer:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # helpers for assertions ---------------------------------------------------------------
    def user_texts(self) -> list[str]:
        return [m["content"] for r in self.requests for m in r["messages"] if m["role"] == "user"]


def as_json(obj: Any) -> str:
    return json.dumps(obj)


_TURN_LINE = None


def turn_lines(user_text: str) -> list[tuple[str, str, str]]:
    """(turn id, date, 'Speaker: text') of each '[id] (date time) Speaker: text' line of an
    extraction prompt."""
    import re

    global _TURN_LINE
    if _TURN_LINE is None:
        _TURN_LINE = re.compile(r"^\[([^\]]+)\] \((\d{4}-\d{2}-\d{2}) [\d:]+\) (.*)$", re.M)
    return _TURN_LINE.findall(user_text)


def extraction_reply(user_text: str, owner: str = "") -> str:
    """A valid extraction for a prompt: fact 0 from the first turn, fact 1 from the others
    (caused by fact 0), dated on the turns' own dates."""
    turns = turn_lines(user_text)
    facts = []
    groups = [turns[:1], turns[1:]] if len(turns) > 1 else [turns]
    for i, group in enumerate(groups):
        speaker = group[0][2].split(":", 1)[0]
        facts.append(
            {
                "what": "; ".join(t[2] for t in group),
                "who": [speaker],
                "fact_type": "experience" if speaker == owner else "world",
                "occurred_start": group[0][1],
                "occurred_end": group[-1][1],
                "entities": [{"name": speaker, "type": "PERSON"}],
                "source_turn_ids": [t[0] for t in group],
                "causal_relations": (
                    [{"target_index": 0, "relation": "caused_by", "strength": 0.8}] if i else []
                ),
            }
        )
    return json.dumps({"facts": facts})
