"""The LongMemEval and LoCoMo evals end to end on the real engine (Milvus Lite, MiniLM, spaCy)
over the tiny original fixtures, with a scripted LLM double for QA."""

from __future__ import annotations

import json

from evals.locomo import run_locomo
from evals.longmemeval import run_longmemeval
from evals.report import QuestionLog
from tests.evals.test_eval_qa_report import ScriptedLLM
from tests.fixtures import write_locomo_fixture, write_longmemeval_fixture

KS = (1, 3, 5, 10, 30, 50)


def test_longmemeval_run(memory, tmp_path):
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    with QuestionLog(tmp_path / "run" / "questions.jsonl") as log:
        report = run_longmemeval(memory, path, progress=False, log=log)
    assert report["benchmark"] == "longmemeval" and report["systems"] == ["memlane", "bm25", "dense"]
    assert report["info"]["questions"] == 3 and report["info"]["abstention questions"] == 1
    rows = [json.loads(line) for line in (tmp_path / "run" / "questions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["fx-kayak", "fx-trip", "fx-cello_abs"]
    by_id = {r["id"]: r for r in rows}
    # one bank per question, holding exactly its own haystack (8, 8 and 7 turns)
    assert [memory.store.count_units(q) for q in by_id] == [8, 8, 7]  # bank = question id
    # abstention: no official metrics, and no answer sessions to score either
    assert by_id["fx-cello_abs"]["scores"]["memlane"] == {}
    kayak = by_id["fx-kayak"]["scores"]
    for system in ("memlane", "bm25", "dense"):
        assert set(kayak[system]) == {
            f"{lvl}_{m}@{k}"
            for lvl in ("turn", "session")
            for m in ("recall_any", "recall_all", "ndcg_any")
            for k in KS
        } | {f"answer_session_recall_any@{k}" for k in KS}
        # every ranking covers all 8 turns by k=50, so the single gold turn is in it
        assert kayak[system]["turn_recall_all@50"] == 1.0
    # "kayak" and "Minnow" are in one turn only: Memlane and BM25 put it first
    assert by_id["fx-kayak"]["top_turns"]["memlane"][0] == "answer_k1:1"
    assert kayak["memlane"]["turn_recall_any@1"] == 1.0 and kayak["memlane"]["turn_ndcg_any@1"] == 1.0
    assert kayak["bm25"]["session_recall_any@1"] == 1.0
    # averages leave the abstention question out: 2 questions per official metric, 2 per
    # answer-session metric (the abstention question names no answer session)
    n = report["summary"]["all"]["n"]
    assert n["turn_recall_any@5"] == 2 and n["answer_session_recall_any@5"] == 2
    assert set(report["summary"]) == {"all", "multi-session", "single-session-user"}
    assert report["summary"]["single-session-user"]["n"]["turn_recall_any@1"] == 1


def test_longmemeval_reuse_and_qa(memory, tmp_path):
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    run_longmemeval(memory, path, limit=1, progress=False)
    llm = ScriptedLLM("Minnow", "Minnow")
    report = run_longmemeval(memory, path, limit=1, progress=False, reuse_banks=True, qa_llm=llm)
    assert report["info"]["banks reused"] == 1
    qa = report["qa_summary"]["all"]
    # both systems see the turn naming Minnow, so the scripted answerer gets it right
    assert qa["memlane"]["accuracy"] == 1.0 and qa["full-context"]["accuracy"] == 1.0
    # the full context is every turn; Memlane's is at most what recall packed (fewer here)
    assert 0 < qa["memlane"]["context_tokens_mean"] <= qa["full-context"]["context_tokens_mean"]
    prompts = [c[0][-1]["content"] for c in llm.calls]
    assert any("Correct Answer: Minnow" in p for p in prompts)  # the official judge prompt
    assert any("Today's date: 2024-06-20" in p for p in prompts)


def test_locomo_run_in_the_harness_format(memory, tmp_path):
    path = write_locomo_fixture(tmp_path / "fx.json")
    report = run_locomo(memory, path, ks=(1, 5), progress=False)
    # the legacy keys (fixture: 9 category 1-4 items, 2 of them without evidence)
    assert report["questions"] == 7 and report["skipped_no_evidence"] == 2
    assert set(report["baselines"]) == {"bm25", "dense"}
    assert report["turn_recall@5"] == report["summary"]["all"]["memlane"]["turn_recall@5"]
    # the harness keys
    assert report["benchmark"] == "locomo" and report["summary"]["all"]["n"]["turn_recall@1"] == 7
    assert "1 multi-hop" in report["summary"] and report["headline"] == "turn_recall@5"
    per_cat = report["per_category"]
    assert per_cat["4"]["name"] == "single-hop" and per_cat["4"]["questions"] == 3
