"""Train the learned ranker (memlane/recall/learned.py) on the calibration halves of the three
dev sets, and say how it does on the held halves beside the order recall gives without it.

    # 1. the rows: every calibration and held question recalled on the eval banks (built by
    #    `memlane eval locomo|longmemeval|answers --data-dir D` first), per budget
    python -m training.train_ranker dump --budget mid --locomo-dir D1 --lme-dir D2 --answers-dir D3
    # 2. the model: LightGBM lambdarank on the calibration rows; the held rows scored
    python -m training.train_ranker train --budget mid
    # 3. the real measure: the evals on the held halves with the model (recall.ranker=learned)
    #    beside the fused order (recall.ranker=fused), same banks, same run

Leave-one-source-out (training/ranker_loso.py; docs/evaluation.md): rows per source, unsplit,
then each source scored by a model trained on every other source:

    python -m training.train_ranker dump --source friends --bank-dir /work/scratch/banks/friends
    python -m training.train_ranker dump --source beam --file BEAM_DIR --bank-dir /work/scratch/beam/banks
    python -m training.train_ranker loso --sources locomo longmemeval team friends assistant [--grid]

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

from training.ranker_loso import FitParams, fit_ranker

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DEFAULT_ROWS = ROOT / ".memlane-eval" / "ranker-rows"


def _rows_path(rows: Path, dataset: str, split: str, budget: str) -> Path:
    return rows / f"{dataset}-{split}-{budget}.npz"


def _collect(data_dir: Path, name: str, split: str, questions, budget: str, out: Path) -> None:
    """Recall ``questions`` on the banks in ``data_dir`` and save their rows to ``out``."""
    from evals.ranker_data import collect
    from memlane import Memory, Settings

    settings = Settings(data_dir=data_dir)
    settings.recall.ranker = "fused"  # the rows are the stages' figures, not a model's order
    with Memory(settings) as memory:
        qs = list(questions)
        done = [0]

        def tick() -> None:
            done[0] += 1
            if done[0] % 50 == 0 or done[0] == len(qs):
                print(f"{name} {split}: {done[0]}/{len(qs)}", file=sys.stderr)

        rows = collect(memory, qs, budget, progress=tick)
    rows.save(out)
    print(f"{out}: {len(rows.questions)} questions, {len(rows.y)} rows, {int(rows.y.sum())} relevant")


def _commit() -> str:
    """HEAD, with "+dirty" where memlane/recall/ differs from it (the features the rows hold)."""
    import subprocess

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "HEAD")
    if not head:  # a copy outside git (git archive): the caller names the commit
        return "unknown: not a git checkout"
    return head + ("+dirty" if git("status", "--porcelain", "memlane/recall") else "")


def dump(args: argparse.Namespace) -> None:
    from evals.ranker_data import answer_questions, lme_questions, locomo_questions, source_questions
    from memlane.recall.features import FEATURES

    args.rows.mkdir(parents=True, exist_ok=True)
    if args.source is not None:
        if args.bank_dir is None:
            raise SystemExit("--source needs --bank-dir (the banks `memlane eval` built for it)")
        out = _rows_path(args.rows, args.source, "all", args.budget)
        try:
            qs = source_questions(args.source, args.file)
        except (ValueError, FileNotFoundError) as exc:
            raise SystemExit(str(exc)) from None
        _collect(args.bank_dir, args.source, "all", qs, args.budget, out)
        meta = {
            "source": args.source,
            "file": str(args.file) if args.file else None,
            "bank_dir": str(args.bank_dir),
            "budget": args.budget,
            "commit": _commit(),
            "features": list(FEATURES),
        }
        out.with_suffix(".json").write_text(json.dumps(meta, indent=1))
        return
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
    for name, (data_dir, questions) in sets.items():
        if data_dir is None:
            continue
        for split in args.splits:
            qs = questions(split)
            _collect(data_dir, name, split, qs, args.budget, _rows_path(args.rows, name, split, args.budget))


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


def _params(args: argparse.Namespace) -> FitParams:
    return FitParams(args.rounds, args.leaves, args.min_leaf, args.learning_rate, args.monotone)


def _fit(args: argparse.Namespace, parts: list[tuple[str, Any, Any]]):
    """A LightGBM lambdarank model on ``parts`` ((set, rows, the questions to use: None for
    all)). Each dev set weighs the same whatever its number of questions; the answer set's
    training histories count as the answer set."""
    return fit_ranker(parts, _params(args))


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


def lme_sample(args: argparse.Namespace) -> None:
    from evals.ranker_data import lme_sample as sample

    rows = sample(args.pool, args.dev, args.extra, args.seed)
    args.out.write_text(json.dumps(rows))
    print(f"{args.out}: {len(rows)} questions ({args.extra} beside {args.dev.name}'s, seed {args.seed})")


def loso(args: argparse.Namespace) -> None:
    """Leave-one-source-out (training/ranker_loso.py): each source scored by a model trained
    on every other; with ``--grid``, every grid point, ranked by the mean P@1 over sources."""
    from memlane.recall.features import FEATURES
    from training.ranker_loso import (
        SourceRows,
        format_grid,
        format_report,
        grid,
        loso_report,
        loso_scores,
        mean_p1,
    )

    sources = {}
    for name in args.sources:
        path = _rows_path(args.rows, name, "all", args.budget)
        if not path.exists():
            raise SystemExit(f"no rows for source {name}: {path} (run `dump --source {name}` first)")
        sources[name] = SourceRows.load(path)
        if sources[name].X.shape[1] != len(FEATURES):
            raise SystemExit(f"{path} holds other features than memlane/recall/features.py's: dump it again")
        meta = path.with_suffix(".json")
        commit = json.loads(meta.read_text())["commit"] if meta.exists() else "?"
        print(f"{name}: {len(sources[name].qid)} questions, {len(sources[name].y)} rows (commit {commit})")
    out: dict[str, Any] = {"sources": list(sources), "budget": args.budget}
    params = _params(args)
    models = args.models_out or args.rows / "loso-models"

    def save(held: str, model) -> None:
        # the model that never saw ``held``: `memlane eval answers --source HELD --ranker-models`
        (models / held).mkdir(parents=True, exist_ok=True)
        model.save_model(str(models / held / f"ranker-{args.budget}.txt"))

    report = loso_report(sources, loso_scores(sources, params, saved=save)[params.rounds])
    print(format_report(report, f"leave-one-source-out, {params.label()}, budget {args.budget}"))
    print(f"models (each without its source): {models}/<source>/ranker-{args.budget}.txt")
    out["params"] = {"label": params.label(), "report": report}
    if args.grid:
        results = grid(
            sources,
            args.learning_rate,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
            train_questions=args.grid_questions,
        )
        print()
        print(format_grid(results))
        best_params, best = max(results, key=lambda pr: mean_p1(pr[1]))
        print()
        print(format_report(best, f"best of the grid: {best_params.label()}"))
        out["grid_questions"] = args.grid_questions
        out["grid"] = [{"label": p.label(), "mean p@1": mean_p1(r), "report": r} for p, r in results]
    target = args.out or args.rows / f"loso-{args.budget}.json"
    target.write_text(json.dumps(out, indent=1))
    print(f"written: {target}")


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
    p.add_argument(
        "--monotone",
        action="store_true",
        help="Constrain the features of known direction (ranker_loso.MONOTONE).",
    )


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
    d.add_argument(
        "--source",
        help="One source, unsplit, for `loso`: locomo, longmemeval, team, an answer-set name "
        "(evals/answers/sources/NAME.json) or beam (--file: a BEAM directory, evals/beam_data.py); "
        "rows to <rows>/NAME-all-<budget>.npz.",
    )
    d.add_argument("--bank-dir", type=Path, help="With --source: the banks `memlane eval` built for it.")
    d.add_argument("--file", type=Path, help="With --source: its file, where not the default.")
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
    sm = sub.add_parser("lme-sample", help="LongMemEval source: dev60 plus a seeded draw from a pool.")
    sm.add_argument("pool", type=Path, help="/work/shared/tools/longmemeval_pool.py's output.")
    sm.add_argument("out", type=Path)
    sm.add_argument("--dev", type=Path, default=SHARED / "longmemeval_s_dev60.json")
    sm.add_argument("--extra", type=int, default=90)
    sm.add_argument("--seed", type=int, default=20261207)
    sm.set_defaults(fn=lme_sample)
    lo = sub.add_parser(
        "loso", help="Leave-one-source-out: each source scored by a model trained on the others."
    )
    _model_options(lo)
    lo.add_argument("--sources", nargs="+", default=["locomo", "longmemeval", "team", "friends", "assistant"])
    lo.add_argument("--grid", action="store_true", help="Also pick the capacity by the mean LOSO P@1.")
    lo.add_argument(
        "--grid-questions",
        type=int,
        help="In the grid, each training source gives at most N questions (a seeded draw): "
        "an affordable grid on 2 cores; the scored source is always whole.",
    )
    lo.add_argument("--out", type=Path, help="JSON report (default: <rows>/loso-<budget>.json).")
    lo.add_argument(
        "--models-out",
        type=Path,
        help="Each model, as <dir>/<source>/ranker-<budget>.txt (default: <rows>/loso-models).",
    )
    lo.set_defaults(fn=loso)
    args = p.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
