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
