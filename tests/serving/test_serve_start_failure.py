"""``memlane serve`` reports an application that cannot deploy, without waiting out its
health timeout, and leaves nothing running."""

from __future__ import annotations

from live import memlane


def test_a_replica_that_cannot_start_fails_the_start_with_its_reason(tmp_path):
    import os

    from cluster.local import free_port

    data = tmp_path / "data"
    env = {
        **os.environ,
        "MEMLANE_MODELS__EMBEDDER": "minilm",  # the MiniLM the next setting names is the one loaded
        "MEMLANE_MODELS__EMBEDDER_MODEL": str(tmp_path / "no-such-model"),
    }
    r = memlane(
        "serve", "--port", str(free_port()), "--data-dir", str(data), "--timeout", "420", env=env, timeout=480
    )
    assert r.returncode != 0
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "failed to deploy" in lines[0], r.stderr[-2000:]
    # the replica's own exception, naming the setting and the path (whichever deployment that
    # loads the model failed first: Embedder, Memory, Recall or Reflect)
    assert "no-such-model" in lines[0] and "MEMLANE_MODELS__EMBEDDER_MODEL" in lines[0], lines[0]
    # (the health timeout's message would be "was not healthy on ... within 420s": before this
    # path existed, the start waited those 420 s and said only that)
    assert not (data / "serve.json").exists() and not (data / "secrets.env").exists()
    status = memlane("status", "--data-dir", str(data), "--json")
    assert '"running": false' in status.stdout
