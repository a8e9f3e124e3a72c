"""The LongMemEval and LoCoMo evals end to end on the real engine (Milvus Lite, MiniLM, spaCy)
over the tiny original fixtures, with a scripted LLM double for QA."""

from __future__ import annotations

import json

from evals.locomo import format_report, run_locomo
from evals.longmemeval import run_longmemeval
from evals.report import QuestionLog
from memlane.ingest.longmemeval import load_longmemeval
from tests.evals.test_eval_qa_report import ScriptedLLM
from tests.fixtures import longmemeval_fixture_data, write_locomo_fixture, write_longmemeval_fixture

KS = (1, 3, 5, 10, 30, 50)


def test_longmemeval_run(memory, tmp_path):
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    with QuestionLog(tmp_path / "run" / "questions.jsonl") as log:
        report = run_longmemeval(memory, path, progress=False, log=log)
    assert report["benchmark"] == "longmemeval" and report["systems"] == [
        "memlane",
        "flat",
        "bm25",
        "dense",
        "dense-minilm",
    ]
    # the tree ablation: memlane (tree recall) against flat, per category, with tokens
    ablation = report["tree_ablation"]
    assert ablation["all"]["n"] == 3 and set(ablation["all"]["tokens"]) == {"memlane", "flat"}
    assert ablation["all"]["turn_recall_all@10"]["n"] == 2  # abstention questions have no score
    assert report["info"]["questions"] == 3 and report["info"]["abstention questions"] == 1
    rows = [json.loads(line) for line in (tmp_path / "run" / "questions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["fx-kayak", "fx-trip", "fx-cello_abs"]
    by_id = {r["id"]: r for r in rows}
    # one bank per question, holding exactly its own haystack (8, 8 and 7 turns)
    assert [memory.store.count_units(q) for q in by_id] == [8, 8, 7]  # bank = question id
    # abstention: no official metrics, and no answer sessions to score either
    assert by_id["fx-cello_abs"]["scores"]["memlane"] == {}
    kayak = by_id["fx-kayak"]["scores"]
    for system in ("memlane", "bm25", "dense", "dense-minilm"):
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
    # Memlane against the best baseline: the headline metrics at the default ks
    assert set(report["beats_best_baseline"]) == {
        "session_recall_any@5",
        "session_recall_all@5",
        "session_ndcg_any@10",
        "turn_recall_all@10",
    }
    entry = report["comparison"]["all"]["turn_recall_all@10"]
    assert entry["n"] == 2 and entry["best_baseline"] in ("bm25", "dense")
    assert entry["best_value"] == max(entry["baselines"].values())
    assert report["beats_best_baseline"]["turn_recall_all@10"] == (entry["diff"] > 0)


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
    # plain BM25's best units of the same bank, read by the same answerer and judge
    assert qa["bm25"]["n"] == 1 and report["qa_systems"] == ["memlane", "bm25", "full-context"]
    assert 0 < qa["bm25"]["context_tokens_mean"] <= qa["full-context"]["context_tokens_mean"]
    prompts = [c[0][-1]["content"] for c in llm.calls]
    assert any("Correct Answer: Minnow" in p for p in prompts)  # the official judge prompt
    assert any("Today's date: 2024-06-20" in p for p in prompts)


def test_locomo_run_in_the_harness_format(memory, tmp_path):
    path = write_locomo_fixture(tmp_path / "fx.json")
    report = run_locomo(memory, path, ks=(1, 5), progress=False)
    # the legacy keys (fixture: 9 category 1-4 items, 2 of them without evidence)
    assert report["questions"] == 7 and report["skipped_no_evidence"] == 2
    assert set(report["baselines"]) == {"bm25", "dense", "dense-minilm"}
    assert report["turn_recall@5"] == report["summary"]["all"]["memlane"]["turn_recall@5"]
    # the harness keys
    assert report["benchmark"] == "locomo" and report["summary"]["all"]["n"]["turn_recall@1"] == 7
    assert "1 multi-hop" in report["summary"] and report["headline"] == "turn_recall@5"
    per_cat = report["per_category"]
    assert per_cat["4"]["name"] == "single-hop" and per_cat["4"]["questions"] == 3
    # turn_recall@10 was not run (ks 1, 5): only session_recall@5 gets a verdict
    assert set(report["beats_best_baseline"]) == {"session_recall@5"}
    assert report["comparison"]["all"]["session_recall@5"]["n"] == 7
    text = format_report(report)
    assert "Memlane vs best single-channel baseline" in text and "session_recall@5:" in text


def test_locomo_with_an_ablation_and_one_baseline(memory, tmp_path):
    path = write_locomo_fixture(tmp_path / "fx.json")
    report = run_locomo(memory, path, ks=(5, 10), limit=1, progress=False, systems=["dense", "semantic"])
    assert report["systems"] == ["memlane", "dense", "semantic"]
    assert set(report["baselines"]) == {"dense"}  # the legacy key holds the baselines that ran
    entry = report["comparison"]["all"]["turn_recall@10"]
    assert entry["best_baseline"] == "dense" and set(entry["baselines"]) == {"dense"}
    assert set(report["beats_best_baseline"]) == {"turn_recall@10", "session_recall@5"}
    text = format_report(report)
    assert "\nsemantic " in text and "bm25" not in text


def test_longmemeval_question_date_is_the_reference_time_not_a_cut_off(memory, tmp_path):
    data = longmemeval_fixture_data()[:1]
    # the answer session falls later on the question's own day (10:00), as often in LongMemEval
    data[0]["haystack_dates"][1] = "2024/06/20 (Thu) 17:40"
    path = write_longmemeval_fixture(tmp_path / "lme.json", data)
    report = run_longmemeval(memory, path, ks=(1, 5), progress=False, systems="memlane,lexical+semantic")
    assert report["info"]["reference time"] == "question date"
    assert report["systems"] == ["memlane", "lexical+semantic"]
    assert report["summary"]["all"]["memlane"]["turn_recall_any@1"] == 1.0
    assert report["summary"]["all"]["lexical+semantic"]["turn_recall_any@5"] == 1.0
    assert report["comparison"] == {} and report["beats_best_baseline"] == {}  # no baseline ran
    # as a validity cut-off the question date would have hidden the answer
    when = load_longmemeval(path)[0].question_date
    hidden = memory.recall("fx-kayak", "What did I name my new kayak?", as_of=when)
    assert not any("answer_k1:1" in m.unit.source_turns for m in hidden.memories)


def test_spread_picks_evenly_over_a_grouped_file():
    from evals.harness import spread

    items = [f"{kind}{i}" for kind in "abc" for i in range(4)]  # grouped by kind, like LME
    assert spread(items, 3) == ["a0", "b0", "c0"]
    assert spread(items, 6) == ["a0", "a2", "b0", "b2", "c0", "c2"]
    assert spread(items, None) == items and spread(items, 50) == items


def test_qa_limit_and_window_bound_the_qa(memory, tmp_path):
    """QA on a spread of the questions only; the full-context baseline reads only the latest
    turns that fit the window (counted with the embedder's tokenizer)."""
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    llm = ScriptedLLM("Minnow", "Minnow")
    report = run_longmemeval(memory, path, progress=False, qa_llm=llm, qa_limit=1, qa_window=40)
    assert report["info"]["qa questions"] == 1 and report["info"]["qa window tokens"] == 40
    qa = report["qa_summary"]["all"]
    assert qa["memlane"]["n"] == qa["bm25"]["n"] == qa["full-context"]["n"] == 1
    assert 0 < qa["full-context"]["context_tokens_mean"] <= 40
