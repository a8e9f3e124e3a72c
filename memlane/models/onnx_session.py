"""ONNX Runtime sessions and inputs shared by the models that run on it (the ONNX MiniLM,
bge-small, the cross-encoder): one session per model file and thread count per process, with
the options measured for this machine, and batches padded to their longest sequence."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

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


# A forward pass over a text this long leaves enough freed memory behind to trim.
LONG_PASS_TOKENS = 128


def _libc_trim() -> Callable[[int], int] | None:
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


_TRIM = _libc_trim()


def release_freed_memory() -> None:
    """Hand memory that ONNX Runtime's passes freed back to the system (glibc's
    ``malloc_trim``; a no-op elsewhere). Without its arena, ONNX Runtime's activations come from
    malloc, whose per-thread arenas keep what was freed: bge-small embedding 608 LongMemEval
    turns in 60 calls, two passes side by side, left its process +310-327 MB at the peak and
    +232-250 MB after; trimming after each call, +59-76 MB and -8 to +27 MB, at 21.1-21.4
    texts/s against 22.1-24.1 (two runs, 2-core machine, Nov 2026: benchmarks/embed_memory.py).
    A trim costs ~10 ms, so only calls with a long text pay it."""
    if _TRIM is not None:
        _TRIM(0)


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
