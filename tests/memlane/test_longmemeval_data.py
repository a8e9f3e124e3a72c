"""The LongMemEval reader (memlane.ingest.longmemeval) on the tiny original fixture
(tests/fixtures.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.ingest import InputError, bank_id_for, load_longmemeval
from tests.fixtures import LME_FIXTURE_EVIDENCE, longmemeval_fixture_data, write_longmemeval_fixture


def test_loads_questions_turn_ids_and_gold(tmp_path):
    qs = load_longmemeval(write_longmemeval_fixture(tmp_path / "lme.json"))
    assert [q.question_id for q in qs] == ["fx-kayak", "fx-trip", "fx-cello_abs"]
    assert {q.question_id: q.evidence_turns for q in qs} == LME_FIXTURE_EVIDENCE
    kayak, trip, cello = qs
    # 2 + 3 + 3 turns, numbered from 1 within each session, user and assistant alike
    assert kayak.corpus_turns == [
        "noise_g1:1",
        "noise_g1:2",
        "answer_k1:1",
        "answer_k1:2",
        "answer_k1:3",
        "noise_b1:1",
        "noise_b1:2",
        "noise_b1:3",
    ]
    assert kayak.turns[2].timestamp == datetime(2024, 5, 18, 17, 40, tzinfo=UTC)
    assert kayak.turns[2].speaker == "user" and kayak.turns[2].metadata == {"has_answer": True}
    assert kayak.question_date == datetime(2024, 6, 20, 10, 0, tzinfo=UTC)
    assert trip.answer_session_ids == ["answer_t1", "answer_t2"]
    assert not kayak.abstention and cello.abstention
    assert cello.bank_id == "fx-cello_abs"  # the one scheme: the backfill's bank of it too


def test_limit_and_single_object(tmp_path):
    assert len(load_longmemeval(write_longmemeval_fixture(tmp_path / "a.json"), limit=2)) == 2
    one = longmemeval_fixture_data()[1]
    path = tmp_path / "one.json"
    path.write_text(__import__("json").dumps(one), encoding="utf-8")
    assert [q.question_id for q in load_longmemeval(path)] == ["fx-trip"]
    with pytest.raises(ValueError):
        load_longmemeval(path, limit=0)


def test_repeated_session_and_empty_turn(tmp_path):
    data = longmemeval_fixture_data()[:1]
    item = data[0]
    # the same session twice, and an empty turn that keeps its place in the numbering
    item["haystack_session_ids"].append("answer_k1")
    item["haystack_dates"].append("2024/06/02 (Sun) 08:00")
    item["haystack_sessions"].append(
        [
            {"role": "user", "content": "", "has_answer": False},
            {"role": "assistant", "content": "Welcome back!", "has_answer": True},
        ]
    )
    q = load_longmemeval(write_longmemeval_fixture(tmp_path / "r.json", data))[0]
    assert q.corpus_turns[-1] == "answer_k1#4:2"
    assert "answer_k1#4:1" not in q.corpus_turns  # the empty turn is not retained
    assert q.evidence_turns == ["answer_k1:1", "answer_k1#4:2"]
    assert q.original_session("answer_k1#4") == "answer_k1"
    assert q.original_session("noise_g1") == "noise_g1"


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d[0].pop("question"), "$[0]: missing field 'question'"),
        (
            lambda d: d[1]["haystack_dates"].pop(),
            "$[1]: haystack_session_ids, haystack_dates and haystack_sessions differ in length",
        ),
        (lambda d: d[0]["haystack_dates"].__setitem__(1, "whenever"), "$[0].haystack_dates[1]"),
        (lambda d: d[2].__setitem__("question_date", "soon"), "$[2].question_date"),
        (
            lambda d: d[0]["haystack_sessions"][0].__setitem__(0, "hi"),
            "$[0].haystack_sessions[0][0]: expected a turn object",
        ),
        (lambda d: d[1].__setitem__("question_id", "fx-kayak"), "$[1].question_id: duplicate id 'fx-kayak'"),
        (lambda d: d[0].__setitem__("haystack_sessions", {}), "$[0].haystack_sessions: expected a list"),
    ],
)
def test_bad_files_name_the_place(tmp_path, mutate, needle):
    data = longmemeval_fixture_data()
    mutate(data)
    with pytest.raises(InputError) as exc:
        load_longmemeval(write_longmemeval_fixture(tmp_path / "bad.json", data))
    assert needle in str(exc.value)
    assert str(exc.value).startswith("bad.json: ")


def test_not_json_and_missing(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[{", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        load_longmemeval(bad)
    with pytest.raises(InputError, match="no such file"):
        load_longmemeval(tmp_path / "missing.json")


def test_bank_ids_are_safe():
    # One scheme for eval and backfill (issue 10 item 5; the eval's "lme-" prefix was the bug).
    assert bank_id_for("gpt4_2655b836_abs") == "gpt4_2655b836_abs"
    assert bank_id_for("a/b c").startswith("a_b_c-") and bank_id_for("a/b c") != bank_id_for("a_b c")
