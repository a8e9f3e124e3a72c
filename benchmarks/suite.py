"""The performance suite: every figure beside its baseline from the same run, as JSON, Markdown
and a PNG.

Sections:

- **recall**: recall p50/p95 by bank size (synthetic banks written in bounded batches) beside
  embed + bare dense top-100 in the store and in the in-process index (``benchmarks.engine``);
- **footprint**: bytes per memory in process and on disk at each size, beside the raw float32
  vector and raw text bytes;
- **retain**: retain turns/s beside raw embedding sentences/s of the same texts, in process
  (the Ray Data backfill has its own script, ``benchmarks/backfill_bench.py``, because it starts
  a Ray cluster and a Milvus Lite server);
- **serve**: requests/s of the Serve recall endpoint beside a trivial endpoint, from a callable
  the entry point passes in (the engine never imports Serve); "skipped: ..." when there is none.
"""

from __future__ import annotations

import inspect
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.engine import run_engine_bench


def run_suite(
    data_dir: Path,
    *,
    sizes: Sequence[int],
    queries: int = 200,
    retain_turns: int = 1500,
    serve_bench: Callable[..., dict] | None = None,
    serve_skipped: str = "skipped: no Serve benchmark given",
    command: str | None = None,
) -> dict[str, Any]:
    """Run the suite in a fresh ``data_dir``; returns the report. ``serve_bench`` is called
    after the engine is closed (it may start its own store over the same directory), with the
    keyword arguments it accepts among ``data_dir`` and ``queries``; its dict becomes the
    ``serve`` section (``serve_skipped``, a string, when there is none)."""
    t0 = time.perf_counter()
    report = run_engine_bench(Path(data_dir), sizes=sizes, queries=queries, retain_turns=retain_turns)
    report["footprint"] = [{"memories": r["memories"], **r.pop("footprint")} for r in report["recall"]]
    if serve_bench is None:
        report["serve"] = serve_skipped
    else:
        accepted = inspect.signature(serve_bench).parameters
        kwargs = {
            k: v
            for k, v in {"data_dir": Path(data_dir) / "serve", "queries": queries}.items()
            if k in accepted
        }
        try:
            report["serve"] = serve_bench(**kwargs)
        except Exception as exc:  # noqa: BLE001 - one failed section must not lose the others
            report["serve"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    report["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    report["sizes"] = list(sizes)
    report["queries"] = queries
    report["command"] = command
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    return report


def suite_markdown(report: dict[str, Any]) -> str:
    """The suite report as Markdown tables."""
    m = report.get("machine", {})
    lines = [
        "# Memlane benchmark suite",
        "",
        f"- machine: {m.get('cpus')} CPUs, {m.get('platform')}, Python {m.get('python')}",
        f"- queries per size: {report.get('queries')}; wall {report.get('wall_s')} s",
    ]
    if report.get("command"):
        lines.append(f"- reproduce: `{report['command']}`")
    lines += [
        "",
        "## Recall latency vs bank size (in process, no cross-encoder)",
        "",
        "| memories | recall p50 ms | recall p95 ms | dense-only (index) p50 / p95 ms | "
        "dense-only (store) p50 / p95 ms | write s | index build s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report.get("recall", []):
        lines.append(
            f"| {r['memories']:,} | {r['p50_ms']} | {r['p95_ms']} | "
            f"{r.get('baseline_index_dense_p50_ms')} / {r.get('baseline_index_dense_p95_ms')} | "
            f"{r['baseline_dense_p50_ms']} / {r['baseline_dense_p95_ms']} | "
            f"{r['load_s']} | {r['index_build_s']} |"
        )
    lines += [
        "",
        "## Footprint per memory (bytes)",
        "",
        "| memories | in process (RSS growth) | on disk | raw float32 vector | raw text |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for f in report.get("footprint", []):
        lines.append(
            f"| {f['memories']:,} | {f['rss_bytes_per_memory']} | {f['disk_bytes_per_memory']} | "
            f"{f['raw_vector_bytes_per_memory']} | {f['raw_text_bytes_per_memory']} |"
        )
    lines += [
        "",
        "In process: RSS grown by building the bank's index and graph, divided by its size "
        "(a fixed first-build overhead dominates small banks). On disk: bytes the store "
        "added under the data directory.",
    ]
    lines += [
        "",
        "## Retain throughput vs raw embedding (in process)",
        "",
        "| corpus | turns | retain turns/s | raw embedding sentences/s | ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in report.get("retain", {}).items():
        lines.append(
            f"| {name} | {r['turns']} | {r['retain_turns_per_s']} | "
            f"{r['raw_embed_sentences_per_s']} | {r['ratio']} |"
        )
    lines += ["", "## Serve requests/s vs a trivial endpoint", ""]
    serve = report.get("serve")
    if isinstance(serve, dict):
        lines += [f"- {key}: {value}" for key, value in serve.items()]
    else:
        lines.append(f"- {serve}")
    return "\n".join(lines).rstrip() + "\n"


def write_suite(report: dict[str, Any], out_dir: Path, *, plots: bool = True) -> list[Path]:
    """``bench.json``, ``bench.md`` and ``latency_vs_size.png`` in ``out_dir``."""
    import json

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "bench.json", out_dir / "bench.md"]
    written[0].write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    written[1].write_text(suite_markdown(report), encoding="utf-8")
    if plots:
        from benchmarks.plots import plot_latency

        png = plot_latency(report.get("recall", []), out_dir / "latency_vs_size.png")
        if png is not None:
            written.append(png)
    return written
