"""PNG plots for eval reports (matplotlib, Agg backend: no display needed).

- ``by_category.png``: the headline metric per category, one bar per system;
- ``recall_at_k.png``: overall recall@k curves, one panel per recall family, one line per
  system;
- ``qa_accuracy.png``: QA accuracy per category with Wilson 95 % error bars.

The bench's latency plot is :func:`benchmarks.plots.plot_latency`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evals.summary import ALL, families, finite


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def plot_report(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """Every plot an eval report has data for; returns the files written."""
    plt = _pyplot()
    out_dir = Path(out_dir)
    written: list[Path] = []
    systems = report["systems"]
    summary = report["summary"]
    cats = [c for c in summary if c != ALL]

    headline = report.get("headline")
    if headline and cats:
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(cats) + 2), 4))
        width = 0.8 / max(1, len(systems))
        for i, system in enumerate(systems):
            values = [summary[c].get(system, {}).get(headline, float("nan")) for c in cats]
            ax.bar([x + i * width for x in range(len(cats))], values, width, label=system)
        ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(cats))])
        ax.set_xticklabels(cats, rotation=20, ha="right")
        ax.set_ylim(0, 1)
        ax.set_ylabel(headline)
        ax.set_title(f"{report['title']}: {headline} per category")
        ax.legend()
        fig.tight_layout()
        written.append(_save(fig, out_dir / "by_category.png", plt))

    recall_fams = {f: ks for f, ks in families(summary, systems).items() if "recall" in f and len(ks) > 1}
    if recall_fams:
        n = len(recall_fams)
        fig, axes = plt.subplots(1, n, figsize=(4 * n, 3.6), squeeze=False)
        for ax, (family, ks) in zip(axes[0], recall_fams.items()):
            for system in systems:
                values = summary[ALL].get(system, {})
                ys = [values.get(f"{family}@{k}") for k in ks]
                if any(finite(y) for y in ys):
                    ax.plot(ks, [y if finite(y) else float("nan") for y in ys], marker="o", label=system)
            ax.set_xscale("log")
            ax.minorticks_off()  # the ks are the ticks; log minor labels only clutter
            ax.set_xticks(ks)
            ax.set_xticklabels([str(k) for k in ks])
            ax.set_ylim(0, 1)
            ax.set_title(family, fontsize=9)
            ax.set_xlabel("k")
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        written.append(_save(fig, out_dir / "recall_at_k.png", plt))

    qa = report.get("qa_summary")
    if qa:
        qa_systems = report.get("qa_systems", [])
        qcats = list(qa)
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(qcats) + 2), 4))
        width = 0.8 / max(1, len(qa_systems))
        for i, system in enumerate(qa_systems):
            acc, err_lo, err_hi = [], [], []
            for c in qcats:
                e = qa[c].get(system) or {}
                a = e.get("accuracy")
                a = a if finite(a) else float("nan")
                lo, hi = e.get("ci95", [a, a])
                acc.append(a)
                err_lo.append(max(0.0, a - lo) if finite(a) else 0.0)
                err_hi.append(max(0.0, hi - a) if finite(a) else 0.0)
            ax.bar(
                [x + i * width for x in range(len(qcats))],
                acc,
                width,
                yerr=[err_lo, err_hi],
                capsize=3,
                label=system,
            )
        ax.set_xticks([x + width * (len(qa_systems) - 1) / 2 for x in range(len(qcats))])
        ax.set_xticklabels(qcats, rotation=20, ha="right")
        ax.set_ylim(0, 1)
        ax.set_ylabel("accuracy (Wilson 95 %)")
        ax.set_title(f"{report['title']}: QA accuracy")
        ax.legend()
        fig.tight_layout()
        written.append(_save(fig, out_dir / "qa_accuracy.png", plt))
    return written


def _save(fig, path: Path, plt) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
