"""Leave-one-source-out (training/ranker_loso.py): every source is scored only by a model that
never saw its rows, and the per-kind metrics read the first relevant row's place."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evals.answers_data import load_answer_set, source_answer_paths
from memlane.recall.features import FEATURES
from training.ranker_loso import (
    FitParams,
    SourceRows,
    first_relevant,
    fit_ranker,
    loso_report,
    loso_scores,
    metrics_by_kind,
)

pytest.importorskip("lightgbm")


def _source(tag: int, questions: int, rng: np.random.Generator) -> SourceRows:
    """``questions`` questions of 12 rows each; column 0 holds ``tag`` so a row names its source."""
    per = 12
    X = rng.normal(size=(questions * per, len(FEATURES)))
    X[:, 0] = tag
    y = np.zeros(questions * per)
    y[rng.choice(questions * per, size=questions * 3, replace=False)] = 1.0
    group = np.repeat(np.arange(questions), per)
    qid = np.array([f"s{tag}-q{i}" for i in range(questions)])
    kind = np.array(["now" if i % 2 else "fact" for i in range(questions)])
    return SourceRows(X, y, group, qid, kind)


def test_each_source_is_scored_by_a_model_that_never_saw_its_rows():
    rng = np.random.default_rng(0)
    sources = {"a": _source(1, 10, rng), "b": _source(2, 6, rng), "c": _source(3, 8, rng)}
    calls = []

    def spy(parts, params):
        model = fit_ranker(parts, params)
        calls.append(
            {
                "names": [name for name, _, _ in parts],
                "groups": {name: sorted(set(d["group"].tolist())) for name, d, _ in parts},
                "tags": set(np.concatenate([d["X"][:, 0] for _, d, _ in parts]).tolist()),
                "model": model,
                "rounds": params.rounds,
            }
        )
        return model

    params = FitParams(rounds=6, leaves=3, min_leaf=1)
    out = loso_scores(sources, params, rounds=(3, 6), fit=spy)

    assert len(calls) == 3
    held_by_call = []
    for call in calls:
        (held,) = set(sources) - set(call["names"])
        held_by_call.append(held)
        # the held source's rows are nowhere in the training data; every other source's are, whole
        assert call["tags"] == {1.0, 2.0, 3.0} - {sources[held].X[0, 0]}
        for name in call["names"]:
            assert call["groups"][name] == list(range(len(sources[name].qid)))
        assert call["rounds"] == 6  # one fit of the most rounds, read at fewer
        for r in (3, 6):
            assert np.allclose(out[r][held], call["model"].predict(sources[held].X, num_iteration=r))
    assert sorted(held_by_call) == ["a", "b", "c"]
    assert not np.allclose(out[3]["a"], out[6]["a"])


def test_a_capped_grid_trains_on_at_most_n_questions_of_each_other_source():
    rng = np.random.default_rng(2)
    sources = {"a": _source(1, 10, rng), "b": _source(2, 3, rng), "c": _source(3, 8, rng)}
    seen = []

    def spy(parts, params):
        seen.append({name: (d["X"][0, 0], q) for name, d, q in parts})
        return fit_ranker(parts, params)

    out = loso_scores(sources, FitParams(rounds=3, leaves=3, min_leaf=1), train_questions=4, fit=spy)
    for call in seen:
        (held,) = set(sources) - set(call)
        assert len(out[3][held]) == len(sources[held].y)  # the scored source is whole
        for name, (tag, questions) in call.items():
            assert tag == sources[name].X[0, 0]
            if name == "b":
                assert questions is None  # 3 questions, under the cap: all of them
            else:
                assert len(questions) == 4 and set(questions) <= set(range(len(sources[name].qid)))


def test_one_source_is_refused():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match="two sources"):
        loso_scores({"a": _source(1, 4, rng)}, FitParams(rounds=2))


def test_metrics_read_the_first_relevant_row_per_kind():
    # question 0 (fact): relevant at row 1 -> place 2 by scores; question 1 (now): relevant at
    # row 0 -> place 1; question 2 (now): no relevant row
    y = np.array([0, 1, 0, 1, 0, 0, 0, 0.0])
    group = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    scores = np.array([0.9, 0.5, 0.1, 0.7, 0.2, 1, 1, 1])
    places = first_relevant(scores, y, group)
    assert places == {0: 2, 1: 1, 2: None}
    m = metrics_by_kind(places, np.array(["fact", "now", "now"]))
    assert m["all"]["n"] == 2 and m["all"]["missing"] == 1
    assert m["all"]["p@1"] == 0.5 and m["all"]["hit@3"] == 1.0 and m["all"]["mrr@10"] == 0.75
    assert m["fact"]["p@1"] == 0.0 and m["fact"]["mrr@10"] == 0.5
    assert m["now"]["p@1"] == 1.0 and m["now"]["n"] == 1 and m["now"]["missing"] == 1


def test_the_report_puts_the_fused_row_order_beside_the_scores():
    rows = SourceRows(
        np.zeros((4, len(FEATURES))),
        np.array([0, 1, 1, 0.0]),
        np.array([0, 0, 1, 1]),
        np.array(["q0", "q1"]),
        np.array(["fact", "fact"]),
    )
    # the scores put q0's relevant row first and q1's second; row order is the reverse
    report = loso_report({"x": rows}, {"x": np.array([0.0, 1.0, 0.0, 1.0])})
    assert report["x"]["learned"]["all"]["p@1"] == 0.5
    assert report["x"]["fused"]["all"]["p@1"] == 0.5
    assert report["x"]["learned"]["all"]["mrr@10"] == 0.75


def test_an_answer_set_source_takes_the_assistant_said_kind(tmp_path):
    path = tmp_path / "friends.json"
    t = "2026-01-0{}T10:00:00+00:00"
    history = {
        "id": "f1",
        "user": "Ana",
        "assistant": "Bot",
        "sessions": [
            {
                "id": "f1-s1",
                "turns": [
                    {"id": "f1-s1-1", "speaker": "Ana", "timestamp": t.format(1), "text": "Any tip?"},
                    {"id": "f1-s1-2", "speaker": "Bot", "timestamp": t.format(1), "text": "Try rye."},
                ],
            }
        ],
        "questions": [
            {
                "id": "f1-q1",
                "question": "What did you suggest?",
                "asked_at": t.format(2),
                "kind": "assistant_said",
                "expected": ["f1-s1-2"],
            }
        ],
    }
    path.write_text(json.dumps({"histories": [history]}))
    (h,) = load_answer_set(path)
    assert h.questions[0].kind == "assistant_said"
    assert h.questions[0].expected == frozenset({"f1-s1:2"})
    assert source_answer_paths("friends")[0].name == "friends.json"
    assert [p.name for p in source_answer_paths("team")][:2] == ["calibration.json", "held.json"]
    with pytest.raises(ValueError, match="source"):
        source_answer_paths("../etc/passwd")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source", "nosuch"], "answer-set file not found"),
        (["--source", "../x"], "source '../x'"),
        (["--source", "team", "evals/answers/held.json"], "not both"),
        (["--source", "team", "--ranker-models", "{empty}"], "no ranker-mid.txt in"),
        (["--source", "team", "--ranker-models", "{bad}"], "does not load"),
    ],
)
def test_eval_answers_refuses_a_bad_source_or_model_directory(tmp_path, args, message):
    from typer.testing import CliRunner

    from cluster.cli import app

    (tmp_path / "empty").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "ranker-mid.txt").write_text("not a model\n")
    args = [a.format(empty=tmp_path / "empty", bad=tmp_path / "bad") for a in args]
    r = CliRunner().invoke(app, ["eval", "answers", "--data-dir", str(tmp_path / "d"), *args])
    assert r.exit_code == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not (tmp_path / "d").exists()  # nothing written before the input is checked
