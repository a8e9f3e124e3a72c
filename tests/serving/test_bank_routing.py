"""The parts of bank-affine serving that need no running service: the proxy middleware that
tags bank requests (serve/routing.py) and a replica's warm-bank budget (serve/bank_host.py).
The routing itself is checked on a live two-replica service in test_service.py."""

from __future__ import annotations

import asyncio

import pytest

from serve.bank_host import BYTES_PER_MEMORY, WarmBanks
from serve.routing import HEADER, BankAffinity, bank_of


@pytest.mark.parametrize(
    ("path", "bank"),
    [
        ("/v1/banks/alice/recall", "alice"),
        ("/v1/banks/alice", "alice"),
        ("/v1/banks/a.b-c_1/memories/m1", "a.b-c_1"),
        ("/v1/banks", None),
        ("/v1/banks/", None),
        ("/v1/health", None),
        ("/mcp", None),
        ("/v1/banks/-bad/recall", None),  # not a bank id: must start with a letter or digit
        ("/trivial/v1/banks/alice/recall", None),
    ],
)
def test_bank_of_reads_the_bank_from_the_path(path, bank):
    assert bank_of(path) == bank


def _through(scope: dict) -> dict:
    seen: dict = {}

    async def app(scope, receive, send):
        seen.update(scope)

    asyncio.run(BankAffinity(app)(scope, None, None))
    return seen


def test_the_middleware_tags_bank_requests_and_a_client_header_wins():
    tagged = _through({"type": "http", "path": "/v1/banks/bob/recall", "headers": [(b"host", b"x")]})
    assert (HEADER, b"bob") in tagged["headers"] and (b"host", b"x") in tagged["headers"]

    untouched = _through({"type": "http", "path": "/v1/health", "headers": [(b"host", b"x")]})
    assert untouched["headers"] == [(b"host", b"x")]

    for name in (b"serve_multiplexed_model_id", b"Serve-Multiplexed-Model-Id"):
        own = _through({"type": "http", "path": "/v1/banks/bob/recall", "headers": [(name, b"mine")]})
        assert own["headers"] == [(name, b"mine")]

    lifespan = _through({"type": "lifespan"})
    assert "headers" not in lifespan


class _Derived:
    """The replica's derived state as WarmBanks sees it: sizes, and what was evicted."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self.evicted: list[str] = []

    def evict(self, bank_id: str) -> None:
        self.evicted.append(bank_id)


def test_warm_banks_evict_the_least_recently_used_over_the_byte_budget():
    derived = _Derived({"a": 100, "b": 100, "c": 100, "big": 1000})
    warm = WarmBanks(250 * BYTES_PER_MEMORY, size_of=lambda b: derived.sizes[b], evict=derived.evict)
    warm.used("a", loaded=True)
    warm.used("b", loaded=True)
    warm.used("a", loaded=False)  # a is now the most recent
    assert derived.evicted == []
    assert warm.used("c", loaded=True) == ["b"]  # 300 > 250: the least recent goes
    assert derived.evicted == ["b"] and warm.held("a") and warm.held("c") and not warm.held("b")
    assert (warm.hits, warm.loads, warm.evictions) == (1, 3, 1)
    assert warm.total_bytes() == 200 * BYTES_PER_MEMORY

    # A bank over the whole budget alone is kept (its recall needed it); the rest leave.
    assert sorted(warm.used("big", loaded=True)) == ["a", "c"]
    assert len(warm) == 1 and warm.held("big")


def test_forgetting_a_bank_drops_its_state_once():
    derived = _Derived({"a": 10})
    warm = WarmBanks(10**9, size_of=lambda b: derived.sizes[b], evict=derived.evict)
    warm.used("a", loaded=True)
    assert warm.forget("a") is True
    assert warm.forget("a") is False  # not held any more: not counted again
    assert warm.evictions == 1 and not warm.held("a")
