"""Structured replies: ask for JSON matching a pydantic model, validate, repair once.

Whether or not the server enforced the schema, the reply is parsed and validated here (a server
may ignore ``response_format``, a reply may be cut at ``max_tokens``). A reply that fails is sent
back once with the reason ("repair"); a second failure raises LLMOutputError with the reason,
and the caller decides what to fall back to.
"""

from __future__ import annotations

import json
import re
from typing import Callable, TypeVar

from pydantic import BaseModel, ValidationError

from memlane.llm.errors import LLMOutputError

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def parse_json_object(text: str) -> dict:
    """The JSON object in ``text``: the whole text, a fenced block, or the span from the first
    '{' to the last '}'. Raises ValueError naming what is wrong."""
    if not text or not text.strip():
        raise ValueError("empty reply")
    fenced = _FENCE.match(text)
    candidates = [fenced.group(1)] if fenced else [text]
    lo, hi = text.find("{"), text.rfind("}")
    if lo != -1 and hi > lo:
        candidates.append(text[lo : hi + 1])
    err = None
    for cand in candidates:
        try:
            value = json.loads(cand)
        except ValueError as exc:
            err = exc
            continue
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        return value
    raise ValueError(f"not valid JSON ({err})")


def validate_reply(text: str, model: type[T], check: Callable[[T], None] | None = None) -> T:
    """Parse and validate one reply; ValueError with a one-line reason when it does not pass."""
    data = parse_json_object(text)
    try:
        value = model.model_validate(data)
    except ValidationError as exc:
        parts = []
        for e in exc.errors()[:5]:
            where = ".".join(str(x) for x in e["loc"]) or "reply"
            parts.append(f"{where}: {e['msg']}")
        raise ValueError("; ".join(parts)) from None
    if check is not None:
        check(value)
    return value


def complete_json(
    llm,
    messages: list[dict[str, str]],
    model: type[T],
    *,
    check: Callable[[T], None] | None = None,
    max_tokens: int = 1024,
    temperature: float = 0.0,
) -> T:
    """Ask ``llm`` for a reply matching ``model`` (and ``check``, which raises ValueError).
    One repair round; raises LLMOutputError naming the reason after that. Transport errors
    (LLMError) pass through."""
    schema = model.model_json_schema()
    text = llm.complete(messages, json_schema=schema, max_tokens=max_tokens, temperature=temperature)
    try:
        return validate_reply(text, model, check)
    except ValueError as exc:
        first = str(exc)
    repair = [
        *messages,
        {"role": "assistant", "content": text[:4000]},
        {
            "role": "user",
            "content": f"That reply was rejected: {first}. Reply again with only the corrected JSON object.",
        },
    ]
    text = llm.complete(repair, json_schema=schema, max_tokens=max_tokens, temperature=temperature)
    try:
        return validate_reply(text, model, check)
    except ValueError as exc:
        raise LLMOutputError(
            f"invalid {model.__name__} after one repair: {exc} (first reply: {first})"
        ) from None
