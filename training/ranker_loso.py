"""Leave-one-source-out for the learned ranker: for each source (every question one group of
writers wrote: LoCoMo, LongMemEval, the team's answer set, each answer set written apart, BEAM),
a model trained on every other source scores that source's rows, beside the fused order
(row order) of the same rows. A model judged on questions its own writers wrote overstates
how it carries over to a new user's chats; this measures the carrying over.

The rows are ``python -m training.train_ranker dump --source NAME`` files
(``<rows>/<name>-all-<budget>.npz``); ``python -m training.train_ranker loso`` runs this and
prints the tables (docs/evaluation.md, "Leave-one-source-out").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

ALL = "all"
METRICS = ("p@1", "hit@3", "mrr@10")
# Features whose direction is known whatever the question: more of it never makes a candidate
# less likely to hold the evidence, all else equal (+1), or less likely (-1, a rank: 1 is the
# best). The fused score and rank, the cross-encoder's score and rank, and the semantic and
# lexical channels' scores and ranks (the channels' similarity to the question). The graph and
# temporal channels are left free: their scores count links and time, not the question's words.
MONOTONE = {
    "rrf": 1,
    "fused_rank": -1,
    "cross": 1,
    "cross_rank": -1,
    "semantic_score": 1,
    "lexical_score": 1,
    "semantic_rank": -1,
    "lexical_rank": -1,
    "lex_text": 1,
}


@dataclass(frozen=True, slots=True)
class FitParams:
    """The LightGBM lambdarank parameters a fit takes (training/train_ranker.py's defaults)."""

    rounds: int = 300
    leaves: int = 31
    min_leaf: int = 50
    learning_rate: float = 0.05
    monotone: bool = False

    def label(self) -> str:
        mono = " mono" if self.monotone else ""
        return f"{self.rounds} rounds, {self.leaves} leaves, min leaf {self.min_leaf}{mono}"


@dataclass(frozen=True, slots=True)
class SourceRows:
    """One source's rows: features, labels (1.0: the candidate holds the evidence), the question
    of each row (0..n-1, contiguous, in order), and per question its id and kind."""

    X: np.ndarray
    y: np.ndarray
    group: np.ndarray
    qid: np.ndarray
    kind: np.ndarray

    @classmethod
    def load(cls, path: Path) -> SourceRows:
        d = np.load(path)
        return cls(d["X"], d["y"], d["group"], d["qid"], d["kind"])


# A training part: (source name, its rows, the questions to train on: None for all). Every part
# of one name counts as that source; each source weighs the same whatever its size.
Part = tuple[str, Any, Any]


def fit_ranker(parts: Sequence[Part], params: FitParams):
    """A LightGBM lambdarank model on ``parts``: each source weighs the same (a question's rows
    weigh 1 / its source's questions); names ending ``-train`` count as the name before it."""
    import lightgbm

    from memlane.recall.features import FEATURES

    X: list[np.ndarray] = []
    y: list[np.ndarray] = []
    group_sizes: list[int] = []
    weight: list[float] = []
    sizes: dict[str, int] = {}
    for name, d, questions in parts:
        qs = np.unique(d["group"]) if questions is None else questions
        key = name.removesuffix("-train")
        sizes[key] = sizes.get(key, 0) + len(qs)
    for name, d, questions in parts:
        g = np.asarray(d["group"])
        qs = np.unique(g) if questions is None else np.asarray(questions)
        keep = np.isin(g, qs)
        order = np.argsort(g[keep], kind="stable")
        _, counts = np.unique(g[keep], return_counts=True)
        X.append(np.asarray(d["X"])[keep][order])
        y.append(np.asarray(d["y"])[keep][order])
        group_sizes.extend(int(c) for c in counts)
        weight.extend([1.0 / sizes[name.removesuffix("-train")]] * len(counts))
    train_set = lightgbm.Dataset(
        np.vstack(X), np.concatenate(y), group=group_sizes, feature_name=list(FEATURES), free_raw_data=False
    )
    # Query weights (one per group): each source weighs the same.
    train_set.set_weight(np.concatenate([np.full(n, w) for n, w in zip(group_sizes, weight)]))
    config: dict[str, Any] = {
        "objective": "lambdarank",
        "metric": "ndcg",
        "ndcg_eval_at": [1, 3, 10],
        "learning_rate": params.learning_rate,
        "num_leaves": params.leaves,
        "min_data_in_leaf": params.min_leaf,
        "feature_fraction": 0.8,
        "bagging_fraction": 0.8,
        "bagging_freq": 1,
        "lambdarank_truncation_level": 20,
        "seed": 0,
        "deterministic": True,
        # one thread: on the 2 shared cores the evals run on, 30 rounds on the team's 35k rows
        # took 2.7 s with one thread and 6.9 s with two
        "num_threads": 1,
        "verbose": -1,
    }
    if params.monotone:
        config["monotone_constraints"] = [MONOTONE.get(f, 0) for f in FEATURES]
    return lightgbm.train(config, train_set, num_boost_round=params.rounds)


def first_relevant(scores: np.ndarray, y: np.ndarray, group: np.ndarray) -> dict[int, int | None]:
    """Per question that has a relevant row: the 1-based place of its first relevant row in
    ``scores``' order (ties: row order); None for questions with no relevant row."""
    out: dict[int, int | None] = {}
    for g in np.unique(group):
        sel = np.flatnonzero(group == g)
        yy = y[sel]
        if yy.sum() == 0:
            out[int(g)] = None
            continue
        order = np.argsort(-scores[sel], kind="stable")
        out[int(g)] = int(np.flatnonzero(yy[order] > 0)[0]) + 1
    return out


def metrics_by_kind(places: Mapping[int, int | None], kind: np.ndarray) -> dict[str, dict[str, float]]:
    """P@1, hit@3 and MRR@10 per kind (and ``all``) over the questions that have a relevant
    candidate, with ``n`` (those questions) and ``missing`` (questions with none: no order
    can place what recall did not fetch)."""
    buckets: dict[str, list[int | None]] = {}
    for g, place in places.items():
        for k in (ALL, str(kind[g])):
            buckets.setdefault(k, []).append(place)
    out = {}
    for k, got in buckets.items():
        found = [p for p in got if p is not None]
        n = max(1, len(found))
        out[k] = {
            "n": float(len(found)),
            "missing": float(len(got) - len(found)),
            "p@1": sum(p == 1 for p in found) / n,
            "hit@3": sum(p <= 3 for p in found) / n,
            "mrr@10": sum(1.0 / p for p in found if p <= 10) / n,
        }
    return out


def fused_scores(rows: SourceRows) -> np.ndarray:
    """The fused order as scores: the rows keep the candidates' fused order within a question."""
    return -np.arange(len(rows.y), dtype=float)


def loso_scores(
    sources: Mapping[str, SourceRows],
    params: FitParams,
    rounds: Sequence[int] = (),
    fit: Callable[[Sequence[Part], FitParams], Any] = fit_ranker,
    saved: Callable[[str, Any], None] | None = None,
    train_questions: int | None = None,
) -> dict[int, dict[str, np.ndarray]]:
    """For each source, the scores of its rows by a model fitted on every other source's rows
    (never its own), after each of ``rounds`` boosting rounds (default: ``params.rounds``;
    one fit of the most rounds, predicted at fewer: boosting adds trees in order, so the first
    100 trees of a 300-round fit are the 100-round fit). ``{rounds: {source: scores}}``.
    ``saved(source, model)``: each model, given the source it did not see. ``train_questions``:
    each training source gives at most that many questions (a seeded draw, the same for every
    fit), to make a grid affordable; the scored source is always whole."""
    if len(sources) < 2:
        raise ValueError("leave-one-source-out needs two sources or more")
    rounds = sorted(set(rounds)) or [params.rounds]
    fit_params = replace(params, rounds=max(rounds))
    out: dict[int, dict[str, np.ndarray]] = {r: {} for r in rounds}
    for held, rows in sources.items():
        parts = [
            (name, {"X": r.X, "y": r.y, "group": r.group}, _draw(r, train_questions))
            for name, r in sources.items()
            if name != held
        ]
        model = fit(parts, fit_params)
        if saved is not None:
            saved(held, model)
        for r in rounds:
            out[r][held] = np.asarray(model.predict(rows.X, num_iteration=r), dtype=float)
    return out


def _draw(rows: SourceRows, n: int | None) -> np.ndarray | None:
    """At most ``n`` of the source's questions (seed 0, sorted), or None for all."""
    questions = np.unique(rows.group)
    if n is None or n >= len(questions):
        return None
    return np.sort(np.random.default_rng(0).choice(questions, size=n, replace=False))


def loso_report(sources: Mapping[str, SourceRows], scores: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Per source and kind, the learned order's metrics (``scores``) beside the fused order's."""
    report: dict[str, Any] = {}
    for name, rows in sources.items():
        report[name] = {
            "learned": metrics_by_kind(first_relevant(scores[name], rows.y, rows.group), rows.kind),
            "fused": metrics_by_kind(first_relevant(fused_scores(rows), rows.y, rows.group), rows.kind),
        }
    return report


def mean_p1(report: Mapping[str, Any], order: str = "learned") -> float:
    """The mean over sources of P@1 (each source weighing the same)."""
    return float(np.mean([r[order][ALL]["p@1"] for r in report.values()]))


def format_report(report: Mapping[str, Any], title: str) -> str:
    lines = [
        title,
        f"{'source':<12}{'kind':<27}{'n':>5}{'miss':>5}   "
        + "  ".join(f"{m:>7}" for m in METRICS)
        + "   |  fused "
        + "  ".join(f"{m:>7}" for m in METRICS),
    ]
    for name, r in report.items():
        kinds = [ALL, *sorted(k for k in r["learned"] if k != ALL)]
        for k in kinds:
            lm, fm = r["learned"][k], r["fused"][k]
            lines.append(
                f"{name if k == ALL else '':<12}{k:<27}{int(lm['n']):>5}{int(lm['missing']):>5}   "
                + "  ".join(f"{lm[m]:>7.3f}" for m in METRICS)
                + "   |        "
                + "  ".join(f"{fm[m]:>7.3f}" for m in METRICS)
            )
    lines.append(
        f"mean P@1 over sources: learned {mean_p1(report):.3f}, fused {mean_p1(report, 'fused'):.3f}"
    )
    return "\n".join(lines)


GRID_ROUNDS = (100, 300)
GRID_LEAVES = (7, 15, 31)
GRID_MIN_LEAF = (20, 50)
GRID_MONOTONE = (False, True)


def grid(
    sources: Mapping[str, SourceRows],
    learning_rate: float,
    progress: Callable[[str], None] | None = None,
    train_questions: int | None = None,
) -> list[tuple[FitParams, dict[str, Any]]]:
    """Every grid point's LOSO report (rounds x leaves x min leaf x monotone constraints)."""
    out = []
    for leaves, min_leaf, mono in itertools.product(GRID_LEAVES, GRID_MIN_LEAF, GRID_MONOTONE):
        params = FitParams(max(GRID_ROUNDS), leaves, min_leaf, learning_rate, mono)
        by_rounds = loso_scores(sources, params, GRID_ROUNDS, train_questions=train_questions)
        for r, scores in by_rounds.items():
            p = replace(params, rounds=r)
            out.append((p, loso_report(sources, scores)))
            if progress is not None:
                progress(f"{p.label()}: mean P@1 {mean_p1(out[-1][1]):.3f}")
    return out


def format_grid(results: Sequence[tuple[FitParams, Mapping[str, Any]]]) -> str:
    names = list(results[0][1]) if results else []
    lines = [f"{'parameters':<44}" + "".join(f"{n[:11]:>12}" for n in names) + f"{'mean P@1':>10}"]
    for params, report in sorted(results, key=lambda pr: -mean_p1(pr[1])):
        lines.append(
            f"{params.label():<44}"
            + "".join(f"{report[n]['learned'][ALL]['p@1']:>12.3f}" for n in names)
            + f"{mean_p1(report):>10.3f}"
        )
    if results:
        fused = results[0][1]
        lines.append(
            f"{'fused order':<44}"
            + "".join(f"{fused[n]['fused'][ALL]['p@1']:>12.3f}" for n in names)
            + f"{mean_p1(fused, 'fused'):>10.3f}"
        )
    return "\n".join(lines)
