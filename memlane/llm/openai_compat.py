"""A client for any OpenAI-compatible chat completions endpoint (``POST {base}/chat/completions``).

Robustness, all bounded:

* a timeout per attempt (``llm_timeout_s``) and at most ``llm_max_retries`` retries on timeouts,
  connection errors, 429 and 5xx, with exponential backoff (``llm_backoff_s``, doubled each time,
  capped at 30 s; a ``Retry-After`` in seconds is honoured up to the same cap);
* at most ``llm_concurrency`` requests in flight per client (threads share one client);
* JSON-schema structured output where the server supports it, in one of two dialects:
  OpenAI's ``response_format: {type: json_schema, json_schema: {schema}}`` (OpenAI, vLLM,
  llama.cpp's own server) or ``{type: json_object, schema}`` (llama-cpp-python's server, which
  rejects the first with an HTTP 500 naming ``response_format``). In ``auto`` mode a refusal of
  one dialect (400/422, or a 5xx whose body names ``response_format``) moves to the next, and
  past the last the schema is written into the system message instead; what a server refused
  is remembered by base URL for every client of the process (``schema_dialect`` is the one
  that worked; ``schema_supported`` is False once only the prompt is left). Length bounds are
  left to the caller, which validates the JSON either way (memlane/llm/structured.py).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from typing import Any, Callable

import httpx

from memlane.llm.config import RoleConfig
from memlane.llm.errors import LLMError

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def schema_instruction(json_schema: dict) -> str:
    """The prompt-side stand-in for structured output."""
    return (
        "Reply with exactly one JSON object and nothing else (no prose, no code fence). "
        "It must match this JSON schema:\n" + json.dumps(json_schema, separators=(",", ":"))
    )


class OpenAICompatLLM:
    """:class:`~memlane.interfaces.LLM` over HTTP. Thread-safe; ``close()`` releases the pool."""

    def __init__(self, cfg: RoleConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.cfg = cfg
        self.model = cfg.model
        self._sleep = sleep
        headers = {"Content-Type": "application/json"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        self._http = httpx.Client(
            base_url=cfg.base_url,
            headers=headers,
            timeout=httpx.Timeout(cfg.timeout_s),
            limits=httpx.Limits(max_connections=cfg.concurrency),
        )
        self._slots = threading.BoundedSemaphore(cfg.concurrency)
        self._lock = threading.Lock()
        #: The structured-output dialects still to try, best first ("prompt" only: none works);
        #: what another client of this process learned about the same server is reused.
        known = _DIALECTS_LEFT.get(cfg.base_url, DIALECTS) or (DIALECTS if cfg.json_mode == "schema" else ())
        self._dialects: list[str] = list(known) if cfg.json_mode != "prompt" else []
        #: None until a schema request succeeded or every dialect was refused (``auto`` mode).
        self.schema_supported: bool | None = {"schema": True, "prompt": False}.get(cfg.json_mode)
        #: The dialect that worked (None until one did).
        self.schema_dialect: str | None = None
        #: Totals over this client's life: requests, retries, prompt and completion tokens.
        self.usage = {"requests": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0}
        #: Structured replies by kind (the reply model's name, e.g. ExtractionReply) and outcome:
        #: valid, repaired, invalid, error (memlane/llm/structured.py records them).
        self.outcomes: dict[str, Counter[str]] = {}

    def __repr__(self) -> str:
        return f"OpenAICompatLLM({self.cfg.role}: {self.cfg.model} at {self.cfg.base_url})"

    def close(self) -> None:
        self._http.close()

    # the LLM protocol ---------------------------------------------------------------------------
    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        json_schema: dict | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> str:
        """The assistant message's text. Raises LLMError when the server cannot be reached or
        refuses the request after the retries."""
        if self.cfg.max_tokens is not None:
            max_tokens = min(max_tokens, self.cfg.max_tokens)
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_schema is None:
            return self._post(body)
        while self._dialects:
            dialect = self._dialects[0]
            schema_body = {**body, "response_format": response_format(dialect, json_schema)}
            # "schema" mode insists on structured output, but may still learn the dialect
            refusable = self.schema_dialect is None and (
                self.cfg.json_mode == "auto" or len(self._dialects) > 1
            )
            try:
                text = self._post(schema_body, refusable=refusable)
            except _Refused as exc:
                with self._lock:
                    if self._dialects and self._dialects[0] == dialect:
                        self._dialects.pop(0)
                    left = list(self._dialects)
                    _DIALECTS_LEFT[self.cfg.base_url] = tuple(left)
                log.warning(
                    "%s refused %s structured output (%s); %s",
                    self.cfg.base_url,
                    dialect,
                    exc,
                    f"trying {left[0]}" if left else "using prompt-side JSON from now on",
                )
                if not left:
                    self.schema_supported = False
                continue
            self.schema_supported = True
            self.schema_dialect = dialect
            return text
        body["messages"] = _with_instruction(body["messages"], schema_instruction(json_schema))
        return self._post(body)

    def record(self, kind: str, outcome: str) -> None:
        """Count one structured reply's outcome (called by complete_json)."""
        with self._lock:
            self.outcomes.setdefault(kind, Counter())[outcome] += 1

    # transport -----------------------------------------------------------------------------------
    def _post(self, body: dict[str, Any], *, refusable: bool = False) -> str:
        attempts = self.cfg.max_retries + 1
        last = ""
        for attempt in range(attempts):
            if attempt:
                with self._lock:
                    self.usage["retries"] += 1
            delay = None
            try:
                with self._slots:
                    resp = self._http.post("/chat/completions", json=body)
            except httpx.TimeoutException:
                last = f"timed out after {self.cfg.timeout_s:g}s"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    return self._content(resp)
                last = f"HTTP {resp.status_code}: {' '.join(resp.text.split())[:300]}"
                if refusable and _refuses_format(resp):
                    raise _Refused(last)
                if resp.status_code not in _RETRY_STATUS:
                    raise LLMError(f"{self.cfg.role} LLM at {self.cfg.base_url} refused the request: {last}")
                delay = _retry_after(resp)
            if attempt + 1 < attempts:
                backoff = min(MAX_BACKOFF_S, self.cfg.backoff_s * (2**attempt))
                wait = min(MAX_BACKOFF_S, delay) if delay is not None else backoff
                log.info(
                    "%s LLM attempt %d/%d failed (%s); retrying in %.2fs",
                    self.cfg.role,
                    attempt + 1,
                    attempts,
                    last,
                    wait,
                )
                self._sleep(wait)
        raise LLMError(f"{self.cfg.role} LLM at {self.cfg.base_url} failed after {attempts} attempts: {last}")

    def _content(self, resp: httpx.Response) -> str:
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(
                f"{self.cfg.role} LLM at {self.cfg.base_url} sent no chat completion "
                f"({type(exc).__name__}: {exc})"
            ) from None
        usage = data.get("usage") or {}
        with self._lock:
            self.usage["requests"] += 1
            for key in ("prompt_tokens", "completion_tokens"):
                if isinstance(usage.get(key), int):
                    self.usage[key] += usage[key]
        if choice.get("finish_reason") == "length":
            log.info("%s LLM reply cut at max_tokens", self.cfg.role)
        return text if isinstance(text, str) else ""


class _Refused(Exception):
    """The server refused a structured-output request's ``response_format``."""


# Structured-output dialects, tried in this order in "auto" mode.
DIALECTS = ("json_schema", "json_object")
# base URL -> the dialects its server has not refused, shared by this process's clients (one
# per role and engine): each would otherwise pay one refused request to learn it.
_DIALECTS_LEFT: dict[str, tuple[str, ...]] = {}


# Length bounds a server need not enforce: the client validates every reply against the full
# schema anyway. llama.cpp turns a maxLength into that many nested optional rules: at 6,000
# (the tree's Summary) llama-cpp-python 0.3.36 failed to parse the grammar and then crashed
# its whole server with a segmentation fault at the next request (seen here, 26 Nov 2026).
_CLIENT_SIDE_BOUNDS = ("maxLength", "maxItems")


def server_schema(schema: Any) -> Any:
    """``schema`` without the bounds the client checks itself (``_CLIENT_SIDE_BOUNDS``)."""
    if isinstance(schema, dict):
        return {k: server_schema(v) for k, v in schema.items() if k not in _CLIENT_SIDE_BOUNDS}
    if isinstance(schema, list):
        return [server_schema(v) for v in schema]
    return schema


def response_format(dialect: str, json_schema: dict) -> dict[str, Any]:
    """The ``response_format`` of a request in ``dialect`` for ``json_schema`` (its length
    bounds left to the client's validation)."""
    json_schema = server_schema(json_schema)
    if dialect == "json_schema":
        name = str(json_schema.get("title") or "reply")
        return {"type": "json_schema", "json_schema": {"name": name, "schema": json_schema}}
    return {"type": "json_object", "schema": json_schema}


def _refuses_format(resp: httpx.Response) -> bool:
    """400/422 (OpenAI, vLLM), or a 5xx whose body names ``response_format``: llama-cpp-python's
    server answers a request its schema does not accept with HTTP 500 and the validation error
    (seen with 0.3.36)."""
    if resp.status_code in (400, 422):
        return True
    return resp.status_code >= 500 and "response_format" in resp.text


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: use the backoff instead


def _with_instruction(messages: list[dict[str, str]], instruction: str) -> list[dict[str, str]]:
    """Append the instruction to the system message (or add one)."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{instruction}"
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out
