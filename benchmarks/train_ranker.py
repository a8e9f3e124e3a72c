"""Train the learned ranker (memlane/recall/learned.py) on the calibration halves of the three
dev sets, and say how it does on the held halves beside the order recall gives without it.

    # 1. the rows: every calibration and held question recalled on the eval banks (built by
    #    `memlane eval locomo|longmemeval|answers --data-dir D` first), per budget
    python -m benchmarks.train_ranker dump --budget mid --locomo-dir D1 --lme-dir D2 --answers-dir D3
    # 2. the model: LightGBM lambdarank on the calibration rows; the held rows scored
    python -m benchmarks.train_ranker train --budget mid
    # 3. the real measure: the evals on the held halves with the model (recall.ranker=learned)
    #    beside the fused order (recall.ranker=fused), same banks, same run

Rows go to ``--rows`` (default .memlane-eval/ranker-rows/), the model to
memlane/recall/models/ranker-<budget>.txt. Each dev set weighs the same in training whatever
its number of questions (LoCoMo has ~800 calibration questions, LongMemEval 30, the answer set
181): a question's rows weigh 1 / (its set's questions).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DEFAULT_ROWS = ROOT / ".memlane-eval" / "ranker-rows"


def _rows_path(rows: Path, dataset: str, split: str, budget: str) -> Path:
    return rows / f"{dataset}-{split}-{budget}.npz"


def dump(args: argparse.Namespace) -> None:
    from evals.ranker_data import answer_questions, collect, lme_questions, locomo_questions
    from memlane import Memory, Settings

    sets = {
        "locomo": (args.locomo_dir, lambda split: locomo_questions(SHARED / "locomo10.json", split)),
        "longmemeval": (
            args.lme_dir,
            lambda split: lme_questions(SHARED / "longmemeval_s_dev60.json", split),
        ),
        "answers": (args.answers_dir, answer_questions),
        "answers-train": (
            args.answers_train_dir,
            lambda split: answer_questions("train") if split == "train" else iter(()),
        ),
    }
    args.rows.mkdir(parents=True, exist_ok=True)
    for name, (data_dir, questions) in sets.items():
        if data_dir is None:
            continue
        settings = Settings(data_dir=data_dir)
        settings.recall.ranker = "fused"  # the rows are the stages' figures, not a model's order
        with Memory(settings) as memory:
            for split in args.splits:
                qs = list(questions(split))
                done = [0]

                def tick(done=done, n=len(qs), name=name, split=split) -> None:
                    done[0] += 1
                    if done[0] % 50 == 0 or done[0] == n:
                        print(f"{name} {split}: {done[0]}/{n}", file=sys.stderr)

                rows = collect(memory, qs, args.budget, progress=tick)
                out = _rows_path(args.rows, name, split, args.budget)
                rows.save(out)
                print(
                    f"{out}: {len(rows.questions)} questions, {len(rows.y)} rows, {int(rows.y.sum())} relevant"
                )


def _load(rows: Path, split: str, budget: str, sets: list[str]):
    parts = []
    for name in sets:
        path = _rows_path(rows, name, split, budget)
        if path.exists():
            parts.append((name, np.load(path)))
    return parts


def _precision_at_1(scores: np.ndarray, y: np.ndarray, group: np.ndarray) -> tuple[float, float]:
    """Per question: whether the best-scored row is relevant, and the share of its relevant
    rows among its 10 best (means over questions that have a relevant row)."""
    p1, r10 = [], []
    for g in np.unique(group):
        sel = group == g
        yy, ss = y[sel], scores[sel]
        if yy.sum() == 0:
            continue
        order = np.argsort(-ss, kind="stable")
        p1.append(float(yy[order[0]] > 0))
        r10.append(float(yy[order[:10]].sum() / yy.sum()))
    return float(np.mean(p1)), float(np.mean(r10))


def _fit(args: argparse.Namespace, parts: list[tuple[str, Any, Any]]):
    """A LightGBM lambdarank model on ``parts`` ((set, rows, the questions to use: None for
    all)). Each dev set weighs the same whatever its number of questions; the answer set's
    training histories count as the answer set."""
    import lightgbm

    from memlane.recall.features import FEATURES

    X, y, group_sizes, weight = [], [], [], []
    sets: dict[str, int] = {}
    for name, d, questions in parts:
        qs = np.unique(d["group"]) if questions is None else questions
        key = name.removesuffix("-train")
        sets[key] = sets.get(key, 0) + len(qs)
    for name, d, questions in parts:
        g = d["group"]
        for q in np.unique(g) if questions is None else questions:
            sel = g == q
            X.append(d["X"][sel])
            y.append(d["y"][sel])
            group_sizes.append(int(sel.sum()))
            weight.append(1.0 / sets[name.removesuffix("-train")])
    train_set = lightgbm.Dataset(
        np.vstack(X), np.concatenate(y), group=group_sizes, feature_name=list(FEATURES), free_raw_data=False
    )
    # Query weights (one per group): each dev set weighs the same.
    train_set.set_weight(np.concatenate([np.full(n, w) for n, w in zip(group_sizes, weight)]))
    params = {
        "objective": "lambdarank",
        "metric": "ndcg",
        "ndcg_eval_at": [1, 3, 10],
        "learning_rate": args.learning_rate,
        "num_leaves": args.leaves,
        "min_data_in_leaf": args.min_leaf,
        "feature_fraction": 0.8,
        "bagging_fraction": 0.8,
        "bagging_freq": 1,
        "lambdarank_truncation_level": 20,
        "seed": 0,
        "deterministic": True,
        "num_threads": 2,
        "verbose": -1,
    }
    return lightgbm.train(params, train_set, num_boost_round=args.rounds)


def _calibration(args: argparse.Namespace) -> list[tuple[str, Any]]:
    cal = _load(args.rows, "calibration", args.budget, args.sets) + _load(
        args.rows, "train", args.budget, [s for s in args.sets if s.endswith("-train")]
    )
    if not cal:
        raise SystemExit(f"no calibration rows in {args.rows}: run `dump` first")
    return cal


def train(args: argparse.Namespace) -> None:
    from memlane.recall.features import FEATURES

    booster = _fit(args, [(name, d, None) for name, d in _calibration(args)])
    out = ROOT / "memlane" / "recall" / "models" / f"ranker-{args.budget}.txt"
    if args.dry_run:
        out = args.rows / f"ranker-{args.budget}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(out))
    print(f"model: {out} ({args.rounds} rounds, {args.leaves} leaves)")
    report = {}
    for split in args.score_splits:
        for name, d in _load(args.rows, split, args.budget, args.sets):
            Xs, ys, gs = d["X"], d["y"], d["group"]
            learned = _precision_at_1(booster.predict(Xs), ys, gs)
            # the order without the model: the candidates' fused order (cross-encoder join
            # aside), which the rows keep (row order within a question)
            fused = _precision_at_1(-np.arange(len(ys), dtype=float), ys, gs)
            report[f"{name} {split}"] = {"learned p@1, r@10": learned, "fused order p@1, r@10": fused}
            print(
                f"{name:12} {split:12} learned p@1 {learned[0]:.3f} r@10 {learned[1]:.3f}   "
                f"fused order p@1 {fused[0]:.3f} r@10 {fused[1]:.3f}"
            )
    imp = booster.feature_importance("gain")
    top = sorted(zip(FEATURES, imp), key=lambda kv: -kv[1])[:12]
    print("gain:", ", ".join(f"{k} {v:.0f}" for k, v in top))
    (args.rows / f"train-{args.budget}.json").write_text(json.dumps(report, indent=1))


def cv(args: argparse.Namespace) -> None:
    """K-fold cross-validation on the calibration rows (folds by question; the training
    histories always train): how a choice of parameters does before any held row is read."""
    cal = _calibration(args)
    scored = {name: np.zeros(len(d["y"])) for name, d in cal if not name.endswith("-train")}
    for fold in range(args.folds):
        parts = [
            (
                name,
                d,
                None
                if name.endswith("-train")
                else [q for q in np.unique(d["group"]) if q % args.folds != fold],
            )
            for name, d in cal
        ]
        booster = _fit(args, parts)
        for name, d in cal:
            if name in scored:
                test = d["group"] % args.folds == fold
                scored[name][test] = booster.predict(d["X"][test])
    print(
        f"{args.folds}-fold, {args.rounds} rounds, {args.leaves} leaves, min leaf {args.min_leaf}, sets {args.sets}"
    )
    for name, d in cal:
        if name in scored:
            p1, r10 = _precision_at_1(scored[name], d["y"], d["group"])
            f1, f10 = _precision_at_1(-np.arange(len(d["y"]), dtype=float), d["y"], d["group"])
            print(f"{name:12} learned p@1 {p1:.3f} r@10 {r10:.3f}   fused order p@1 {f1:.3f} r@10 {f10:.3f}")


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", default="mid", choices=("low", "mid", "high"))
    p.add_argument("--rows", type=Path, default=DEFAULT_ROWS)
    p.add_argument("--sets", nargs="+", default=["locomo", "longmemeval", "answers", "answers-train"])
    # chosen by `cv` (4 folds, mid, 2026-11-28), the mean calibration P@1 of the three sets:
    # 7 leaves 0.653, 15 leaves 0.652, 31 leaves 0.698, 63 leaves 0.669 (min leaf 50, 300
    # rounds; docs/results.md, "the learned ranker")
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--leaves", type=int, default=31)
    p.add_argument("--min-leaf", type=int, default=50)
    p.add_argument("--learning-rate", type=float, default=0.05)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="Recall the dev sets' questions and save the candidates' rows.")
    d.add_argument("--budget", default="mid", choices=("low", "mid", "high"))
    d.add_argument("--rows", type=Path, default=DEFAULT_ROWS)
    d.add_argument("--locomo-dir", type=Path)
    d.add_argument("--lme-dir", type=Path)
    d.add_argument("--answers-dir", type=Path)
    d.add_argument("--answers-train-dir", type=Path, help="Banks of evals/answers/train/ (split: train).")
    d.add_argument("--splits", nargs="+", default=["calibration", "held"])
    d.set_defaults(fn=dump)
    t = sub.add_parser("train", help="Train on the calibration rows; score the held ones.")
    _model_options(t)
    t.add_argument("--score-splits", nargs="+", default=["calibration"], help="Held: once, at the end.")
    t.add_argument(
        "--dry-run", action="store_true", help="Write the model beside the rows, not into the package."
    )
    t.set_defaults(fn=train)
    c = sub.add_parser("cv", help="Cross-validate the training parameters on the calibration rows.")
    _model_options(c)
    c.add_argument("--folds", type=int, default=4)
    c.set_defaults(fn=cv)
    args = p.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
