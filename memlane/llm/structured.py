"""Structured replies: ask for JSON matching a pydantic model, validate, repair once.

Whether or not the server enforced the schema, the reply is parsed and validated here (a server
may ignore ``response_format``, a reply may be cut at ``max_tokens``). A reply that fails is sent
back once with the reason ("repair"); a second failure raises LLMOutputError with the reason,
and the caller decides what to fall back to.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, ValidationError

from memlane.llm.errors import LLMError, LLMOutputError

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")

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
            # strict=False: raw control characters (a newline) inside strings are accepted.
            # llama.cpp's JSON grammar lets them through: 7 of SmolLM2-135M's 34 tree
            # summaries in one run failed strict parsing on one (benchmarks/llm_paths.py,
            # 26 Nov 2026).
            value = json.loads(cand, strict=False)
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
    (LLMError) pass through. A client with a ``record(kind, outcome)`` method hears the outcome
    of each call by the reply's model name: valid, repaired, invalid (after the repair) or
    error (the transport)."""
    return _complete(
        llm,
        messages,
        model.model_json_schema(),
        lambda text: validate_reply(text, model, check),
        model.__name__,
        max_tokens=max_tokens,
        temperature=temperature,
    )


def check_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` if it is a JSON Schema (its own draft, else 2020-12); ValueError naming what
    is wrong otherwise."""
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    return schema


def complete_schema(
    llm,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    *,
    max_tokens: int = 1024,
    temperature: float = 0.0,
) -> dict[str, Any]:
    """As :func:`complete_json`, for a caller's JSON Schema given as a dict (reflect's
    ``response_schema``): the reply is the JSON object that validates against it."""
    import jsonschema

    validator = jsonschema.validators.validator_for(check_schema(schema))(schema)

    def validate(text: str) -> dict[str, Any]:
        value = parse_json_object(text)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))[:5]
        if errors:
            raise ValueError(
                "; ".join(f"{'.'.join(map(str, e.path)) or 'reply'}: {e.message}" for e in errors)
            )
        return value

    return _complete(
        llm, messages, schema, validate, "response_schema", max_tokens=max_tokens, temperature=temperature
    )


def _complete(
    llm,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    validate: Callable[[str], V],
    name: str,
    *,
    max_tokens: int,
    temperature: float,
) -> V:
    """Ask with ``schema``, validate the reply; one repair round, then LLMOutputError."""
    record = getattr(llm, "record", None)  # the client's outcome counts (OpenAICompatLLM.outcomes)

    def ask(msgs: list[dict[str, str]]) -> str:
        try:
            return llm.complete(msgs, json_schema=schema, max_tokens=max_tokens, temperature=temperature)
        except LLMError:
            if record:
                record(name, "error")
            raise

    text = ask(messages)
    try:
        value = validate(text)
    except ValueError as exc:
        first = str(exc)
    else:
        if record:
            record(name, "valid")
        return value
    repair = [
        *messages,
        {"role": "assistant", "content": text[:4000]},
        {
            "role": "user",
            "content": f"That reply was rejected: {first}. Reply again with only the corrected JSON object.",
        },
    ]
    text = ask(repair)
    try:
        value = validate(text)
    except ValueError as exc:
        if record:
            record(name, "invalid")
        raise LLMOutputError(f"invalid {name} after one repair: {exc} (first reply: {first})") from None
    if record:
        record(name, "repaired")
    return value
