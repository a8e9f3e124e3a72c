"""Bank-affine routing at the HTTP proxy.

Serve routes a request tagged with a multiplexed model id to a replica that registered that id
(serve/bank_host.py registers the banks it holds). HTTP clients tag a request with the
``serve_multiplexed_model_id`` header; Memlane's clients should not have to know that, so the
proxy adds it: this module's :func:`proxy_middlewares` is the proxy's callback
(``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=serve.routing:proxy_middlewares``, set by
``memlane serve`` and in infra/rayservice-memlane.yaml), and its middleware tags every
``/v1/banks/{bank_id}/...`` request with its bank id, and every request of the Hindsight-
compatible surface that names a bank (``/hindsight/v1/default/banks/{bank_id}/...``,
``/hindsight/mcp/{bank_id}/``) with the Memlane id of that bank (serve/hindsight/bank_ids.py).
A header the client sent wins.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.middleware import Middleware

from memlane.records import BANK_ID_PATTERN

HEADER = b"serve_multiplexed_model_id"
CALLBACK = "serve.routing:proxy_middlewares"
_BANK_PATH = re.compile(r"^/v1/banks/(" + BANK_ID_PATTERN.strip("^$") + r")(?:/|$)")
# ASGI's path is percent-decoded: a Hindsight bank id is the whole segment
_HINDSIGHT_PATH = re.compile(r"^/hindsight/(?:v1/default/banks|mcp)/([^/]+)(?:/|$)")


def bank_of(path: str) -> str | None:
    """The (Memlane) bank id a request path names, if any."""
    m = _BANK_PATH.match(path)
    if m:
        return m.group(1)
    m = _HINDSIGHT_PATH.match(path)
    if m is None:
        return None
    from serve.hindsight.bank_ids import BankIdError, to_memlane

    try:
        return to_memlane(m.group(1))
    except BankIdError:
        return None


class BankAffinity:
    """ASGI middleware: tag bank requests with their bank as the multiplexed model id."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            bank = bank_of(scope.get("path", ""))
            headers = scope.get("headers") or []
            if bank is not None and not any(k.lower().replace(b"-", b"_") == HEADER for k, _ in headers):
                scope = {**scope, "headers": [*headers, (HEADER, bank.encode())]}
        await self.app(scope, receive, send)


def proxy_middlewares() -> list[Middleware]:
    """The proxy's middlewares: bank affinity unless ``MEMLANE_SERVE__BANK_AFFINITY=false``."""
    from memlane.settings import Settings

    return [Middleware(BankAffinity)] if Settings().serve.bank_affinity else []
