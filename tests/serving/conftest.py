"""One live ``memlane serve`` shared by the serving modules whose settings agree.

Starting a service costs ~20-50 s and stopping it ~6-13 s on a 2-core machine (Ray, Serve, the
Milvus Lite server, every replica's models). Modules that need nothing but the defaults and
auth on share one: ``default_service`` (the state ``live_service`` yields). They differ only in
their keys, merged in ``DEFAULT_KEYS`` (no module's check depends on another module's key: each
test uses its own), and write disjoint banks (test_explorer: alice, api; test_tree_online: ana).

A module with other settings (replicas, env, auth off, an LLM) keeps its own service. The
sharing modules run one after another (``pytest_collection_modifyitems``) and the service is
stopped, and its stop checked, after the last of their tests, so no idle service loads the
machine while other modules run theirs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DEFAULT_MODULES = ("test_explorer.py", "test_tree_online.py")
DEFAULT_KEYS = {
    "k-alice": ["alice"],  # test_explorer
    "k-admin": "*",  # test_explorer
    "k": "*",  # test_tree_online
}


class _Shared:
    """The shared service, started at first use and stopped by ``stop``."""

    def __init__(self) -> None:
        self.cm = None
        self.state = None

    def get(self, tmp_path_factory) -> dict:
        if self.state is None:
            from live import live_service

            # test_explorer also checks the Ray dashboard that --ray-dashboard starts
            cm = live_service(
                tmp_path_factory.mktemp("default-service"), keys=DEFAULT_KEYS, ray_dashboard=True
            )
            self.state = cm.__enter__()
            self.cm = cm
        return self.state

    def stop(self) -> None:
        cm, self.cm, self.state = self.cm, None, None
        if cm is not None:
            cm.__exit__(None, None, None)  # stops the service and asserts it stopped


_DEFAULT = _Shared()


def _shares(item) -> bool:
    return item.path.parent == HERE and item.path.name in DEFAULT_MODULES


@pytest.fixture(scope="module")
def default_service(tmp_path_factory):
    """The shared service's state (``url``, ``pid``, ...): defaults, auth on, ``DEFAULT_KEYS``."""
    return _DEFAULT.get(tmp_path_factory)


def pytest_collection_modifyitems(items):
    """The sharing modules' tests one after another, where the first of them was."""
    shared = [i for i in items if _shares(i)]
    if not shared:
        return
    first = items.index(shared[0])
    rest = [i for i in items if not _shares(i)]
    items[:] = rest[:first] + shared + rest[first:]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    if _shares(item) and (nextitem is None or not _shares(nextitem)):
        _DEFAULT.stop()
    return result


def pytest_sessionfinish(session):
    _DEFAULT.stop()  # a run cut short (-x, Ctrl-C) leaves no service behind
