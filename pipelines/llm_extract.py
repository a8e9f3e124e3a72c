"""Bulk fact extraction on GPUs with ``ray.data.llm`` (vLLM), for backfills too large for HTTP.

Shape: one Dataset row per chunk (its bank, chunk id and the extraction prompt of
``memlane.retain.extract_llm``) -> a vLLM processor (``vLLMEngineProcessorConfig`` +
``build_processor``) that decodes under the reply's JSON schema (``structured_outputs``) ->
``{bank_id, chunk_id, reply}`` rows. The replies then feed
:class:`memlane.retain.extract_precomputed.PrecomputedExtractor` (in the engine, where the retain
actor finds it), which validates each exactly like the HTTP path (``facts_from_reply``) and
falls back to the LLM-free extractor for a missing or rejected reply, so retain (entity
resolution, links, writes, ids) is the same code whichever backend extracted.

Only the ``gpu`` extra installs vLLM; ``ray.data.llm`` imports without it, and everything here
imports it lazily, so this module loads (and its pure parts are tested) on a CPU machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from memlane.records import Bank, Turn
from memlane.retain.chunking import chunk_turns
from memlane.retain.extract_llm import ExtractionReply, extraction_messages

# Re-exported: the extractor moved into the engine (the retain actor imports no pipelines).
from memlane.retain.extract_precomputed import PrecomputedExtractor  # noqa: F401


@dataclass
class VLLMExtractConfig:
    """The vLLM processor's settings. ``model_source``: a Hugging Face id or a local path."""

    model_source: str
    batch_size: int = 32
    concurrency: int = 1  # vLLM engine replicas (one per GPU with tensor_parallel_size=1)
    max_tokens: int = 1500
    engine_kwargs: dict[str, Any] = field(
        default_factory=lambda: {"max_model_len": 8192, "enable_prefix_caching": True}
    )
    accelerator_type: str | None = None


def chunk_rows(
    bank: Bank, documents: Sequence[tuple[str, Sequence[Turn]]], chunk_max_turns: int
) -> list[dict[str, Any]]:
    """One row per chunk of the bank: ``bank_id``, ``chunk_id`` and the prompt ``messages``.
    Chunk ids are the ones retain will give the same chunks."""
    rows = []
    for document_id, turns in documents:
        for item in chunk_turns(bank.bank_id, document_id, turns, chunk_max_turns):
            rows.append(
                {
                    "bank_id": bank.bank_id,
                    "chunk_id": item.chunk.chunk_id,
                    "messages": extraction_messages(bank, item),
                }
            )
    return rows


def sampling_params(max_tokens: int) -> dict[str, Any]:
    """Greedy decoding constrained to the reply schema (vLLM structured outputs)."""
    return {
        "temperature": 0.0,
        "max_tokens": max_tokens,
        "structured_outputs": {"json": ExtractionReply.model_json_schema()},
    }


def make_preprocess(max_tokens: int):
    params = sampling_params(max_tokens)

    def preprocess(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "bank_id": row["bank_id"],
            "chunk_id": row["chunk_id"],
            "messages": row["messages"],
            "sampling_params": params,
        }

    return preprocess


def postprocess(row: dict[str, Any]) -> dict[str, Any]:
    return {"bank_id": row["bank_id"], "chunk_id": row["chunk_id"], "reply": row.get("generated_text") or ""}


def build_extraction_processor(cfg: VLLMExtractConfig):
    """The ``ray.data.llm`` processor: a Dataset of chunk rows in, reply rows out."""
    from ray.data.llm import build_processor, vLLMEngineProcessorConfig

    kwargs: dict[str, Any] = {
        "model_source": cfg.model_source,
        "batch_size": cfg.batch_size,
        "concurrency": cfg.concurrency,
        "engine_kwargs": dict(cfg.engine_kwargs),
    }
    if cfg.accelerator_type:
        kwargs["accelerator_type"] = cfg.accelerator_type
    config = vLLMEngineProcessorConfig(**kwargs)
    return build_processor(config, preprocess=make_preprocess(cfg.max_tokens), postprocess=postprocess)


def extract_replies(rows: list[dict[str, Any]], cfg: VLLMExtractConfig) -> dict[str, str]:
    """Run the processor over chunk rows on the connected Ray cluster; ``{chunk_id: reply}``."""
    import ray

    processor = build_extraction_processor(cfg)
    out: dict[str, str] = {}
    for row in processor(ray.data.from_items(rows)).iter_rows():
        out[row["chunk_id"]] = row["reply"]
    return out
