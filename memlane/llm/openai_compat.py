"""A client for any OpenAI-compatible chat completions endpoint (``POST {base}/chat/completions``).

Robustness, all bounded:

* a timeout per attempt (``llm_timeout_s``) and at most ``llm_max_retries`` retries on timeouts,
  connection errors, 429 and 5xx, with exponential backoff (``llm_backoff_s``, doubled each time,
  capped at 30 s; a ``Retry-After`` in seconds is honoured up to the same cap);
* at most ``llm_concurrency`` requests in flight per client (threads share one client);
* JSON-schema structured output (``response_format: json_schema``) where the server supports
  it. In ``auto`` mode a server that answers the first schema request with 400/422 is assumed
  not to support it: the request is repeated with the schema written into the system message
  instead, and this client does that from then on (``schema_supported`` becomes False). The
  caller validates the JSON either way (memlane/llm/structured.py).
"""

from __future__ import annotations

import json
import logging
import threading
import time
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
        #: None until a schema request succeeded or was refused (``auto`` mode).
        self.schema_supported: bool | None = {"schema": True, "prompt": False}.get(cfg.json_mode)
        #: Totals over this client's life: requests, retries, prompt and completion tokens.
        self.usage = {"requests": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0}

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
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_schema is None:
            return self._post(body)
        if self.schema_supported is not False:
            schema_body = {
                **body,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": str(json_schema.get("title") or "reply"), "schema": json_schema},
                },
            }
            try:
                text = self._post(schema_body, refusable=self.schema_supported is None)
                self.schema_supported = True
                return text
            except _Refused as exc:
                log.warning(
                    "%s refused JSON-schema output (%s); using prompt-side JSON from now on",
                    self.cfg.base_url,
                    exc,
                )
                self.schema_supported = False
        body["messages"] = _with_instruction(body["messages"], schema_instruction(json_schema))
        return self._post(body)

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
                if refusable and resp.status_code in (400, 422):
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
    """The server answered a JSON-schema request with 400/422."""


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
