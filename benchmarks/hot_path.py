"""Hot-path benchmark: the latency of a one-turn retain through the API (``retain_items``),
with the rules extractor (the baseline), with the LLM extractor waited on, and with the LLM
extractor deferred (memlane/retain/deferred.py), in one run.

The LLM is a local OpenAI-compatible stand-in (stdlib HTTP on 127.0.0.1) that answers a valid
extraction after ``--delay`` seconds: no model runs on this machine, and what is measured is
whether retain waits for it, not what it extracts. Also reported: how long after the deferred
retain returned its LLM facts were written (the background lag).

    python -m benchmarks.hot_path [--n 40] [--delay 0.8]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_TURN = re.compile(r"^\[(?P<id>[^\]]+)\] \((?P<date>\d{4}-\d{2}-\d{2})[^)]*\) (?P<line>.+)$", re.M)


def _reply(prompt: str) -> str:
    facts = [
        {"what": m["line"], "fact_type": "world", "source_turn_ids": [m["id"]], "occurred_start": m["date"]}
        for m in _TURN.finditer(prompt)
    ]
    return json.dumps({"facts": facts or [{"what": "nothing", "fact_type": "world"}]})


def start_fake_llm(delay_s: float) -> tuple[ThreadingHTTPServer, str]:
    """A chat-completions stand-in answering after ``delay_s``; returns (server, base_url)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server API
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(delay_s)
            content = _reply(body["messages"][-1]["content"])
            out = json.dumps(
                {
                    "id": "bench",
                    "object": "chat.completion",
                    "model": "bench",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": content},
                        }
                    ],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def measure(mode: str, n: int, base_url: str, data_dir: Path) -> dict:
    """``n`` one-turn retains into one bank (each its own document) in ``mode``: "rules",
    "llm-inline" or "llm-deferred"; latencies in ms."""
    from memlane.engine import Memory
    from memlane.settings import Settings

    retain = {"extractor": "rules" if mode == "rules" else "llm", "defer_llm": mode == "llm-deferred"}
    llm = {"base_url": base_url, "model": "bench", "max_retries": 0}
    settings = Settings(data_dir=data_dir, retain=retain, llm=llm, background={"reflect": False})
    out: dict = {"mode": mode, "n": n}
    with Memory(settings) as m:
        m.create_bank("hot")
        m.retain_items("hot", [{"content": "warm-up", "speaker": "Ana"}], document_id="warm")
        m.wait_background()
        lat = []
        for i in range(n):
            item = {"content": f"Message {i}: I tried the new ramen place on Elm Street.", "speaker": "Ana"}
            t0 = time.perf_counter()
            m.retain_items("hot", [item], document_id=f"d{i}")
            lat.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        m.wait_background()
        out["drain_s"] = time.perf_counter() - t0
        out["p50_ms"], out["p95_ms"] = statistics.median(lat), _pct(lat, 0.95)
        out["llm_facts"] = sum(
            1 for b in m.store.iter_units("hot") for u in b if u.metadata.get("extractor") == "llm"
        )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40, help="one-turn retains per mode")
    ap.add_argument("--delay", type=float, default=0.8, help="the stand-in LLM's seconds per reply")
    args = ap.parse_args(argv)
    server, url = start_fake_llm(args.delay)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="memlane-hot-") as tmp:
            for mode in ("rules", "llm-inline", "llm-deferred"):
                rows.append(measure(mode, args.n, url, Path(tmp) / mode))
    finally:
        server.shutdown()
    print(f"one-turn retain_items, n={args.n} each, stand-in LLM {args.delay:.2f} s per reply")
    print(f"{'mode':<14} {'p50 ms':>8} {'p95 ms':>8} {'LLM facts':>10} {'drain s':>8}")
    for r in rows:
        print(
            f"{r['mode']:<14} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['llm_facts']:10d} {r['drain_s']:8.1f}"
        )


if __name__ == "__main__":
    main()
