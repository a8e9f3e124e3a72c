"""The Rerank deployment's class with the real cross-encoder behind the Ingress's
RemoteReranker: recall at budget high sends its pool there, low and mid do not call it. The
handle is a stand-in for Serve's (same call shape); the Serve wiring itself is covered by
tests/serving/test_service.py."""

from __future__ import annotations

from fixtures import write_locomo_fixture

from serve.deployments import RerankDeployment
from serve.remote import RemoteReranker


class _Reply:
    def __init__(self, value) -> None:
        self._value = value

    def result(self, timeout_s: float) -> list[float]:
        return self._value


class _Method:
    def __init__(self, fn, calls: list[int]) -> None:
        self._fn = fn
        self._calls = calls

    def remote(self, *args) -> _Reply:
        self._calls.append(len(args[1]))
        return _Reply(self._fn(*args))


class _Handle:
    """A DeploymentHandle's ``handle.rerank.remote(...).result(...)`` over a local replica."""

    def __init__(self, replica) -> None:
        self.calls: list[int] = []
        self.rerank = _Method(replica.rerank, self.calls)


def test_budget_high_recall_reads_the_rerank_deployments_cross_encoder(
    monkeypatch, settings, embedder, extractor, tmp_path
):
    from memlane.engine import Memory

    monkeypatch.setenv("MEMLANE_MODELS__RERANKER_MODEL", "cross-encoder")
    settings.recall.rerank_high = 20
    replica = RerankDeployment.func_or_class()
    assert replica.info() == {"model": "ms-marco-MiniLM-L-12-v2"}
    handle = _Handle(replica)
    memory = Memory(
        settings, embedder=embedder, extractor=extractor, reranker=RemoteReranker(handle, "cross-encoder")
    )
    try:
        memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
        memory.recall("fx", "Dumpling the tortoise", budget="mid")
        assert handle.calls == []
        res = memory.recall("fx", "Dumpling the tortoise", budget="high", trace=True)
        assert len(handle.calls) == 1 and handle.calls[0] >= 1
        top = res.memories[0]
        assert "Dumpling" in top.unit.text
        assert top.trace["rerank"]["model"] == "cross-encoder"
        assert 0.5 < top.trace["rerank"]["score"] < 1.0  # the cross-encoder judges it answers
    finally:
        memory.close()
