"""Speed benchmarks beside the engine: the engine bench (``benchmarks.engine``), the suite
(``benchmarks.suite``), the Serve load generator (``benchmarks.serve_load``) and standalone
scripts (``python benchmarks/serve_bench.py``, ``backfill_bench.py``, ``milvus_layout.py``).

Imported only by the CLI (``memlane bench ...``) or run as scripts; the engine never imports it.
"""
