"""Corpus readers of the backfill: formats, grouping order, rejects. No Ray, no models."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from fixtures import write_jsonl_fixture, write_locomo_fixture

from pipelines.corpus import BankInput, bank_id_for, decode_bank, detect_format, encode_bank, read_corpus


def _read(path, fmt="auto"):
    rejects = []
    corpus = read_corpus(path, fmt, reject=rejects.append)
    return {b.bank_id: b for b in corpus.bank_inputs()}, rejects, corpus


def _lme_item(qid, dates, sessions, sids=None):
    item = {
        "question_id": qid,
        "question": "q?",
        "answer": "a",
        "haystack_dates": dates,
        "haystack_sessions": sessions,
    }
    if sids is not None:
        item["haystack_session_ids"] = sids
    return item


def test_locomo_matches_engine_loader(tmp_path):
    from memlane.ingest import load_conversations

    path = write_locomo_fixture(tmp_path / "locomo.json")
    banks, rejects, _ = _read(path)
    assert rejects == []
    expected = load_conversations(path, format="locomo")
    assert sorted(banks) == ["fx-1", "fx-2"]
    for conv in expected:
        [(doc_id, turns)] = banks[conv.document_id].documents
        assert doc_id == conv.document_id
        assert turns == conv.turns  # pydantic equality: every field, metadata included


def test_longmemeval_banks_sessions_and_dates(tmp_path):
    sessions = [
        [
            {"role": "user", "content": "I moved to Ghent last month.", "has_answer": True},
            {"role": "assistant", "content": "How do you like it?"},
        ],
        [{"role": "user", "content": "My bike got stolen yesterday."}],
    ]
    data = [
        _lme_item(
            "q-001", ["2023/05/20 (Sat) 02:21", "2023/06/02 (Fri) 18:05"], sessions, ["answer_a1", "s_77"]
        ),
        _lme_item("bad id/with slash", ["2023/05/21 (Sun) 09:00"], [[{"role": "user", "content": "hello"}]]),
    ]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    assert detect_format(path) == "longmemeval"
    banks, rejects, _ = _read(path)
    assert rejects == []
    assert set(banks) == {"q-001", bank_id_for("bad id/with slash")}
    assert bank_id_for("bad id/with slash").startswith("bad_id_with_slash-")
    [(doc, turns)] = banks["q-001"].documents
    assert doc == "q-001"
    assert [t.turn_id for t in turns] == ["answer_a1:1", "answer_a1:2", "s_77:1"]
    assert [t.speaker for t in turns] == ["user", "assistant", "user"]
    assert turns[0].timestamp == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert turns[2].timestamp == datetime(2023, 6, 2, 18, 5, tzinfo=UTC)
    assert turns[0].metadata == {"has_answer": True}
    assert [t.index for t in turns] == [0, 1, 0]


def test_longmemeval_bad_date_rejects_its_session_only(tmp_path):
    sessions = [
        [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}],
        [{"role": "user", "content": "three"}, {"role": "user", "content": ""}],
    ]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([_lme_item("q1", ["not a date", "2023/05/20 (Sat) 02:21"], sessions)]))
    banks, rejects, corpus = _read(path, "longmemeval")
    assert [t.text for _, ts in banks["q1"].documents for t in ts] == ["three"]
    assert corpus.rejects == 3  # two turns of the undated session + one empty turn
    assert "cannot parse timestamp 'not a date'" in rejects[0]["reason"]
    assert rejects[0]["records"] == 2


def test_generic_jsonl_order_matches_engine_jsonl_loader(tmp_path):
    """Same document order and turn order (sessions grouped by first appearance) as the
    engine's JSONL loader, which Memory.retain_file uses."""
    from memlane.ingest import load_conversations

    rows = [
        {
            "bank_id": "b1",
            "document_id": "d1",
            "session_id": "s2",
            "speaker": "Ana",
            "text": "second session first",
            "timestamp": "2024-02-02T10:00:00Z",
        },
        {
            "bank_id": "b1",
            "document_id": "d1",
            "session_id": "s1",
            "role": "user",
            "text": "first session",
            "timestamp": "2024-01-01T10:00:00Z",
            "mood": "calm",
        },
        {
            "bank_id": "b1",
            "document_id": "d1",
            "session_id": "s2",
            "speaker": "Bo",
            "text": "second session again",
            "timestamp": "2024-02-02T10:01:00Z",
            "turn_id": "x9",
        },
    ]
    path = write_jsonl_fixture(tmp_path / "b1.jsonl", rows)
    banks, rejects, _ = _read(path)
    assert rejects == []
    [(doc, turns)] = banks["b1"].documents
    # The engine's loader on the same lines (bank_id is just extra metadata to it).
    [conv] = load_conversations(
        write_jsonl_fixture(
            tmp_path / "d1.jsonl", [{k: v for k, v in r.items() if k != "bank_id"} for r in rows]
        )
    )
    assert doc == conv.document_id == "d1"
    assert [
        (t.session_id, t.turn_id, t.index, t.speaker, t.text, t.timestamp, t.metadata) for t in turns
    ] == [(t.session_id, t.turn_id, t.index, t.speaker, t.text, t.timestamp, t.metadata) for t in conv.turns]
    assert [t.turn_id for t in turns] == ["s2:1", "x9", "s1:1"]


def test_generic_rejects_with_reasons_and_default_document(tmp_path):
    rows = [
        {"bank_id": "u1", "session_id": "s", "speaker": "A", "text": "ok one", "timestamp": 1700000000},
        {"bank_id": "u1", "session_id": "s", "speaker": "A", "timestamp": "2024-01-01"},
        {"bank_id": "u1", "session_id": "s", "speaker": "A", "text": "   ", "timestamp": "2024-01-01"},
        {"bank_id": "u1", "session_id": "s", "speaker": "A", "text": "x", "timestamp": "soonish"},
        {"bank_id": "-bad", "session_id": "s", "speaker": "A", "text": "x", "timestamp": "2024-01-01"},
        {"bank_id": "u2", "session_id": "s", "text": "no speaker", "timestamp": "2024-01-01"},
        {
            "bank_id": "u1",
            "session_id": "s",
            "speaker": "A",
            "text": "dup",
            "timestamp": "2024-01-01",
            "turn_id": "s:1",
        },
        "{not json",
        "[1, 2]",
        {"bank_id": "u2", "session_id": "s", "speaker": "B", "text": "ok two", "timestamp": "2024-01-02"},
    ]
    path = write_jsonl_fixture(tmp_path / "c.jsonl", rows)
    banks, rejects, corpus = _read(path)
    assert corpus.turns == 2 and corpus.rejects == 8
    assert [b for b in banks] == ["u1", "u2"]
    # Default document id: the file's stem, as memlane retain of the file (it was the bank id).
    assert banks["u1"].documents[0][0] == "c"
    reasons = [r["reason"] for r in rejects]
    assert [r["where"] for r in rejects] == [f"line {n}" for n in (2, 3, 4, 5, 6, 7, 8, 9)]
    # The engine's JSONL reader's reasons (one reader for both), without the place.
    assert reasons[0] == "missing field 'text'" and reasons[1] == "field 'text': must not be empty"
    assert "cannot parse timestamp 'soonish'" in reasons[2]
    assert "invalid bank id '-bad'" in reasons[3]
    assert "speaker" in reasons[4]
    assert "duplicate turn_id 's:1'" in reasons[5]
    assert "not valid JSON" in reasons[6]
    assert reasons[7] == "expected a JSON object, got array"


def test_directory_with_parquet_and_unknown_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path / "corpus"
    d.mkdir()
    rows = [
        {
            "bank_id": "p1",
            "session_id": "s1",
            "speaker": "A",
            "text": f"turn {i}",
            "timestamp": f"2024-03-0{i + 1}T08:00:00Z",
        }
        for i in range(3)
    ]
    pq.write_table(pa.Table.from_pylist(rows), d / "part-0.parquet")
    write_jsonl_fixture(d / "part-1.jsonl", [dict(rows[0], bank_id="p2")])
    (d / "notes.txt").write_text("just some notes\n")
    (d / ".hidden.jsonl").write_text("garbage\n")
    banks, rejects, corpus = _read(d)
    assert corpus.files == 3
    assert {b: x.n_turns for b, x in banks.items()} == {"p1": 3, "p2": 1}
    assert len(rejects) == 1 and rejects[0]["source"] == "notes.txt"
    assert "unknown format" in rejects[0]["reason"]


def test_bad_format_and_missing_path(tmp_path):
    with pytest.raises(ValueError, match="--format"):
        read_corpus(tmp_path, "csv", reject=lambda r: None)
    with pytest.raises(FileNotFoundError):
        read_corpus(tmp_path / "nope.jsonl", "auto", reject=lambda r: None)


def test_wire_format_round_trip(tmp_path):
    path = write_locomo_fixture(tmp_path / "locomo.json")
    banks, _, _ = _read(path)
    bank = banks["fx-1"]
    back = decode_bank(encode_bank(bank))
    assert back == bank.documents
    assert isinstance(BankInput("x", back).n_turns, int) and BankInput("x", back).n_turns == 10


def test_locomo_bad_sample_is_rejected_alone(tmp_path):
    from fixtures import locomo_fixture_data

    data = locomo_fixture_data()
    data[1]["conversation"]["session_2_date_time"] = "whenever"
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    banks, rejects, corpus = _read(path)
    assert list(banks) == ["fx-1"] and banks["fx-1"].n_turns == 10
    assert corpus.rejects == 10  # fx-2's ten turns
    assert len(rejects) == 1 and rejects[0]["where"] == "$[1]"
    assert "cannot parse timestamp 'whenever'" in rejects[0]["reason"]


def test_generic_jsonl_without_document_id_is_what_memlane_retain_reads(tmp_path):
    """The bug fixed: with no ``document_id`` the backfill named the document after the bank,
    ``memlane retain`` after the file, so the same lines gave other memory ids. One reader now:
    the same turns, document id included."""
    from memlane.ingest import load_conversations

    rows = [
        {"session_id": "s1", "speaker": "Ana", "text": "hello", "timestamp": "2024-01-01T10:00:00Z"},
        {"session_id": "s1", "role": "user", "text": "again", "timestamp": "2024-01-01T10:01:00Z"},
    ]
    path = write_jsonl_fixture(tmp_path / "chat.jsonl", [dict(r, bank_id="b1") for r in rows])
    banks, rejects, _ = _read(path)
    assert rejects == []
    [(doc, turns)] = banks["b1"].documents
    (tmp_path / "plain").mkdir()
    [conv] = load_conversations(write_jsonl_fixture(tmp_path / "plain" / "chat.jsonl", rows))
    assert doc == conv.document_id == "chat"
    assert turns == conv.turns  # every field, metadata included (bank_id is the route, not data)


def test_generic_numeric_ids_are_rejected_as_memlane_retain_refuses_them(tmp_path):
    base = {"bank_id": "b1", "speaker": "A", "text": "x", "timestamp": "2024-01-01"}
    rows = [
        dict(base, session_id=2),
        dict(base, session_id="s", turn_id=7),
        dict(base, session_id="s", document_id=""),
        dict(base, session_id="s"),
    ]
    banks, rejects, corpus = _read(write_jsonl_fixture(tmp_path / "n.jsonl", rows))
    assert [r["reason"] for r in rejects] == [
        "field 'session_id': expected a string, got number",
        "field 'turn_id': expected a string, got number",
        "field 'document_id': must not be empty",
    ]
    assert corpus.turns == 1 and [t.turn_id for _, ts in banks["b1"].documents for t in ts] == ["s:1"]


def test_parquet_nulls_are_absent_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"bank_id": "p1", "session_id": "s", "speaker": "A", "text": "one", "document_id": "d"},
        {"bank_id": "p1", "session_id": "s", "speaker": "A", "text": "two", "document_id": None},
    ]
    ts = datetime(2024, 3, 1, 8, tzinfo=UTC)
    pq.write_table(pa.Table.from_pylist([dict(r, timestamp=ts) for r in rows]), tmp_path / "part.parquet")
    banks, rejects, _ = _read(tmp_path / "part.parquet")
    assert rejects == []
    assert [(d, [t.text for t in turns]) for d, turns in banks["p1"].documents] == [
        ("d", ["one"]),
        ("part", ["two"]),
    ]
    assert banks["p1"].documents[0][1][0].timestamp == ts
