"""The vLLM deployment behind online reflect: a Ray Serve LLM app with an OpenAI-compatible API.

Reflect talks to any OpenAI-compatible endpoint (memlane/llm/openai_compat.py), so on a GPU
cluster the reflect role points at this app: ``MEMLANE_LLM__REFLECT__BASE_URL=http://<serve>/v1``
and ``MEMLANE_LLM__REFLECT__MODEL=<model_id>``. The engine stays the same code on CPU (any HTTP
server) and GPU (this app), and Serve autoscales the model replicas on their own.

``ray.serve.llm`` imports only with vLLM installed (the ``gpu`` extra): it is imported inside
:func:`build_reflect_llm_app`, never at module load.
"""

from __future__ import annotations

from typing import Any


def reflect_llm_config(
    model_id: str,
    model_source: str | None = None,
    *,
    min_replicas: int = 1,
    max_replicas: int = 2,
    accelerator_type: str | None = None,
    engine_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of ``ray.serve.llm.LLMConfig`` for the reflect model (pure data, so a
    serve config file or a test can read it)."""
    if not model_id:
        raise ValueError("model_id must not be empty")
    if not 0 <= min_replicas <= max_replicas or max_replicas < 1:
        raise ValueError(
            f"need 0 <= min_replicas <= max_replicas and max_replicas >= 1, got "
            f"{min_replicas} and {max_replicas}"
        )
    cfg: dict[str, Any] = {
        "model_loading_config": {"model_id": model_id, "model_source": model_source or model_id},
        "deployment_config": {
            "autoscaling_config": {"min_replicas": min_replicas, "max_replicas": max_replicas}
        },
        # Reflect replies are short JSON; a bounded context keeps the KV cache for batching.
        "engine_kwargs": {"max_model_len": 8192, **(engine_kwargs or {})},
    }
    if accelerator_type:
        cfg["accelerator_type"] = accelerator_type
    return cfg


def build_reflect_llm_app(model_id: str, model_source: str | None = None, **options: Any):
    """The Serve application (``serve.run(app, route_prefix="/llm")``) serving ``model_id``
    at ``/v1/chat/completions``. Needs vLLM (the ``gpu`` extra)."""
    cfg = reflect_llm_config(model_id, model_source, **options)
    try:
        from ray.serve.llm import LLMConfig, build_openai_app
    except ImportError as exc:
        raise RuntimeError(
            f"the vLLM Serve deployment needs vLLM: install memlane[gpu] on the GPU nodes ({exc})"
        ) from exc
    return build_openai_app({"llm_configs": [LLMConfig(**cfg)]})
