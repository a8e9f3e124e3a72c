"""The vLLM Serve deployment builder, with ``ray.serve.llm`` mocked at the vLLM boundary."""

from __future__ import annotations

import sys
import types

import pytest

from serve.llm import build_reflect_llm_app, reflect_llm_config


def test_config_shape_and_checks():
    cfg = reflect_llm_config(
        "qwen-7b",
        "Qwen/Qwen2.5-7B-Instruct",
        min_replicas=0,
        max_replicas=4,
        accelerator_type="H100",
        engine_kwargs={"tensor_parallel_size": 2},
    )
    assert cfg["model_loading_config"] == {"model_id": "qwen-7b", "model_source": "Qwen/Qwen2.5-7B-Instruct"}
    assert cfg["deployment_config"]["autoscaling_config"] == {"min_replicas": 0, "max_replicas": 4}
    assert cfg["engine_kwargs"] == {"max_model_len": 8192, "tensor_parallel_size": 2}
    assert cfg["accelerator_type"] == "H100"
    assert reflect_llm_config("m")["model_loading_config"]["model_source"] == "m"
    with pytest.raises(ValueError, match="min_replicas"):
        reflect_llm_config("m", min_replicas=3, max_replicas=2)


def test_build_app_with_serve_llm_mocked(monkeypatch):
    calls = {}
    fake = types.ModuleType("ray.serve.llm")

    class LLMConfig:
        def __init__(self, **kw):
            calls["config"] = kw

    def build_openai_app(args):
        calls["args"] = args
        return "app"

    fake.LLMConfig, fake.build_openai_app = LLMConfig, build_openai_app
    monkeypatch.setitem(sys.modules, "ray.serve.llm", fake)
    assert build_reflect_llm_app("qwen-7b", max_replicas=3) == "app"
    assert calls["config"]["model_loading_config"]["model_id"] == "qwen-7b"
    assert isinstance(calls["args"]["llm_configs"][0], LLMConfig)


def test_without_vllm_the_error_names_the_extra():
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover
        pytest.skip("vLLM is installed")
    with pytest.raises(RuntimeError, match=r"memlane\[gpu\]"):
        build_reflect_llm_app("m")
