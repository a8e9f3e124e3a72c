"""API keys: ``MEMLANE_SERVE__API_KEYS`` maps each key to the banks it may use (a list, or "*").

Keys come as ``Authorization: Bearer KEY``. A missing or unknown key is 401; a known key asking
for a bank outside its list is 403, whatever the bank holds, so a key cannot even learn whether
another user's bank exists. ``MEMLANE_SERVE__AUTH=off`` (local development only) lets every request
use every bank.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from serve.errors import APIError

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


@dataclass(frozen=True)
class Principal:
    """Who is calling: the banks the key may use (None: all) and the key's own rate limit
    (None: the service's)."""

    key_id: str
    banks: frozenset[str] | None
    rate_limit_per_s: float | None = None
    rate_limit_burst: int | None = None

    def can_use(self, bank_id: str) -> bool:
        return self.banks is None or bank_id in self.banks

    def check(self, bank_id: str) -> None:
        if not self.can_use(bank_id):
            raise APIError(403, "forbidden", f"this API key may not use bank {bank_id!r}", "bank_id")


class Authenticator:
    """Resolves the Authorization header against the configured keys."""

    def __init__(self, api_keys: Mapping[str, Any], enabled: bool = True) -> None:
        """``api_keys``: key -> banks (a list or "*") or a KeyPolicy (banks and a rate)."""
        self.enabled = enabled
        self._keys: list[tuple[bytes, Principal]] = []
        for i, (key, value) in enumerate(api_keys.items()):
            banks = getattr(value, "banks", value)
            scope = None if banks == "*" else frozenset(banks)
            principal = Principal(
                f"key{i}",
                scope,
                getattr(value, "rate_limit_per_s", None),
                getattr(value, "rate_limit_burst", None),
            )
            self._keys.append((key.encode(), principal))

    def authenticate(self, header: str | None) -> Principal:
        if not self.enabled:
            return Principal("auth-off", None)
        if not header:
            raise APIError(
                401,
                "unauthorized",
                "missing API key: send 'Authorization: Bearer KEY'",
                "Authorization",
                _CHALLENGE,
            )
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise APIError(
                401,
                "unauthorized",
                "the Authorization header must be 'Bearer KEY'",
                "Authorization",
                _CHALLENGE,
            )
        given = token.strip().encode()
        found = None
        for key, principal in self._keys:  # constant time per key: no timing oracle
            if hmac.compare_digest(key, given):
                found = principal
        if found is None:
            raise APIError(401, "unauthorized", "unknown API key", "Authorization", _CHALLENGE)
        return found
