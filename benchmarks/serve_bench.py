"""Serve load benchmark: ``python benchmarks/serve_bench.py [--seconds 20] [--json]``.
See benchmarks/serve_load.py. A script (an entry point like the CLI): it takes the service's
lifecycle from ``cluster``, which the load generator itself does not import."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.serve_load import format_serve_bench  # noqa: E402
from cluster.bench_cmd import serve_bench_runner  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data-dir", type=Path, default=Path(".memlane-serve-bench"))
    p.add_argument("--bank-size", type=int, default=10_000)
    p.add_argument("--seconds", type=float, default=20.0, help="per level and endpoint")
    p.add_argument("--concurrency", type=int, action="append", help="repeatable (default 1, 8, 32)")
    p.add_argument("--downscale-s", type=float, default=20.0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    run_serve_bench = serve_bench_runner()
    assert run_serve_bench is not None  # benchmarks.serve_load is beside this script
    report = run_serve_bench(
        a.data_dir,
        bank_size=a.bank_size,
        seconds=a.seconds,
        concurrencies=a.concurrency or (1, 8, 32),
        downscale_s=a.downscale_s,
    )
    print(json.dumps(report) if a.json else format_serve_bench(report))


if __name__ == "__main__":
    main()
