"""RemoteEmbedder (serve/remote.py): passages go to the deployment's ``embed``, queries to its
batched ``embed_query`` (one) or ``embed_queries`` (several), so the query instruction of an
embedder such as bge-small reaches queries only. No Ray: a stand-in for the handle."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from serve.remote import RemoteEmbedder


class _Handle:
    """Records which deployment method each call reached; vectors say it too."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def _method(self, name: str, value: float, one: bool = False):
        def remote(arg):
            texts = [arg] if one else list(arg)
            self.calls.append((name, texts))
            rows = np.full((len(texts), 4), value, dtype=np.float32)
            return SimpleNamespace(result=lambda timeout_s: rows[0] if one else rows)

        return SimpleNamespace(remote=remote)

    def __getattr__(self, name: str):
        values = {"embed": 1.0, "embed_queries": 2.0, "embed_query": 3.0}
        return self._method(name, values[name], one=name == "embed_query")


def test_passages_and_queries_reach_their_own_deployment_methods():
    handle = _Handle()
    emb = RemoteEmbedder(handle, counter=None, dim=4, name="bge-small")
    assert emb.name == "bge-small"
    assert emb.embed(["a turn"]).tolist() == [[1.0] * 4]
    assert emb.embed_queries(["a question"]).tolist() == [[3.0] * 4]
    assert emb.embed_queries(["q1", "q2"]).shape == (2, 4)
    assert emb.embed([]).shape == emb.embed_queries([]).shape == (0, 4)
    assert handle.calls == [
        ("embed", ["a turn"]),
        ("embed_query", ["a question"]),
        ("embed_queries", ["q1", "q2"]),
    ]
