"""The shared report format of every evaluation run (LoCoMo, LongMemEval): per-question rows,
their summary, and a run directory holding ``report.json``, ``summary.md``,
``questions.jsonl`` and PNG plots.

A **row** is one question::

    {"id": "...", "category": "single-session-user",
     "scores": {"memlane": {"turn_recall_any@5": 1.0, ...}, "bm25": {...}, "dense": {...}},
     "qa": {"memlane": {"answer": "...", "correct": true, "context_tokens": 812}, ...},
     ...anything else worth logging (gold ids, top ranked ids, latency)}

A metric a question does not take part in is simply absent from its ``scores`` (an abstention
question has no official LongMemEval retrieval scores; a LoCoMo item without evidence has no
recall), so every mean is over the questions that have the metric, and ``n`` says how many.

Metric names are ``<family>@<k>`` (``turn_recall_any@10``); the Markdown summary gives one
table per family with a column per k, and the recall@k plot one curve per system and family.

Beside the summary, ``comparison`` holds Memlane against the best single-channel baseline per
category and metric (difference and paired bootstrap 95 % interval, :mod:`evals.compare`), and
``beats_best_baseline`` a verdict per headline metric over all questions; the Markdown summary
opens with those headline tables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence, TextIO

from evals.ablation import ablation_lines, tree_ablation
from evals.compare import beats_best_baseline, compare_to_baselines, comparison_markdown

# The summaries live in evals.summary (shared with the plots); re-exported for callers.
from evals.summary import ALL, families, finite, split_metric, summarize_qa, summarize_scores  # noqa: F401

# --------------------------------------------------------------------------------------------
# Markdown


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _tokens(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown(report: dict[str, Any]) -> str:
    """A Markdown summary of a report built by :func:`build_report`."""
    systems = report["systems"]
    summary = report["summary"]
    lines = [f"# {report['title']}", ""]
    for key, value in report.get("info", {}).items():
        lines.append(f"- {key}: {'-' if value is None else value}")
    if report.get("command"):
        lines.append(f"- reproduce: `{report['command']}`")
    lines.append("")
    lines += comparison_markdown(report)
    tree = ablation_lines(report.get("tree_ablation"))
    if tree:
        lines += ["## Temporal tree ablation", "", "```", *tree, "```", ""]
    for family, ks in families(summary, systems).items():
        if not ks:  # a metric without a cut-off (LongMemEval's latest_answer_session_first)
            lines += _single_metric(summary, systems, family)
            continue
        lines += [
            f"## {family}",
            "",
            "| system | category | n | " + " | ".join(f"@{k}" for k in ks) + " |",
            "| --- | --- | ---: | " + " | ".join("---:" for _ in ks) + " |",
        ]
        for system in systems:
            for cat, entry in summary.items():
                values = entry.get(system, {})
                if not any(f"{family}@{k}" in values for k in ks):
                    continue
                n = entry["n"].get(f"{family}@{ks[0]}", 0)
                cells = " | ".join(_fmt(values.get(f"{family}@{k}")) for k in ks)
                lines.append(f"| {system} | {cat} | {n} | {cells} |")
        lines.append("")
    qa = report.get("qa_summary")
    if qa:
        qa_systems = report.get("qa_systems", [])
        lines += [
            "## QA accuracy (LLM judge, Wilson 95 % interval)",
            "",
            "| system | category | n | accuracy | 95 % CI | context tokens | errors |",
            "| --- | --- | ---: | ---: | --- | ---: | ---: |",
        ]
        for system in qa_systems:
            for cat, entry in qa.items():
                e = entry.get(system)
                if not e:
                    continue
                lines.append(
                    f"| {system} | {cat} | {e['n']} | {_fmt(e['accuracy'])} | "
                    f"{e['ci95'][0]:.3f}-{e['ci95'][1]:.3f} | "
                    f"{_tokens(e['context_tokens_mean'])} | {e['errors']} |"
                )
        lines.append("")
    for note in report.get("notes", []):
        lines.append(f"> {note}")
    return "\n".join(lines).rstrip() + "\n"


def _single_metric(summary: dict[str, Any], systems: Sequence[str], metric: str) -> list[str]:
    """A table of one metric without ``@k``: its mean per system and category where scored
    (the families tables need a column per k, which such a metric does not have)."""
    lines = [f"## {metric}", "", "| system | category | n | mean |", "| --- | --- | ---: | ---: |"]
    for system in systems:
        for cat, entry in summary.items():
            value = entry.get(system, {}).get(metric)
            if value is not None:
                lines.append(f"| {system} | {cat} | {entry['n'].get(metric, 0)} | {_fmt(value)} |")
    return lines + [""]


# --------------------------------------------------------------------------------------------
# The report object and the run directory


def build_report(
    *,
    benchmark: str,
    title: str,
    systems: Sequence[str],
    rows: Sequence[dict[str, Any]],
    info: dict[str, Any] | None = None,
    qa_systems: Sequence[str] = (),
    headline: str | None = None,
    headline_metrics: Sequence[str] = (),
    notes: Iterable[str] = (),
    command: str | None = None,
) -> dict[str, Any]:
    """The harness report: run info, the score summary, Memlane against the best baseline
    (``comparison``, and ``beats_best_baseline`` for each of ``headline_metrics`` the run has),
    the QA summary when rows hold QA results. ``headline`` names the metric the per-category
    plot shows."""
    comparison = compare_to_baselines(rows, systems)
    report: dict[str, Any] = {
        "benchmark": benchmark,
        "title": title,
        "systems": list(systems),
        "info": dict(info or {}),
        "headline": headline,
        "notes": list(notes),
        "command": command,
        "summary": summarize_scores(rows, systems),
        "headline_metrics": list(headline_metrics),
        "comparison": comparison,
        "beats_best_baseline": beats_best_baseline(comparison, headline_metrics),
    }
    ablation = tree_ablation(rows, headline_metrics)
    if ablation:
        report["tree_ablation"] = ablation
    if qa_systems and any(r.get("qa") for r in rows):
        report["qa_systems"] = list(qa_systems)
        report["qa_summary"] = summarize_qa(rows, qa_systems)
    return report


class QuestionLog:
    """Per-question JSON Lines written as the run goes, so an interrupted run keeps its rows."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._file: TextIO | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "w", encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> QuestionLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_run(run_dir: Path, report: dict[str, Any], *, plots: bool = True) -> list[Path]:
    """Write ``report.json``, ``summary.md`` and the plots into ``run_dir`` (the question log
    is written during the run by :class:`QuestionLog`). Returns the files written."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    written = [run_dir / "report.json", run_dir / "summary.md"]
    written[0].write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    written[1].write_text(markdown(report), encoding="utf-8")
    if plots:
        from evals.plots import plot_report

        written += plot_report(report, run_dir)
    return written
