"""Per-key request rate limits: a token bucket per API key in each Ingress replica.

A key may make ``burst`` requests at once and ``rate`` per second sustained; past that it gets
HTTP 429 with ``Retry-After`` (whole seconds, rounded up). The buckets live in the replica, so
with N Ingress replicas a key's ceiling is N x rate: a bound on abuse, not a billing meter
(an exact global count would cost a round trip to a shared actor on every request).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from serve.auth import Authenticator, Principal
from serve.errors import APIError


class RateLimiter:
    """Token buckets by key. ``rate`` <= 0 turns limiting off."""

    # Buckets of keys idle this long are full again and are dropped, so a replica's memory is
    # bounded by the keys active in the last minute.
    IDLE_S = 60.0

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = float(rate)
        self.burst = max(1, int(burst))
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._swept = clock()

    def take(self, key: str, rate: float | None = None, burst: int | None = None) -> float | None:
        """Spend one request of ``key``: None when allowed, else seconds until one is.
        ``rate`` and ``burst`` override the limiter's for this key (a key's own policy)."""
        rate = self.rate if rate is None else float(rate)
        cap = float(self.burst if burst is None else max(1, int(burst)))
        if rate <= 0:
            return None
        now = self._clock()
        tokens, at = self._buckets.get(key, (cap, now))
        tokens = min(cap, tokens + (now - at) * rate)
        if now - self._swept > self.IDLE_S:
            self._sweep(now)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return None
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / rate

    def _sweep(self, now: float) -> None:
        self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < self.IDLE_S}
        self._swept = now


def retry_after_header(wait_s: float) -> str:
    """``Retry-After`` in whole seconds, at least 1 (RFC 9110 allows no fractions)."""
    return str(max(1, math.ceil(wait_s)))


def admit(auth: Authenticator, limiter: RateLimiter, authorization: str | None) -> Principal:
    """Authenticate the Authorization header and spend one request of the key's rate: the
    gate of every keyed route, /v1 and /mcp alike. Raises APIError 401 or 429."""
    who = auth.authenticate(authorization)
    wait = limiter.take(who.key_id, who.rate_limit_per_s, who.rate_limit_burst)
    if wait is not None:
        rate = limiter.rate if who.rate_limit_per_s is None else who.rate_limit_per_s
        burst = limiter.burst if who.rate_limit_burst is None else who.rate_limit_burst
        raise APIError(
            429,
            "rate_limited",
            f"this API key made more than {rate:g} requests per second (bursts of {burst}); retry later",
            "Authorization",
            {"Retry-After": retry_after_header(wait)},
        )
    return who
