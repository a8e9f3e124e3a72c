"""Schemathesis checks of tests/serving/test_fuzz.py, loaded by the schemathesis CLI through
``SCHEMATHESIS_HOOKS=tests.serving.fuzz_checks``.

- ``error_body_shape``: every 4xx and 5xx answer is the service's error body,
  ``{"error": {"code", "message", "field"}}`` (serve/errors.py), JSON, with string code and
  message and a string-or-null field.
- ``access_refused``: with ``MEMLANE_FUZZ_EXPECT_REFUSED`` set, ``all`` (the run without a
  key: every keyed operation) or ``bank`` (the run with a key lacking the bank: every
  operation on a bank), no such operation answers anything but a refusal: 401, 403, 405
  (a method the path does not take), 413 (a body over the limit) or 422 (a malformed path
  parameter is refused before the bank is looked at). Never 404: an existing bank outside the
  key's banks must not be told apart from a missing one.
"""

from __future__ import annotations

import json
import os

import schemathesis

_REFUSED = {401, 403, 405, 413, 422}


@schemathesis.check
def error_body_shape(ctx, response, case) -> bool | None:
    if response.status_code < 400:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        raise AssertionError(f"{response.status_code} body is not JSON: {response.content[:200]!r}") from None
    error = body.get("error") if isinstance(body, dict) else None
    assert isinstance(error, dict), f"{response.status_code} body has no 'error' object: {body!r:.300}"
    assert {"code", "message", "field"} <= set(error), f"error lacks code/message/field: {error!r:.300}"
    assert isinstance(error["code"], str) and error["code"], f"error.code: {error['code']!r}"
    assert isinstance(error["message"], str) and error["message"], f"error.message: {error['message']!r}"
    assert error["field"] is None or isinstance(error["field"], str), f"error.field: {error['field']!r}"
    assert response.headers.get("content-type", [""])[0].startswith("application/json")
    return True


@schemathesis.check
def access_refused(ctx, response, case) -> bool | None:
    scope = os.environ.get("MEMLANE_FUZZ_EXPECT_REFUSED")
    if not scope:
        return None
    if not case.operation.definition.raw.get("security"):
        return None  # /v1/health needs no key
    if scope == "bank" and "{bank_id}" not in case.operation.path:
        return None  # GET /v1/banks, POST /v1/rerank: any valid key may use them
    assert response.status_code in _REFUSED, (
        f"{case.operation.label} answered {response.status_code} to a caller without access"
    )
    return True
