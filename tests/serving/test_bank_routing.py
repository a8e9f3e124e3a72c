"""The parts of bank-affine serving that need no running service: the proxy middleware that
tags bank requests (serve/routing.py) and a replica's warm-bank accounting (serve/bank_host.py).
The routing itself is checked on a live two-replica service in test_service.py."""

from __future__ import annotations

import asyncio

import pytest

from memlane.derived import BYTES_PER_MEMORY
from serve.bank_host import WarmBanks
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
        # the Hindsight-compatible surface: its bank ids mapped to Memlane's
        ("/hindsight/v1/default/banks/alice/memories/recall", "alice"),
        ("/hindsight/v1/default/banks/user:alice/reflect", "hs_user_3aalice"),
        ("/hindsight/v1/default/banks/team a", "hs_team_20a"),
        ("/hindsight/mcp/alice/", "alice"),
        ("/hindsight/mcp/", None),
        ("/hindsight/v1/default/banks", None),
        ("/hindsight/health", None),
        ("/hindsight/v1/default/banks/" + "é" * 60 + "/memories", None),  # too long for Memlane
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


@pytest.fixture
def derived(tmp_path):
    """A real engine-side derived state over Milvus Lite: banks a (1 memory), b (2), c (3)."""
    from memlane.derived import DerivedState
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore
    from memlane.stores.sparse_graph import SparseGraphStore
    from tests.memlane.test_milvus_store import DIM, unit

    store = MilvusStore(Settings(data_dir=tmp_path / "data"), dim=DIM)
    for n, b in enumerate("abc", start=1):
        store.upsert_units(b, [unit(b, f"u{i}", seed=10 * n + i) for i in range(n)])
    yield DerivedState(store, SparseGraphStore(), DIM, max_banks=2)
    store.close()


def test_warm_banks_count_hits_loads_and_the_engine_budgets_evictions(derived):
    """One budget: the engine's derived state evicts (here past 2 banks), WarmBanks counts."""
    warm = WarmBanks(derived)
    derived.ensure("a")
    assert warm.used("a", loaded=True) == 0
    derived.ensure("b")
    assert warm.used("b", loaded=True) == 0
    derived.ensure("a")  # a is now the most recent
    assert warm.used("a", loaded=False) == 0
    derived.ensure("c")  # a third bank: the least recent (b) leaves
    assert warm.used("c", loaded=True) == 1
    assert warm.held("a") and warm.held("c") and not warm.held("b")
    assert (warm.hits, warm.loads, warm.evictions, len(warm)) == (1, 3, 1, 2)
    assert warm.total_bytes() == (1 + 3) * BYTES_PER_MEMORY


def test_forgetting_a_bank_drops_its_state_once(derived):
    warm = WarmBanks(derived)
    derived.ensure("a")
    warm.used("a", loaded=True)
    assert warm.forget("a") is True
    assert warm.forget("a") is False  # not held any more: not counted again
    assert warm.evictions == 1 and not warm.held("a") and not derived.held("a")
