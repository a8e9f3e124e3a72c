"""BEAM's reader (evals/beam_data.py) on a tiny BEAM-format conversation written for this test
(tests/evals/beam_fixture/100K/7: no BEAM text): the turns, their ids and dates, and each
question's evidence turns."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from evals.answers_data import load_answer_set
from evals.beam_data import load_beam, read_conversation
from evals.ranker_data import source_questions
from memlane.records.limits import MAX_TEXT_BYTES

FIXTURE = Path(__file__).resolve().parent / "beam_fixture" / "100K" / "7"
H = "beam-100K-7"


def _copy(tmp_path: Path, size: str = "100K", n: str = "7") -> Path:
    target = tmp_path / size / n
    shutil.copytree(FIXTURE, target)
    return target


def test_turns_ids_sessions_and_dates():
    h = read_conversation(FIXTURE)
    assert h.id == H
    # the truncated chat is read (chat.json's third batch, messages 8 and 9, is not)
    assert [t.turn_id for t in h.turns] == [
        f"{H}-b1:0",
        f"{H}-b1:1",
        f"{H}-b1:2",
        f"{H}-b1:3",
        f"{H}-b2:4",
        f"{H}-b2:5",
        f"{H}-b2:6",
        f"{H}-b2:7",
    ]
    assert [t.session_id for t in h.turns] == [f"{H}-b1"] * 4 + [f"{H}-b2"] * 4
    assert [t.index for t in h.turns] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [t.speaker for t in h.turns] == ["user", "assistant"] * 4
    assert {t.document_id for t in h.turns} == {H}
    march, april = datetime(2024, 3, 4, tzinfo=UTC), datetime(2024, 4, 9, tzinfo=UTC)
    assert [t.timestamp for t in h.turns] == [march] * 4 + [april] * 4
    # the generator's "->-> 2,1" marker is not the user's words; its fields stay as metadata
    assert h.turns[4].text == "The club moved the deadline: the app is now due on May 20, 2024."
    assert h.turns[4].metadata == {"index": "2,1", "question_type": "main_question"}
    assert h.turns[1].metadata == {}


def test_questions_and_their_evidence():
    h = read_conversation(FIXTURE)
    by_kind = {q.kind: q for q in h.questions}
    # abstention names no evidence: left out
    assert sorted(by_kind) == [
        "contradiction_resolution",
        "event_ordering",
        "information_extraction",
        "knowledge_update",
    ]
    assert by_kind["information_extraction"].expected == {f"{H}-b1:2"}
    assert by_kind["information_extraction"].answer == "SQLite"
    assert by_kind["information_extraction"].id == f"{H}-information_extraction-0"
    # the update is the answer; the original value a trap
    assert by_kind["knowledge_update"].expected == {f"{H}-b2:4"}
    assert by_kind["knowledge_update"].traps == {f"{H}-b1:0": "the value before the update"}
    # both statements, one id written as a string
    assert by_kind["contradiction_resolution"].expected == {f"{H}-b2:6", f"{H}-b1:2"}
    assert by_kind["contradiction_resolution"].answer.startswith("You said you keep counts")
    assert by_kind["event_ordering"].expected == {f"{H}-b1:0", f"{H}-b2:4"}
    # asked after the whole chat: the bank holds every turn
    assert {q.asked_at for q in h.questions} == {datetime(2024, 4, 9, tzinfo=UTC)}
    assert len(h.turns_before(h.questions[0].asked_at)) == 8


def test_rows_of_the_beam_source():
    qs = list(source_questions("beam", FIXTURE))
    assert [(q.dataset, q.bank) for q in qs] == [("beam", f"answers-{H}")] * 4
    ku = next(q for q in qs if q.kind == "knowledge_update")
    assert ku.text == "When is the bird-count app due?"
    assert ku.relevant == {f"{H}-b2:4"}
    assert ku.reference == datetime(2024, 4, 9, tzinfo=UTC)
    with pytest.raises(ValueError, match="source beam: give its directory"):
        source_questions("beam")


def test_a_folder_of_conversations_in_numeric_order_links_named_by_their_target(tmp_path):
    _copy(tmp_path, n="10")
    _copy(tmp_path, n="2")
    assert [h.id for h in load_beam(tmp_path / "100K")] == ["beam-100K-2", "beam-100K-10"]
    # a folder of links bounds a run; the banks keep the conversations' own names
    pick = tmp_path / "pick"
    pick.mkdir()
    (pick / "1").symlink_to(tmp_path / "100K" / "10")
    assert [h.id for h in load_answer_set(pick)] == ["beam-100K-10"]
    # without the truncated chat, chat.json is read, all three batches
    (tmp_path / "100K" / "2" / "chat_trunecated.json").unlink()
    h = read_conversation(tmp_path / "100K" / "2")
    assert h.turns[-1].turn_id == "beam-100K-2-b3:9"
    assert h.turns[-1].timestamp == datetime(2024, 5, 2, tzinfo=UTC)
    assert {q.asked_at for q in h.questions} == {datetime(2024, 5, 2, tzinfo=UTC)}


def test_a_message_too_long_for_a_memory_is_cut_to_fit(tmp_path):
    d = _copy(tmp_path)
    chat = json.loads((d / "chat_trunecated.json").read_text())
    chat[0]["turns"][0][1]["content"] = "é" * 40_000  # 80,000 bytes
    (d / "chat_trunecated.json").write_text(json.dumps(chat))
    turn = read_conversation(d).turns[1]
    assert len(turn.line.encode()) <= MAX_TEXT_BYTES
    assert len(turn.text) == (MAX_TEXT_BYTES - len(b"assistant: ")) // 2
    assert set(turn.text) == {"é"}


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([8], "message 8 is not in the chat"),  # in chat.json only: the truncated chat is read
        (["chat_id: 2"], "'chat_id: 2' is not a message id"),
        ({"first_statement": [2], "second_statement": [None, "2b"]}, "'2b' is not a message id"),
    ],
)
def test_bad_evidence_names_the_file_and_question(tmp_path, ids, message):
    d = _copy(tmp_path)
    path = d / "probing_questions" / "probing_questions.json"
    probing = json.loads(path.read_text())
    probing["information_extraction"][0]["source_chat_ids"] = ids
    path.write_text(json.dumps(probing))
    with pytest.raises(ValueError, match=message) as err:
        read_conversation(d)
    assert "information_extraction[0]" in str(err.value)
    assert str(path) in str(err.value)


def test_a_question_without_evidence_is_left_out(tmp_path):
    d = _copy(tmp_path)
    path = d / "probing_questions" / "probing_questions.json"
    probing = json.loads(path.read_text())
    probing["information_extraction"][0]["source_chat_ids"] = []
    probing["event_ordering"][0]["source_chat_ids"] = {"first_event": [], "second_event": [4]}
    path.write_text(json.dumps(probing))
    h = read_conversation(d)
    assert sorted(q.kind for q in h.questions) == [
        "contradiction_resolution",
        "event_ordering",
        "knowledge_update",
    ]
    assert next(q for q in h.questions if q.kind == "event_ordering").expected == {f"{H}-b2:4"}


def test_a_batch_without_a_date_and_a_folder_without_chats(tmp_path):
    d = _copy(tmp_path)
    chat = json.loads((d / "chat_trunecated.json").read_text())
    del chat[0]["turns"][0][0]["time_anchor"]
    (d / "chat_trunecated.json").write_text(json.dumps(chat))
    with pytest.raises(ValueError, match="batch 1: no time_anchor on the first batch"):
        read_conversation(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no BEAM conversation"):
        load_beam(tmp_path / "empty")
