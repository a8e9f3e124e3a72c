"""What embedding long texts leaves in a process: bge-small (the default embedder) over
LongMemEval sessions, one call per session as a retain of that session makes, with and without
handing freed memory back after each call (``memlane.models.onnx_session.release_freed_memory``).

``python benchmarks/embed_memory.py [--sessions 60] [--threads 2]``

Each configuration runs in a fresh process. Prints the texts/s and the process's PSS above what
it held once the model was loaded: the peak (sampled after every call) and at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "longmemeval_s_dev60.json"


def _pss_mb() -> int:
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) // 1024
    return 0


def child(data: Path, sessions: int, threads: int, trim: bool) -> dict:
    sys.path.insert(0, str(ROOT))
    from memlane.models import onnx_session
    from memlane.models.bge_embedder import BgeEmbedder

    if not trim:
        onnx_session._TRIM = None  # the configuration before the trim
    embedder = BgeEmbedder(threads=threads)
    calls = [
        [turn["content"] for turn in session]
        for question in json.loads(data.read_text())
        for session in question["haystack_sessions"]
    ][:sessions]
    base = _pss_mb()
    peak = 0
    t0 = time.perf_counter()
    for texts in calls:
        embedder.embed(texts)
        peak = max(peak, _pss_mb() - base)
    seconds = time.perf_counter() - t0
    texts = sum(map(len, calls))
    return {
        "trim": trim,
        "calls": len(calls),
        "texts": texts,
        "texts_per_s": round(texts / seconds, 1),
        "peak_mb": peak,
        "end_mb": _pss_mb() - base,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--sessions", type=int, default=60)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--child", choices=["trim", "no-trim"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.data, args.sessions, args.threads, args.child == "trim")))
        return
    for mode in ("no-trim", "trim"):
        cmd = [sys.executable, __file__, "--data", str(args.data), "--sessions", str(args.sessions)]
        cmd += ["--threads", str(args.threads), "--child", mode]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800)
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
