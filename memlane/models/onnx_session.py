"""ONNX Runtime sessions and inputs shared by the models that run on it (the ONNX MiniLM,
bge-small, the cross-encoder): one session per model file and thread count per process, with
the options measured for this machine, and batches padded to their longest sequence."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Collection, Sequence

import numpy as np

BERT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

_SESSIONS: dict[tuple[str, int], Any] = {}
_LOCK = threading.Lock()


def shared_session(path: str | Path, threads: int) -> Any:
    """The process's one ONNX Runtime session (CPU) for the model file ``path`` at ``threads``
    intra-op threads: replicas, actors and the engine in one process share it."""
    import onnxruntime as ort

    key = (str(path), threads)
    with _LOCK:
        if key not in _SESSIONS:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # Spinning worker threads burn the cores that the store and other replicas share on
            # a 2-core machine between requests; see benchmarks/embed_bench.py for the cost.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # No arena: ONNX Runtime's CPU arena keeps its peak for the life of the session, and
            # one batch of 64 texts at 256 tokens left the process at 1,537 MB RSS with it
            # against 302 MB without (single-query latency within the noise of a loaded 2-core
            # machine). Memory patterns only pay with fixed shapes; ours vary with every batch.
            opts.enable_cpu_mem_arena = False
            opts.enable_mem_pattern = False
            _SESSIONS[key] = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        return _SESSIONS[key]


def padded_feed(encodings: Sequence[Any], names: Collection[str]) -> dict[str, np.ndarray]:
    """A BERT model's inputs for a batch of ``tokenizers`` encodings (unpadded), padded with 0
    to the batch's longest; only the inputs in ``names`` (what the session takes)."""
    width = max(len(e.ids) for e in encodings)
    feed = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in BERT_INPUTS}
    for row, e in enumerate(encodings):
        k = len(e.ids)
        feed["input_ids"][row, :k] = e.ids
        feed["attention_mask"][row, :k] = e.attention_mask
        feed["token_type_ids"][row, :k] = e.type_ids
    return {k: v for k, v in feed.items() if k in names}
