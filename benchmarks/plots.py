"""The bench suite's PNG plot (matplotlib, Agg backend: no display needed):
``latency_vs_size.png``, recall p50/p95 against bank size beside the dense-only baseline."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def plot_latency(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Recall latency against bank size from the bench's recall rows; None without rows."""
    rows = [r for r in rows if _finite(r.get("p50_ms"))]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    sizes = [r["memories"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(sizes, [r["p50_ms"] for r in rows], marker="o", label="recall p50")
    ax.plot(sizes, [r["p95_ms"] for r in rows], marker="o", linestyle="--", label="recall p95")
    ax.plot(sizes, [r["baseline_dense_p50_ms"] for r in rows], marker="s", label="dense-only p50")
    ax.set_xscale("log")
    ax.set_xlabel("memories in the bank")
    ax.set_ylabel("ms")
    ax.set_title("Recall latency vs bank size")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
