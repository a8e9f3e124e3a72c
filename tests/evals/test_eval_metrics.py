"""Tests of evals: evidence normalisation, LoCoMo QA loading and retrieval metrics.

Every expected number below is worked out by hand in the comment next to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals import (
    ADVERSARIAL_ANSWER,
    QAItem,
    load_locomo_questions,
    load_qa_jsonl,
    mean,
    normalize_evidence,
    ranked_turns,
    recall_at_k,
    session_of,
    session_recall_at_k,
    wilson_interval,
)
from memlane.ingest import InputError
from tests.fixtures import LOCOMO_FIXTURE_QA, locomo_fixture_data, write_locomo_fixture

REPO = Path(__file__).resolve().parents[2]
LOCOMO_PATH = REPO.parent / "shared/data/locomo10.json"
SAMPLES = REPO / "samples"


# ------------------------------------------------------------------------------------------
# session_of, ranked_turns


@pytest.mark.parametrize(
    "turn_id, session",
    [("D3:4", "D3"), ("D12:105", "D12"), ("session_2:5", "session_2"), ("a:b:c", "a:b")],
)
def test_session_of(turn_id, session):
    assert session_of(turn_id) == session


@pytest.mark.parametrize("bad", ["D3", "", ":4", "D3:"])
def test_session_of_rejects_ids_without_session(bad):
    with pytest.raises(ValueError):
        session_of(bad)


def test_ranked_turns_flattens_first_occurrence_wins():
    memories = [["D1:1", "D1:2"], ["D1:2", "D3:1"], [], ["D1:1", "D2:2"]]
    assert ranked_turns(memories) == ["D1:1", "D1:2", "D3:1", "D2:2"]
    assert ranked_turns([]) == []


# ------------------------------------------------------------------------------------------
# recall@k


def test_recall_at_k_values():
    ranked = ["a", "b", "c", "d"]
    relevant = {"b", "d", "z"}
    assert recall_at_k(ranked, relevant, 1) == 0.0  # {a}: none of 3
    assert recall_at_k(ranked, relevant, 2) == pytest.approx(1 / 3)  # {a, b}: b
    assert recall_at_k(ranked, relevant, 4) == pytest.approx(2 / 3)  # b, d of b, d, z
    assert recall_at_k(ranked, relevant, 100) == pytest.approx(2 / 3)  # k beyond the list
    assert recall_at_k([], {"a"}, 5) == 0.0
    assert recall_at_k(ranked, ["b", "b"], 2) == 1.0  # relevant is a set


def test_recall_at_k_duplicates_do_not_use_up_places():
    # distinct ranking: a, b, c -> the top 2 are a and b
    ranked = ["a", "a", "a", "b", "a", "c"]
    assert recall_at_k(ranked, {"b"}, 2) == 1.0
    assert recall_at_k(ranked, {"c"}, 2) == 0.0
    assert recall_at_k(ranked, {"b", "c"}, 3) == 1.0


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_recall_at_k_rejects_bad_k(k):
    with pytest.raises(ValueError):
        recall_at_k(["a"], {"a"}, k)


def test_recall_at_k_rejects_empty_relevant():
    with pytest.raises(ValueError, match="empty relevant"):
        recall_at_k(["a"], set(), 3)


def test_session_recall_ranks_sessions_by_first_turn():
    ranked = ["D3:1", "D3:4", "D1:2", "D5:1", "D1:1", "D2:7"]
    # sessions in order of first turn: D3, D1, D5, D2
    relevant = {"D1:5", "D2:1"}  # sessions D1 and D2, although these turns are not ranked
    assert session_recall_at_k(ranked, relevant, 1) == 0.0  # {D3}
    assert session_recall_at_k(ranked, relevant, 2) == 0.5  # {D3, D1}
    assert session_recall_at_k(ranked, relevant, 3) == 0.5  # {D3, D1, D5}
    assert session_recall_at_k(ranked, relevant, 4) == 1.0  # + D2
    assert session_recall_at_k(ranked, relevant, 50) == 1.0
    # turn-level recall of the same ranking is 0: the exact turns are missing
    assert recall_at_k(ranked, relevant, 6) == 0.0


def test_session_recall_jsonl_ids_and_custom_key():
    ranked = ["session_2:5", "session_2:1", "session_10:3"]
    assert session_recall_at_k(ranked, {"session_10:1"}, 1) == 0.0
    assert session_recall_at_k(ranked, {"session_10:1"}, 2) == 1.0
    mapping = {"t1": "morning", "t2": "evening", "t3": "morning"}
    assert session_recall_at_k(["t3", "t2"], {"t1"}, 1, session_key=mapping.__getitem__) == 1.0
    with pytest.raises(ValueError):
        session_recall_at_k(ranked, [], 1)


# ------------------------------------------------------------------------------------------
# mean, Wilson interval


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5
    assert mean(x / 4 for x in (1, 2, 3)) == 0.5  # 0.25, 0.5, 0.75
    with pytest.raises(ValueError):
        mean([])


def test_wilson_interval_known_values():
    # 8/10, z=1.96: p=.8, z^2/n=.38416, centre=.99208/1.38416=.71674,
    # half=1.96*sqrt(.016+.009604)/1.38416=.22658 -> (.49016, .94332)
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.49016, abs=1e-4)
    assert high == pytest.approx(0.94332, abs=1e-4)
    # 0/10: centre = half = .19208/1.38416 = .13877 -> (0, .27754)
    low, high = wilson_interval(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12)
    assert high == pytest.approx(0.27754, abs=1e-4)
    # 10/10 mirrors 0/10
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(1 - 0.27754, abs=1e-4)
    assert high == pytest.approx(1.0, abs=1e-12)
    # 50/100, z=1: centre .5, half=sqrt(.0025+.000025)/1.01=.049752 -> (.45025, .54975)
    low, high = wilson_interval(50, 100, z=1.0)
    assert (low, high) == (pytest.approx(0.450248, abs=1e-5), pytest.approx(0.549752, abs=1e-5))
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize("s, n", [(11, 10), (-1, 10), (1, -1)])
def test_wilson_interval_rejects_bad_counts(s, n):
    with pytest.raises(ValueError):
        wilson_interval(s, n)


# ------------------------------------------------------------------------------------------
# Evidence normalisation


def test_normalize_evidence_quirks():
    assert normalize_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert normalize_evidence(["D9:1 D4:4 D4:6"]) == ["D9:1", "D4:4", "D4:6"]
    assert normalize_evidence(["D30:05"]) == ["D30:5"]
    assert normalize_evidence(["D03:010"]) == ["D3:10"]
    assert normalize_evidence(["D:11:26"]) == ["D11:26"]
    assert normalize_evidence(["D1:18", "D", "D1:20"]) == ["D1:18", "D1:20"]
    assert normalize_evidence([]) == []
    assert normalize_evidence(["", "  "]) == []


def test_normalize_evidence_keeps_order_and_dedupes():
    raw = ["D2:1", "D1:1; D2:1", "D1:01", "D4:5", "D4:5"]
    assert normalize_evidence(raw) == ["D2:1", "D1:1", "D4:5"]


def test_normalize_evidence_valid_ids():
    valid = {"D1:1", "D2:2", "D10:5"}
    assert normalize_evidence(["D10:19", "D2:02", "D1:1 D3:3", "D10:05"], valid) == ["D2:2", "D1:1", "D10:5"]
    assert normalize_evidence(["D10:19"], valid) == []
    assert normalize_evidence(["D10:19"], None) == ["D10:19"]  # no check without ids


def test_normalize_evidence_other_id_styles():
    assert normalize_evidence(["session_2:5", "session_2:5 session_1:1"]) == ["session_2:5", "session_1:1"]
    assert normalize_evidence(["session_2:5"], {"session_1:1"}) == []
    with pytest.raises(ValueError):
        normalize_evidence([3])


# ------------------------------------------------------------------------------------------
# LoCoMo questions


def test_load_locomo_questions_default_categories(tmp_path):
    qa = load_locomo_questions(write_locomo_fixture(tmp_path / "fx.json"))
    assert list(qa) == ["fx-1", "fx-2"]
    assert [q.category for q in qa["fx-1"]] == [4, 2, 1, 3]  # category 5 left out
    assert [q.category for q in qa["fx-2"]] == [1, 4, 2, 4, 4]
    expected = [(s, c, ev) for s, c, _, ev in LOCOMO_FIXTURE_QA if c != 5]
    got = [(q.sample_id, q.category, q.evidence) for v in qa.values() for q in v]
    assert got == expected
    by_q = {q.question: q for v in qa.values() for q in v}
    assert by_q["Where is Noor's allotment?"].answer == "By the railway bridge"
    # an integer answer becomes a string
    assert by_q["Which year's festival did Marta book the ferry for?"].answer == "2024"
    # D3:1 exists in fx-1 only, so fx-2's item is left without evidence, and flagged
    cat = by_q["What pet does Marta have?"]
    assert cat.evidence == [] and cat.raw_evidence == ["D3:1"] and not cat.has_evidence
    assert not by_q["Would Noor likely enjoy a gardening show?"].has_evidence
    assert sum(not q.has_evidence for v in qa.values() for q in v) == 2
    assert by_q["When is the harbour festival?"].category_name == "temporal"


def test_load_locomo_questions_category_selection(tmp_path):
    path = write_locomo_fixture(tmp_path / "fx.json")
    everything = load_locomo_questions(path, categories=None)
    assert [len(v) for v in everything.values()] == [5, 6]
    adversarial = load_locomo_questions(path, categories=(5,))
    assert [len(v) for v in adversarial.values()] == [1, 1]
    item = adversarial["fx-1"][0]
    assert item.answer == ADVERSARIAL_ANSWER
    assert item.adversarial_answer == "Sweet peas"
    assert item.evidence == ["D2:3"]
    assert load_locomo_questions(path, categories=[2])["fx-2"][0].evidence == ["D1:5"]
    with pytest.raises(ValueError, match="unknown LoCoMo categories"):
        load_locomo_questions(path, categories=(0, 6))


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d[0]["qa"][1].update(category="two"), "$[0].qa[1].category"),
        (lambda d: d[1]["qa"][0].update(evidence="D1:1"), "$[1].qa[0].evidence: expected a list"),
        (lambda d: d[1]["qa"][2].pop("answer"), "$[1].qa[2]: missing field 'answer'"),
        (lambda d: d[0]["qa"][0].update(question=""), "$[0].qa[0].question"),
        (lambda d: d[1].update(sample_id="fx-1"), "$[1].sample_id: duplicate sample_id"),
    ],
)
def test_load_locomo_questions_errors(tmp_path, mutate, expected):
    data = locomo_fixture_data()
    mutate(data)
    path = tmp_path / "q.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError) as ei:
        load_locomo_questions(path)
    assert str(ei.value).startswith("q.json: ")
    assert expected in str(ei.value)


def test_recall_on_fixture_questions(tmp_path):
    """A made-up recall result scored against fixture evidence, as the eval will do it."""
    qa = load_locomo_questions(write_locomo_fixture(tmp_path / "fx.json"))
    multi = next(q for q in qa["fx-1"] if q.category == 1)  # evidence D1:3, D3:2
    memories = [["D2:1", "D1:3"], ["D1:3"], ["D2:2", "D3:3", "D3:2"]]
    ranked = ranked_turns(memories)  # D2:1, D1:3, D2:2, D3:3, D3:2
    assert recall_at_k(ranked, set(multi.evidence), 2) == 0.5
    assert recall_at_k(ranked, set(multi.evidence), 4) == 0.5
    assert recall_at_k(ranked, set(multi.evidence), 5) == 1.0
    # sessions: D2, D1, D3 -> D1 at 2, D3 at 3
    assert session_recall_at_k(ranked, multi.evidence, 2) == 0.5
    assert session_recall_at_k(ranked, multi.evidence, 3) == 1.0


# ------------------------------------------------------------------------------------------
# Bundled sample questions, real LoCoMo


def test_bundled_sample_questions_point_at_real_turns():
    qa = load_qa_jsonl(SAMPLES / "questions.jsonl")
    items = [q for v in qa.values() for q in v]
    assert len(items) == 16
    assert set(qa) == {"priya", "tomas"}
    assert {q.category for q in items} == {1, 2, 3, 4}
    assert all(isinstance(q, QAItem) and q.has_evidence and q.answer for q in items)
    # every evidence id is a turn of that document (read the raw file: no timestamp parsing)
    turns = set()
    for line in (SAMPLES / "conversations.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        turns.add((row["document_id"], row["turn_id"]))
    for q in items:
        for ev in q.evidence:
            assert (q.sample_id, ev) in turns, (q.question, ev)


def test_load_qa_jsonl_errors(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"sample_id": "a", "question": "q?", "answer": "x", "evidence": [], "category": 4}\n'
        "\n"
        '{"sample_id": "a", "question": "q?", "answer": "x", "evidence": [], "category": 9}\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"^q\.jsonl line 3: field 'category'"):
        load_qa_jsonl(path)


@pytest.mark.skipif(not LOCOMO_PATH.exists(), reason=f"LoCoMo data not found at {LOCOMO_PATH}")
def test_real_locomo_questions():
    qa = load_locomo_questions(LOCOMO_PATH)
    items = [q for v in qa.values() for q in v]
    assert len(items) == 1540  # 282 + 321 + 96 + 841
    counts = {c: sum(q.category == c for q in items) for c in (1, 2, 3, 4)}
    assert counts == {1: 282, 2: 321, 3: 96, 4: 841}
    assert sum(not q.has_evidence for q in items) == 4  # the README's 4 category-3 items
    assert sum(len(v) for v in load_locomo_questions(LOCOMO_PATH, None).values()) == 1986
    conv26 = {q.question: q for q in qa["conv-26"]}
    fixed = [q for q in conv26.values() if q.raw_evidence == ["D8:6; D9:17"]]
    assert len(fixed) == 1 and fixed[0].evidence == ["D8:6", "D9:17"]
    conv50 = [q for q in qa["conv-50"] if q.raw_evidence == ["D30:05"]]
    assert len(conv50) == 1 and conv50[0].evidence == ["D30:5"]
    # D10:19 does not exist in conv-42 (it does in other samples): dropped there
    conv42 = [q for q in qa["conv-42"] if "D10:19" in q.raw_evidence]
    assert len(conv42) == 1 and "D10:19" not in conv42[0].evidence
