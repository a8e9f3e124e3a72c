"""QA grading with a scripted LLM double, the shared report summary and the run directory."""

from __future__ import annotations

import json

import pytest

from evals.qa import (
    ANSWER_SYSTEM,
    answer_and_grade,
    lme_grader,
    lme_judge_prompt,
    lme_verdict,
    locomo_grader,
    locomo_judge_prompt,
    locomo_verdict,
)
from evals.report import build_report, markdown, summarize_qa, summarize_scores, write_run


class ScriptedLLM:
    """The allowed edge double: answers from the context when it holds the fact, judges by
    looking for the gold in the response; records every call."""

    def __init__(self, fact: str, gold: str, *, judge_style: str = "lme", fail: bool = False):
        self.fact, self.gold, self.judge_style, self.fail = fact, gold, judge_style, fail
        self.calls: list[tuple[list[dict], int]] = []

    def complete(self, messages, *, json_schema=None, max_tokens=1024, temperature=0.0):
        self.calls.append((messages, max_tokens))
        if self.fail:
            raise ConnectionError("endpoint down")
        if messages[0]["content"] == ANSWER_SYSTEM:
            return self.gold if self.fact in messages[1]["content"] else "I don't know."
        response = messages[0]["content"].split("Model Response: ")[-1].split("Generated answer: ")[-1]
        ok = self.gold in response.split("\n")[0]
        if self.judge_style == "lme":
            return "Yes." if ok else "No"
        return '{"label": "CORRECT"}' if ok else 'It is a different pet. {"label": "WRONG"}'


def test_lme_judge_prompts_per_type():
    p = lme_judge_prompt("temporal-reasoning", "How many days?", "18", "19 days")
    assert "do not penalize off-by-one errors" in p
    assert p.endswith(
        "Question: How many days?\n\nCorrect Answer: 18\n\nModel Response: 19 days\n\n"
        "Is the model response correct? Answer yes or no only."
    )
    assert "updated answer is the required answer.\n\nQuestion:" in lme_judge_prompt(
        "knowledge-update", "q", "a", "r"
    )
    assert "Rubric: a" in lme_judge_prompt("single-session-preference", "q", "a", "r")
    assert "answer no. \n\nQuestion: q" in lme_judge_prompt("multi-session", "q", "a", "r")
    abst = lme_judge_prompt("multi-session", "q", "a", "r", abstention=True)
    assert "correctly identifies the question as unanswerable" in abst and "Explanation: a" in abst
    with pytest.raises(ValueError, match="no LongMemEval judge prompt"):
        lme_judge_prompt("trivia", "q", "a", "r")


def test_verdicts():
    assert lme_verdict("Yes.") and lme_verdict("yes") and not lme_verdict("No")
    assert lme_verdict("Not sure, but yes")  # the official rule: 'yes' anywhere
    assert locomo_verdict('{"label": "CORRECT"}')
    assert not locomo_verdict('{"label": "WRONG"}')
    assert locomo_verdict("Same date, different format. CORRECT")
    assert not locomo_verdict("The answers differ. WRONG")
    assert not locomo_verdict("no label at all")
    assert "Gold answer: A cat" in locomo_judge_prompt("What pet?", "A cat", "a dog")


def test_answer_and_grade_with_scripted_llm():
    llm = ScriptedLLM("Minnow", "Minnow")
    entry = answer_and_grade(
        llm,
        question="What did I name my kayak?",
        context="[2024-05-18] user: I named my kayak Minnow.",
        context_tokens=12,
        grade=lme_grader("single-session-user", "What did I name my kayak?", "Minnow", False),
        verdict=lme_verdict,
    )
    assert entry == {"context_tokens": 12, "answer": "Minnow", "judge": "Yes.", "correct": True}
    # the judge got the official prompt with the official 10-token limit
    assert llm.calls[1][1] == 10 and "Correct Answer: Minnow" in llm.calls[1][0][0]["content"]
    miss = answer_and_grade(
        llm,
        question="q",
        context="nothing useful",
        context_tokens=2,
        grade=lme_grader("single-session-user", "q", "Minnow", False),
        verdict=lme_verdict,
    )
    assert miss["answer"] == "I don't know." and miss["correct"] is False

    locomo = ScriptedLLM("cat", "A cat", judge_style="locomo")
    entry = answer_and_grade(
        locomo,
        question="What pet?",
        context="no pets here",
        context_tokens=3,
        grade=locomo_grader("What pet?", "A cat"),
        verdict=locomo_verdict,
    )
    assert entry["correct"] is False and entry["judge"].endswith('{"label": "WRONG"}')


def test_llm_failure_is_logged_not_raised():
    entry = answer_and_grade(
        ScriptedLLM("x", "x", fail=True),
        question="q",
        context="c",
        context_tokens=1,
        grade=locomo_grader("q", "x"),
        verdict=locomo_verdict,
    )
    assert entry["error"] == "ConnectionError: endpoint down" and "correct" not in entry


def _rows():
    return [
        {
            "id": "1",
            "category": "a",
            "scores": {"m": {"recall@1": 1.0, "recall@5": 1.0}, "b": {"recall@1": 0.0, "recall@5": 1.0}},
            "qa": {"m": {"correct": True, "context_tokens": 100}},
        },
        {
            "id": "2",
            "category": "a",
            "scores": {"m": {"recall@1": 0.0, "recall@5": 1.0}, "b": {"recall@1": 0.0, "recall@5": 0.0}},
            "qa": {"m": {"correct": True, "context_tokens": 300}},
        },
        {
            "id": "3",
            "category": "b",
            "scores": {"m": {}, "b": {}},  # e.g. abstention: no scores
            "qa": {"m": {"correct": False, "context_tokens": 200}},
        },
        {
            "id": "4",
            "category": "b",
            "scores": {"m": {"recall@1": 1.0, "recall@5": 1.0}, "b": {"recall@1": 1.0, "recall@5": 1.0}},
            "qa": {"m": {"correct": True, "context_tokens": 400}},
        },
        {"id": "5", "category": "b", "scores": {"m": {}, "b": {}}, "qa": {"m": {"error": "boom"}}},
    ]


def test_summarize_scores_means_over_scored_rows():
    s = summarize_scores(_rows(), ["m", "b"])
    assert list(s) == ["all", "a", "b"]
    # m r@1 over rows 1,2,4 = (1+0+1)/3; b r@5 = (1+0+1)/3; 5 rows, 3 scored
    assert s["all"]["m"]["recall@1"] == round(2 / 3, 4) and s["all"]["b"]["recall@5"] == round(2 / 3, 4)
    assert s["all"]["questions"] == 5 and s["all"]["n"]["recall@1"] == 3
    assert s["a"]["m"] == {"recall@1": 0.5, "recall@5": 1.0} and s["b"]["n"]["recall@1"] == 1


def test_summarize_qa_wilson_and_tokens():
    q = summarize_qa(_rows(), ["m"])
    # all: 3 correct of 4 graded (row 5 errored). Wilson, z=1.96: p=.75, z2=3.8416,
    # denom 1.9604, centre (0.75+0.4802)/1.9604 = 0.62753, half 1.96*sqrt(.046875+.060025)/1.9604
    # = 0.32689 -> (0.3006, 0.9544). Tokens (100+300+200+400)/4 = 250.
    assert q["all"]["m"]["n"] == 4 and q["all"]["m"]["correct"] == 3 and q["all"]["m"]["errors"] == 1
    assert q["all"]["m"]["accuracy"] == 0.75
    assert q["all"]["m"]["ci95"] == pytest.approx([0.3006, 0.9544], abs=1e-4)
    assert q["all"]["m"]["context_tokens_mean"] == 250.0
    # b: 1 of 2 graded
    assert q["b"]["m"]["accuracy"] == 0.5 and q["b"]["m"]["errors"] == 1


def test_markdown_and_run_directory(tmp_path):
    report = build_report(
        benchmark="t",
        title="Test run",
        systems=["m", "b"],
        rows=_rows(),
        info={"questions": 5},
        qa_systems=["m"],
        headline="recall@5",
        notes=["a note"],
        command="memlane eval t",
    )
    md = markdown(report)
    assert "## recall" in md and "| system | category | n | @1 | @5 |" in md
    assert "| m | all | 3 | 0.667 | 1.000 |" in md
    assert "| m | all | 4 | 0.750 | 0.301-0.954 | 250.0 | 1 |" in md
    assert "reproduce: `memlane eval t`" in md and "> a note" in md
    files = write_run(tmp_path / "run", report)
    names = sorted(p.name for p in files)
    assert names == ["by_category.png", "qa_accuracy.png", "recall_at_k.png", "report.json", "summary.md"]
    for p in files:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000
    assert json.loads((tmp_path / "run" / "report.json").read_text())["summary"]["a"]["m"]["recall@1"] == 0.5
