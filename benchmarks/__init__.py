"""Speed and quality benchmarks beside the engine, each reachable from ``memlane bench``.

A script (a module with a ``__main__`` block) is listed in :data:`SCRIPTS`; ``memlane bench
NAME ARGS`` runs it as ``python -m benchmarks.MODULE ARGS`` would (NAME: the module's name
without ``_bench``, ``-`` for ``_``). A module without one is listed in :data:`LIBRARIES`.
tests/benchmarks/test_reachable.py fails for a module in neither list.

Imported only by the CLI, tests or other benchmarks; the engine never imports it.
"""

# module -> what it measures (the command's help line)
SCRIPTS: dict[str, str] = {
    "ann_libs": "HNSW libraries (hnswlib, usearch, FAISS) for the in-process dense search.",
    "backfill_bench": "Ray Data backfill throughput beside its baselines.",
    "bge_device": "bge-small on this machine: ONNX Runtime providers, CPU rate, query latency.",
    "big_bank": "One big bank on a Milvus server: where dense search runs at 1M memories.",
    "bm25_bench": "BM25 at big-bank sizes: the index's postings beside bm25s.",
    "cli_timings": "Wall time of a new user's first CLI commands, two checkouts in one run.",
    "embed_bench": "Embedding backends side by side: torch vs ONNX Runtime, 1 and 2 threads.",
    "embed_memory": "What embedding long texts leaves in a process, beside its texts/s.",
    "entity_types": "Entity types against labelled chats (the rules extractor's kinds).",
    "gpu_embed": "The batch actors' GPU embedding path, against the CPU (needs CUDA).",
    "hot_path": "One-turn API retain latency: rules, LLM extractor waited on, LLM deferred.",
    "knowledge_update": "Knowledge-update regression check on synthetic data.",
    "knowledge_update_lme": "Knowledge-update on LongMemEval's real phrasings.",
    "llm_paths": "Every LLM path against a real model server: validity, latency, tokens.",
    "many_banks": "Many banks through the service: bank-affine routing on vs off.",
    "many_banks_layout": "Many small banks on the two tenant layouts.",
    "milvus_layout": "Milvus Lite: one collection per bank vs shared partition-key collections.",
    "ner_gate": "What the NER gate's speaker rule changes, on LoCoMo.",
    "peer_bench": "The Hindsight peer's workload through memlane serve.",
    "ranker_eval": "The learned ranker scored by lightgbm and by numpy trees.",
    "recall_stages": "Where a recall's time goes, stage by stage, per bank size.",
    "recall_sweep": "Recall settings swept over an eval run's banks, one dev-set half at a time.",
    "refresh_bench": "Incremental refresh and cold banks, each beside its baseline.",
    "replace_cost": "A retain of an existing document beside a new document's.",
    "rerank_cost": "Recall cost and evidence per cross-encoder config on an eval's banks.",
    "rerank_text": "The cross-encoder alone on LongMemEval's evidence turns against BM25's best.",
    "retain_cost": "A retain request's CPU and stages through the one-process service.",
    "retain_profile": "Where retain's time goes, beside raw embedding of the same texts.",
    "scale": "Many banks on a Milvus server: write rate, search latency, isolation, memory.",
    "serve_bench": "Serve load: requests/s beside a trivial endpoint.",
    "session_coverage": "Sessions covered by the top of each ranking, from an eval run's log.",
    "spread_hops": "Spreading activation over one big bank: sparse first hops on vs off.",
}

# module -> what imports it (no __main__ block of its own)
LIBRARIES: dict[str, str] = {
    "engine": "memlane bench engine, the suite and most scripts",
    "suite": "memlane bench suite",
    "footprint": "peer_bench, many_banks, retain_profile",
    "peer_client": "peer_bench",
    "plots": "the suite",
    "serve_load": "memlane bench suite, serve_bench, peer_bench",
    "soak": "tests/serving/test_soak.py",
}


def command_name(module: str) -> str:
    """``memlane bench`` NAME of a script: ``backfill_bench`` -> ``backfill``."""
    return module.removesuffix("_bench").replace("_", "-")
