"""The real-phrasing knowledge-update benchmark (benchmarks/knowledge_update_lme.py): which
questions and sessions it keeps, which session it expects first, how it scores a ranking and
counts slot coverage, and that it skips cleanly without the data file. Tiny LongMemEval-format
files written here; no engine run."""

from __future__ import annotations

import json

from benchmarks.knowledge_update_lme import main, score, select, slot_coverage, target_session
from memlane.ingest.longmemeval import load_longmemeval


def _question(qid, qtype, question, answer, sessions):
    """A LongMemEval record; ``sessions`` is ``[(session id, date, [(role, text, has_answer)])]``."""
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "question_date": "2023/12/01 (Fri) 10:00",
        "answer": answer,
        "answer_session_ids": [sid for sid, _, turns in sessions if any(h for _, _, h in turns)],
        "haystack_session_ids": [sid for sid, _, _ in sessions],
        "haystack_dates": [date for _, date, _ in sessions],
        "haystack_sessions": [
            [{"role": r, "content": t, "has_answer": h} for r, t, h in turns] for _, _, turns in sessions
        ],
    }


CAT = _question(
    "ku1",
    "knowledge-update",
    "How long have I had my cat?",
    "9 months",
    [
        ("noise_a", "2023/07/01 (Sat) 09:00", [("user", "Any tips for sourdough?", False)]),
        ("old", "2023/08/11 (Fri) 16:53", [("user", "I've had Luna for about 6 months now.", True)]),
        ("noise_b", "2023/09/01 (Fri) 09:00", [("user", "I live in Leeds now.", False)]),
        ("new", "2023/11/30 (Thu) 10:31", [("user", "I've had my cat for about 9 months now.", True)]),
    ],
)
PAST = _question(
    "ku2",
    "knowledge-update",
    "What was my previous status before the current one?",
    "Premier Silver",
    [
        ("s1", "2022/09/16 (Fri) 17:22", [("user", "I'm eligible for Premier Silver status.", True)]),
        ("s2", "2023/05/30 (Tue) 08:58", [("user", "I just reached Premier Gold status.", True)]),
    ],
)
OTHER = _question(
    "ms1",
    "multi-session",
    "How many books?",
    "3",
    [("s1", "2023/01/01 (Sun) 09:00", [("user", "I read 3 books.", True)])],
)


def _load(tmp_path, records):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(records))
    return load_longmemeval(path)


def test_select_keeps_knowledge_update_questions_and_their_answer_sessions(tmp_path):
    questions = _load(tmp_path, [CAT, PAST, OTHER])
    kept = select(questions)
    assert [q.question_id for q in kept] == ["ku1", "ku2"]
    assert sorted({t.session_id for t in kept[0].turns}) == ["new", "old"]
    assert sorted({t.session_id for t in select(questions, 1)[0].turns}) == ["new", "noise_a", "old"]
    assert len({t.session_id for t in select(questions, -1)[0].turns}) == 4


def test_target_is_the_session_stating_the_answer_else_the_latest(tmp_path):
    cat, past = select(_load(tmp_path, [CAT, PAST]))
    assert target_session(cat) == "new"  # "9 months" said in the later session
    assert target_session(past) == "s1"  # a question about the earlier value
    cat.answer = "nine months"  # said by no evidence turn: the latest answer session
    assert target_session(cat) == "new"


def test_score_reads_sessions_and_the_first_evidence_turn(tmp_path):
    (cat,) = select(_load(tmp_path, [CAT]), -1)
    hit = score(cat, ["noise_b:1", "new:1", "old:1"])
    assert hit["target_session_first"] and hit["target_evidence_first"]
    assert hit["answer_session_ranks"] == {"old": 2, "new": 1}
    miss = score(cat, ["old:1", "new:1"])
    assert not miss["target_session_first"] and not miss["target_evidence_first"]
    assert miss["first_evidence_turn"] == "old:1"
    unranked = score(cat, ["old:1"])
    assert not unranked["target_session_first"]


def test_slot_coverage_counts_evidence_turns_a_pattern_fills(tmp_path):
    (cat,) = select(_load(tmp_path, [CAT]), -1)
    cov = slot_coverage([cat])
    # "I've had my cat for about 9 months now." fills pet (the rules' owns-a-pet pattern);
    # "I've had Luna ..." names no kind of pet: no slot
    assert (cov["evidence_turns"], cov["evidence_slotted"]) == (2, 1)
    assert cov["answer_session_user_turns"] == 2
    # "I live in Leeds now." fills lives_in but is in a distractor session: not counted
    assert cov["slots"] == [{"turn": "new:1", "evidence": True, "slot": "pet", "value": "cat"}]


def test_main_skips_with_a_message_when_the_file_is_absent(tmp_path, capsys):
    assert main([str(tmp_path / "missing.json")]) == 0
    assert "skipped" in capsys.readouterr().err
