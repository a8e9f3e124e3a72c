"""The per-key token bucket (serve/ratelimit.py) on a scripted clock."""

from __future__ import annotations

from serve.ratelimit import RateLimiter, retry_after_header


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_key_gets_its_burst_then_its_rate():
    clock = Clock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.take("a") for _ in range(3)] == [None, None, None]
    wait = limiter.take("a")
    assert wait is not None and abs(wait - 0.5) < 1e-9  # one token takes 1/rate seconds
    clock.t += 0.5
    assert limiter.take("a") is None
    assert limiter.take("a") is not None
    clock.t += 10  # refills to the burst, not beyond
    assert [limiter.take("a") for _ in range(4)][:3] == [None, None, None]
    assert limiter.take("a") is not None


def test_keys_have_separate_buckets_and_zero_rate_is_off():
    clock = Clock()
    limiter = RateLimiter(rate=1.0, burst=1, clock=clock)
    assert limiter.take("a") is None and limiter.take("a") is not None
    assert limiter.take("b") is None
    off = RateLimiter(rate=0, burst=1, clock=clock)
    assert all(off.take("a") is None for _ in range(1000))


def test_idle_buckets_are_dropped():
    clock = Clock()
    limiter = RateLimiter(rate=1.0, burst=1, clock=clock)
    for key in ("a", "b", "c"):
        limiter.take(key)
    clock.t += RateLimiter.IDLE_S + 1
    limiter.take("d")
    assert set(limiter._buckets) == {"d"}


def test_retry_after_is_whole_seconds_at_least_one():
    assert [retry_after_header(x) for x in (0.01, 0.5, 1.0, 1.2, 7.99)] == ["1", "1", "1", "2", "8"]


def test_a_key_policy_overrides_the_service_rate():
    clock = Clock()
    limiter = RateLimiter(rate=100.0, burst=100, clock=clock)
    assert [limiter.take("slow", 1.0, 2) for _ in range(3)][:2] == [None, None]
    assert limiter.take("slow", 1.0, 2) is not None
    assert all(limiter.take("fast") is None for _ in range(100))
