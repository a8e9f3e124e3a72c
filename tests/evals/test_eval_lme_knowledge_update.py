"""LongMemEval's knowledge-update metric (evals/longmemeval.py, latest_answer_session_first):
the most recent answer session must rank above every older answer session, on hand-built
rankings; then through score_question on a question read from a file, and in the Markdown
summary."""

from __future__ import annotations

import json
from datetime import datetime

from evals.longmemeval import LATEST_FIRST, latest_answer_session_first, score_question
from evals.report import build_report, markdown
from memlane.ingest.longmemeval import load_longmemeval

D = {  # session -> (date, haystack position)
    "old": (datetime(2023, 5, 1), 0),
    "mid": (datetime(2023, 8, 1), 2),
    "new": (datetime(2023, 11, 30), 5),
}


def test_latest_session_above_every_older_one():
    assert latest_answer_session_first(["x", "new", "old", "mid"], ["old", "mid", "new"], D) == 1.0
    # one older session above the latest is enough to fail
    assert latest_answer_session_first(["mid", "new", "old"], ["old", "mid", "new"], D) == 0.0
    # the gold order in the file does not matter, only the dates
    assert latest_answer_session_first(["new", "old"], ["new", "old"], D) == 1.0
    assert latest_answer_session_first(["old", "new"], ["new", "old"], D) == 0.0


def test_a_session_not_retrieved_ranks_last():
    # older sessions not retrieved: the retrieved latest is above them
    assert latest_answer_session_first(["x", "y", "new"], ["old", "new"], D) == 1.0
    # the latest not retrieved: below the retrieved older one, and not above an unretrieved one
    assert latest_answer_session_first(["old", "x"], ["old", "new"], D) == 0.0
    assert latest_answer_session_first(["x", "y"], ["old", "new"], D) == 0.0


def test_ties_in_date_go_to_the_later_haystack_position():
    same_day = {"a": (datetime(2023, 5, 1), 3), "b": (datetime(2023, 5, 1), 7)}
    assert latest_answer_session_first(["b", "a"], ["a", "b"], same_day) == 1.0
    assert latest_answer_session_first(["a", "b"], ["a", "b"], same_day) == 0.0


def test_fewer_than_two_answer_sessions_is_not_scored():
    assert latest_answer_session_first(["new"], ["new"], D) is None
    assert latest_answer_session_first(["new"], ["new", "new"], D) is None


def _question(qtype: str, answer_sessions: list[str]) -> dict:
    turn = [{"role": "user", "content": "I have two cats now.", "has_answer": True}]
    other = [{"role": "user", "content": "Any tips for sourdough?", "has_answer": False}]
    return {
        "question_id": f"q-{qtype}",
        "question_type": qtype,
        "question": "How many cats do I have?",
        "question_date": "2023/12/01 (Fri) 10:00",
        "answer": "two",
        "answer_session_ids": answer_sessions,
        # haystack in file order, not in date order: the dates decide which is latest
        "haystack_session_ids": ["ans_new", "noise", "ans_old"],
        "haystack_dates": ["2023/11/20 (Mon) 09:00", "2023/10/01 (Sun) 09:00", "2023/06/02 (Fri) 09:00"],
        "haystack_sessions": [turn, other, turn],
    }


def test_score_question_and_the_summary(tmp_path):
    path = tmp_path / "lme.json"
    data = [
        _question("knowledge-update", ["ans_old", "ans_new"]),
        _question("multi-session", ["ans_old", "ans_new"]),
    ]
    path.write_text(json.dumps(data))
    ku, multi = load_longmemeval(path)
    ks = (1, 5)
    good = score_question(ku, ["ans_new:1", "noise:1", "ans_old:1"], ks)
    bad = score_question(ku, ["ans_old:1", "ans_new:1"], ks)
    assert good[LATEST_FIRST] == 1.0 and bad[LATEST_FIRST] == 0.0
    # only knowledge-update questions get it
    assert LATEST_FIRST not in score_question(multi, ["ans_new:1"], ks)

    rows = [
        {"id": "a", "category": "knowledge-update", "scores": {"memlane": good, "bm25": bad}},
        {"id": "b", "category": "knowledge-update", "scores": {"memlane": good, "bm25": good}},
        {
            "id": "c",
            "category": "multi-session",
            "scores": {"memlane": score_question(multi, ["ans_new:1"], ks)},
        },
    ]
    report = build_report(benchmark="longmemeval", title="t", systems=["memlane", "bm25"], rows=rows)
    assert report["summary"]["knowledge-update"]["memlane"][LATEST_FIRST] == 1.0
    assert report["summary"]["knowledge-update"]["bm25"][LATEST_FIRST] == 0.5
    assert report["summary"]["all"]["n"][LATEST_FIRST] == 2
    md = markdown(report)
    assert f"## {LATEST_FIRST}" in md
    assert "| bm25 | knowledge-update | 2 | 0.500 |" in md
    assert "| memlane | all | 2 | 1.000 |" in md
