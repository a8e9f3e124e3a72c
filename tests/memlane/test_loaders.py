"""Tests of memlane.ingest: LoCoMo and JSONL loaders, format detection and input errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.ingest import Conversation, InputError, detect_format, load_conversations
from tests.fixtures import LOCOMO_FIXTURE_DATES, write_jsonl_fixture, write_locomo_fixture

REPO = Path(__file__).resolve().parents[2]
LOCOMO_PATH = REPO.parent / "shared/data/locomo10.json"
SAMPLES = REPO / "samples"


def _have_parse_timestamp() -> bool:
    try:
        from memlane.temporal import parse_timestamp  # noqa: F401
    except ImportError:
        return False
    return True


needs_temporal = pytest.mark.skipif(
    not _have_parse_timestamp(),
    reason="memlane.temporal.parse_timestamp is not available yet (another engineer writes it); "
    "the loaders need it to parse timestamps",
)

UTC = UTC


def _row(**kw):
    base = {"speaker": "Ana", "text": "hello", "timestamp": "2025-03-01T10:00:00Z", "session_id": "s1"}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()


def _msg(excinfo) -> str:
    return str(excinfo.value)


# ------------------------------------------------------------------------------------------
# LoCoMo


@needs_temporal
def test_locomo_fixture_loads_one_conversation_per_sample(tmp_path):
    convs = load_conversations(write_locomo_fixture(tmp_path / "fx.json"))
    assert [c.document_id for c in convs] == ["fx-1", "fx-2"]
    assert all(isinstance(c, Conversation) for c in convs)
    fx1, fx2 = convs
    assert fx1.speakers == ["Noor", "Felix"]
    assert fx2.speakers == ["Marta", "Olu"]
    assert len(fx1.turns) == 10 and len(fx2.turns) == 10
    # sessions are stored 3, 1, 2 in the file: they come back in numeric order
    assert fx1.session_ids == ["session_1", "session_2", "session_3"]
    assert [t.turn_id for t in fx1.turns] == [
        "D1:1",
        "D1:2",
        "D1:3",
        "D1:4",
        "D2:1",
        "D2:2",
        "D2:3",
        "D3:1",
        "D3:2",
        "D3:3",
    ]
    assert [t.index for t in fx1.turns] == [0, 1, 2, 3, 0, 1, 2, 0, 1, 2]
    assert {t.document_id for t in fx1.turns} == {"fx-1"}
    assert fx1.turns[0].speaker == "Noor" and fx1.turns[1].speaker == "Felix"
    assert fx1.turns[6].text == "Not at all. Also, I adopted a tortoise called Dumpling."
    assert fx1.turns[6].session_id == "session_2"


@needs_temporal
def test_locomo_session_timestamps(tmp_path):
    path = write_locomo_fixture(tmp_path / "f.json")
    convs = {c.document_id: c for c in load_conversations(path)}
    # "9:05 am on 3 February, 2024" etc., written out by hand
    expected = {
        ("fx-1", "session_1"): datetime(2024, 2, 3, 9, 5, tzinfo=UTC),
        ("fx-1", "session_2"): datetime(2024, 2, 17, 16, 30, tzinfo=UTC),
        ("fx-1", "session_3"): datetime(2024, 3, 2, 20, 15, tzinfo=UTC),
        ("fx-2", "session_1"): datetime(2024, 1, 6, 11, 40, tzinfo=UTC),
        ("fx-2", "session_2"): datetime(2024, 1, 21, 19, 20, tzinfo=UTC),
    }
    assert set(expected) == set(LOCOMO_FIXTURE_DATES)
    for conv in convs.values():
        for t in conv.turns:
            assert t.timestamp == expected[(conv.document_id, t.session_id)]


@needs_temporal
def test_locomo_image_fields_kept_and_orphan_dates_ignored(tmp_path):
    fx1 = load_conversations(write_locomo_fixture(tmp_path / "f.json"))[0]
    by_id = {t.turn_id: t for t in fx1.turns}
    assert by_id["D2:2"].kind == "image"
    assert by_id["D2:2"].caption == "a photo of seedlings in a wooden raised bed"
    assert by_id["D2:2"].metadata == {
        "query": "bean seedlings allotment",
        "img_url": ["https://example.invalid/seedlings.jpg"],
    }  # the re-download flag is not kept
    assert all(t.metadata == {} and t.kind == "text" for t in fx1.turns if t.turn_id != "D2:2")
    # session_4_date_time has no session_4 list: no session 4, no error
    assert "session_4" not in fx1.session_ids
    assert fx1.metadata["dates_without_session"] == ["session_4_date_time"]
    assert fx1.metadata["format"] == "locomo"


@needs_temporal
def test_locomo_single_sample_object_and_numeric_session_order(tmp_path):
    conv = {"speaker_a": "A", "speaker_b": "B"}
    for n in (10, 2, 1):
        conv[f"session_{n}_date_time"] = f"1:00 pm on {n} May, 2023"
        conv[f"session_{n}"] = [{"speaker": "A", "dia_id": f"D{n}:1", "text": f"s{n}"}]
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"sample_id": "solo", "conversation": conv}), encoding="utf-8")
    (c,) = load_conversations(path)
    assert c.document_id == "solo"
    assert c.session_ids == ["session_1", "session_2", "session_10"]  # not "session_10" second
    assert [t.text for t in c.turns] == ["s1", "s2", "s10"]
    assert c.turns[2].timestamp == datetime(2023, 5, 10, 13, 0, tzinfo=UTC)
    assert c.speakers == ["A", "B"]  # B never speaks but is a named speaker


def _locomo_file(tmp_path, mutate) -> Path:
    from tests.fixtures import locomo_fixture_data

    data = locomo_fixture_data()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_locomo_session_without_date_time_is_an_error(tmp_path):
    path = _locomo_file(tmp_path, lambda d: d[0]["conversation"].pop("session_1_date_time"))
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert _msg(ei) == "bad.json: $[0].conversation.session_1: session has no 'session_1_date_time'"


@needs_temporal
def test_locomo_unparseable_date_names_path_and_value(tmp_path):
    def mutate(d):
        d[0]["conversation"]["session_2_date_time"] = "whenever"

    with pytest.raises(InputError) as ei:
        load_conversations(_locomo_file(tmp_path, mutate))
    assert _msg(ei) == ("bad.json: $[0].conversation.session_2_date_time: cannot parse timestamp 'whenever'")


@needs_temporal
@pytest.mark.parametrize(
    "mutate, expected",
    [
        (
            lambda d: d[1]["conversation"]["session_1"][2].pop("dia_id"),
            "$[1].conversation.session_1[2]: missing field 'dia_id'",
        ),
        (
            lambda d: d[0]["conversation"]["session_3"][0].update(text=7),
            "$[0].conversation.session_3[0].text: expected a string, got number",
        ),
        (
            lambda d: d[0]["conversation"]["session_1"][1].update(speaker=""),
            "$[0].conversation.session_1[1].speaker: must not be empty",
        ),
        (
            lambda d: d[0]["conversation"]["session_2"][2].update(dia_id="D1:1"),
            "$[0].conversation.session_2[2].dia_id: duplicate dia_id 'D1:1'",
        ),
        (
            lambda d: d[0]["conversation"]["session_2"].__setitem__(0, "hi"),
            "$[0].conversation.session_2[0]: expected a turn object, got string",
        ),
        (lambda d: d[1].update(sample_id="fx-1"), "$[1].sample_id: duplicate sample_id 'fx-1'"),
    ],
)
def test_locomo_turn_errors_name_the_json_path(tmp_path, mutate, expected):
    with pytest.raises(InputError) as ei:
        load_conversations(_locomo_file(tmp_path, mutate))
    assert expected in _msg(ei)
    assert _msg(ei).startswith("bad.json: ")


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d[0].pop("sample_id"), "$[0]: missing field 'sample_id'"),
        (lambda d: d[0].pop("conversation"), "$[0]: missing field 'conversation'"),
        (
            lambda d: d[0]["conversation"].update(session_2="oops"),
            "$[0].conversation.session_2: expected a list of turns, got string",
        ),
        (
            lambda d: [
                d[0]["conversation"].pop(k) for k in list(d[0]["conversation"]) if k.startswith("session_")
            ],
            "$[0].conversation: no session_N turn lists",
        ),
    ],
)
def test_locomo_sample_errors_name_the_json_path(tmp_path, mutate, expected):
    with pytest.raises(InputError) as ei:
        load_conversations(_locomo_file(tmp_path, mutate))
    assert expected in _msg(ei)


@pytest.mark.parametrize(
    "content, expected",
    [
        ('[{"sample_id": "a",\n "conversation": {]', "bad.json line 2 column"),
        ("[]", "bad.json: $: the list holds no samples"),
        ("42", "bad.json: $: expected a list of LoCoMo samples or one sample object, got number"),
        ('["x"]', "bad.json: $[0]: expected a sample object, got string"),
    ],
)
def test_locomo_file_level_errors(tmp_path, content, expected):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert expected in _msg(ei)


@needs_temporal
def test_locomo_is_all_or_nothing(tmp_path):
    # the first sample is fine, the second has a broken turn at its very end
    def mutate(d):
        d[1]["conversation"]["session_2"][-1]["speaker"] = None

    sink: list = []
    with pytest.raises(InputError) as ei:
        sink.extend(load_conversations(_locomo_file(tmp_path, mutate)))
    assert "$[1].conversation.session_2[4].speaker" in _msg(ei)
    assert sink == []


# ------------------------------------------------------------------------------------------
# JSONL


@needs_temporal
def test_jsonl_groups_documents_and_fills_defaults(tmp_path):
    path = write_jsonl_fixture(
        tmp_path / "chat.jsonl",
        [
            _row(
                document_id="u1", session_id="a", speaker="Ana", text="one", timestamp="2025-03-01T10:00:00Z"
            ),
            _row(session_id="a", speaker="Bo", text="no document id", timestamp="2025-03-01T10:01:00+01:00"),
            "",
            _row(
                document_id="u1", session_id="b", speaker=_DROP, role="user", text="two", timestamp=1700000000
            ),
            "   ",
            _row(
                document_id="u1",
                session_id="a",
                speaker="Cy",
                text="three",
                turn_id="custom-7",
                mood="happy",
                metadata={"lang": "en"},
            ),
            _row(document_id="u1", session_id="b", speaker="Ana", role="assistant", text="four"),
        ],
    )
    convs = load_conversations(path)
    assert [c.document_id for c in convs] == ["u1", "chat"]  # first appearance; stem default
    u1, chat = convs
    # ordered by session (first appearance: a, then b), then position in the session
    assert [(t.session_id, t.index, t.turn_id, t.text) for t in u1.turns] == [
        ("a", 0, "a:1", "one"),
        ("a", 1, "custom-7", "three"),
        ("b", 0, "b:1", "two"),
        ("b", 1, "b:2", "four"),
    ]
    assert u1.speakers == ["Ana", "user", "Cy"]  # role is an alias of speaker
    assert u1.turns[1].metadata == {"lang": "en", "mood": "happy"}
    assert u1.turns[3].speaker == "Ana" and u1.turns[3].metadata == {"role": "assistant"}
    assert u1.turns[2].timestamp == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert u1.turns[0].timestamp == datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    assert chat.turns[0].timestamp == datetime(2025, 3, 1, 9, 1, tzinfo=UTC)  # +01:00 -> UTC
    assert chat.turns[0].turn_id == "a:1" and chat.turns[0].document_id == "chat"
    assert u1.metadata["format"] == "jsonl" and u1.metadata["source"] == "chat.jsonl"


@needs_temporal
@pytest.mark.parametrize(
    "bad, expected",
    [
        ('{"speaker": "Ana", "text": "hi"', "line 3: not valid JSON"),
        ('["Ana", "hi"]', "line 3: expected a JSON object, got array"),
        (_row(speaker=_DROP), "line 3: missing field 'speaker' (or its alias 'role')"),
        (_row(speaker=_DROP, role=""), "line 3: field 'role': must not be empty"),
        (_row(speaker="   "), "line 3: field 'speaker': must not be empty"),
        (_row(speaker=_DROP, role=5), "line 3: field 'role': expected a string, got number"),
        (_row(text=_DROP), "line 3: missing field 'text'"),
        (_row(text="  "), "line 3: field 'text': must not be empty"),
        (_row(text=["hi"]), "line 3: field 'text': expected a string, got array"),
        (_row(session_id=_DROP), "line 3: missing field 'session_id'"),
        (_row(session_id=2), "line 3: field 'session_id': expected a string, got number"),
        (_row(timestamp=_DROP), "line 3: missing field 'timestamp'"),
        (_row(timestamp=None), "line 3: field 'timestamp': expected a string or a number, got null"),
        (_row(timestamp=True), "line 3: field 'timestamp': expected a string or a number, got boolean"),
        (_row(timestamp=""), "line 3: field 'timestamp': must not be empty"),
        (_row(document_id=""), "line 3: field 'document_id': must not be empty"),
        (_row(document_id=9), "line 3: field 'document_id': expected a string, got number"),
        (_row(turn_id=""), "line 3: field 'turn_id': must not be empty"),
        (_row(metadata=[1]), "line 3: field 'metadata': expected an object, got array"),
    ],
)
def test_jsonl_errors_name_line_and_field(tmp_path, bad, expected):
    path = write_jsonl_fixture(tmp_path / "data.jsonl", [_row(), "", bad, _row(text="after")])
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert _msg(ei).startswith(f"data.jsonl {expected}")


@needs_temporal
def test_jsonl_unparseable_timestamp_message(tmp_path):
    rows = [_row()] * 6 + [_row(timestamp="soon")]
    rows = [dict(r, turn_id=f"t{i}") for i, r in enumerate(rows)]
    path = write_jsonl_fixture(tmp_path / "data.jsonl", rows)
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert _msg(ei) == "data.jsonl line 7: field 'timestamp': cannot parse timestamp 'soon'"
    assert isinstance(ei.value, ValueError)


@needs_temporal
def test_jsonl_duplicate_turn_ids(tmp_path):
    # explicit id repeated within one document
    path = write_jsonl_fixture(
        tmp_path / "d.jsonl", [_row(turn_id="x"), _row(turn_id="y"), _row(turn_id="x")]
    )
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert _msg(ei) == (
        "d.jsonl line 3: field 'turn_id': duplicate turn_id 'x' in document 'd' (first on line 1)"
    )
    # a default id ("s1:2") colliding with an explicit one
    path = write_jsonl_fixture(tmp_path / "e.jsonl", [_row(turn_id="s1:2"), _row()])
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert "e.jsonl line 2: field 'turn_id': duplicate turn_id 's1:2'" in _msg(ei)
    # the same id in two different documents is fine
    path = write_jsonl_fixture(
        tmp_path / "f.jsonl", [_row(document_id="p", turn_id="x"), _row(document_id="q", turn_id="x")]
    )
    assert [len(c.turns) for c in load_conversations(path)] == [1, 1]


@needs_temporal
def test_jsonl_is_all_or_nothing(tmp_path):
    rows = [_row(document_id=f"doc{i % 3}", text=f"t{i}") for i in range(40)]
    rows.append(_row(speaker=""))  # the last line is bad
    path = write_jsonl_fixture(tmp_path / "big.jsonl", rows)
    sink: list = []
    with pytest.raises(InputError) as ei:
        sink.extend(load_conversations(path))
    assert "big.jsonl line 41: field 'speaker'" in _msg(ei)
    assert sink == []


@needs_temporal
def test_jsonl_crlf_and_bom(tmp_path):
    path = tmp_path / "win.jsonl"
    body = "\r\n".join(json.dumps(_row(text=f"t{i}", turn_id=f"t{i}")) for i in range(3))
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8") + b"\r\n")
    (conv,) = load_conversations(path)
    assert [t.text for t in conv.turns] == ["t0", "t1", "t2"]


# ------------------------------------------------------------------------------------------
# Files, encodings, detection


@pytest.mark.parametrize("name", ["empty.jsonl", "empty.json", "empty.txt"])
@pytest.mark.parametrize("content", [b"", b"\n \n\t\n"])
def test_empty_file_is_an_error(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError, match=rf"^{name}: file is empty$"):
        load_conversations(path)


def test_non_utf8_is_an_error(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"speaker": "Ana"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert _msg(ei).startswith("latin.jsonl line 2: not UTF-8")
    assert "0xe9" in _msg(ei)


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_conversations(tmp_path / "nope.jsonl")


def test_unknown_format_argument(tmp_path):
    path = write_jsonl_fixture(tmp_path / "a.jsonl", [_row()])
    with pytest.raises(ValueError, match="unknown format 'csv'"):
        load_conversations(path, format="csv")


def test_detect_format(tmp_path):
    fx = write_locomo_fixture(tmp_path / "fx.json")
    assert detect_format(fx) == "locomo"
    text = fx.read_text(encoding="utf-8")
    # content sniffing for extensions that say nothing
    (tmp_path / "fx.data").write_text(text, encoding="utf-8")
    assert detect_format(tmp_path / "fx.data") == "locomo"
    one_sample = json.dumps(json.loads(text)[0], indent=2)
    (tmp_path / "one.txt").write_text(one_sample, encoding="utf-8")
    assert detect_format(tmp_path / "one.txt") == "locomo"
    lines = write_jsonl_fixture(tmp_path / "lines.txt", [_row(), _row()])
    assert detect_format(lines) == "jsonl"
    single_turn = write_jsonl_fixture(tmp_path / "single.log", [_row()])
    assert detect_format(single_turn) == "jsonl"
    # .jsonl by name even if the content would be a LoCoMo list
    (tmp_path / "odd.jsonl").write_text(text, encoding="utf-8")
    assert detect_format(tmp_path / "odd.jsonl") == "jsonl"
    # JSON Lines content behind a .json name
    misnamed = write_jsonl_fixture(tmp_path / "turns.json", [_row(), _row()])
    assert detect_format(misnamed) == "jsonl"
    # a broken .json file goes to the LoCoMo loader, which names the problem
    (tmp_path / "broken.json").write_text('{\n  "sample_id": ', encoding="utf-8")
    assert detect_format(tmp_path / "broken.json") == "locomo"


@pytest.mark.parametrize("content", ["hello world\n", "speaker,text\nAna,hi\n", "7\n8\n"])
def test_undetectable_content_with_unknown_extension(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=r"^notes\.txt: cannot detect the format"):
        detect_format(path)
    with pytest.raises(InputError, match=r"^notes\.txt: cannot detect the format"):
        load_conversations(path)


@needs_temporal
def test_explicit_format_overrides_the_extension(tmp_path):
    path = write_jsonl_fixture(tmp_path / "log.txt", [_row(text="x")])
    (conv,) = load_conversations(path, format="jsonl")
    assert conv.document_id == "log" and conv.turns[0].text == "x"
    with pytest.raises(InputError, match="log.txt"):
        load_conversations(path, format="locomo")


# ------------------------------------------------------------------------------------------
# Bundled samples and the real LoCoMo file


@needs_temporal
def test_bundled_sample_conversations_load():
    convs = load_conversations(SAMPLES / "conversations.jsonl")
    assert [c.document_id for c in convs] == ["priya", "tomas"]
    assert [len(c.turns) for c in convs] == [81, 64]
    assert [len(c.session_ids) for c in convs] == [5, 5]
    assert convs[0].speakers == ["Priya", "Memlane"]
    assert convs[1].speakers == ["Ines", "Tomás"]
    for conv in convs:
        stamps = [t.timestamp for t in conv.turns]
        assert stamps == sorted(stamps)
        assert all(datetime(2025, 1, 1, tzinfo=UTC) <= s < datetime(2026, 1, 1, tzinfo=UTC) for s in stamps)
    # "2025-04-24T18:30:00+01:00" is the first turn of priya's session_4
    assert convs[0].turns[51].turn_id == "session_4:1"
    assert convs[0].turns[51].timestamp == datetime(2025, 4, 24, 17, 30, tzinfo=UTC)


@needs_temporal
@pytest.mark.skipif(not LOCOMO_PATH.exists(), reason=f"LoCoMo data not found at {LOCOMO_PATH}")
def test_real_locomo_totals():
    from evals import load_locomo_questions

    convs = load_conversations(LOCOMO_PATH)
    assert len(convs) == 10
    # the README's per-conversation table
    expected = {
        "conv-26": (19, 419),
        "conv-30": (19, 369),
        "conv-41": (32, 663),
        "conv-42": (29, 629),
        "conv-43": (29, 680),
        "conv-44": (28, 675),
        "conv-47": (31, 689),
        "conv-48": (30, 681),
        "conv-49": (25, 509),
        "conv-50": (30, 568),
    }
    assert {c.document_id: (len(c.session_ids), len(c.turns)) for c in convs} == expected
    assert sum(len(c.session_ids) for c in convs) == 272
    assert sum(len(c.turns) for c in convs) == 5882
    turns = [t for c in convs for t in c.turns]
    assert sum(t.kind == "image" and t.caption != "" for t in turns) == 1226
    assert sum("img_url" in t.metadata for t in turns) == 910
    conv26 = convs[0]
    assert conv26.turns[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert conv26.metadata["dates_without_session"] == [f"session_{n}_date_time" for n in range(20, 36)]

    qa = load_locomo_questions(LOCOMO_PATH)
    assert sum(len(v) for v in qa.values()) == 1540


def _jsonl(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "img.jsonl"
    base = {"speaker": "Ana", "session_id": "s1", "timestamp": "2023-05-08T13:56:00Z"}
    path.write_text("\n".join(json.dumps({**base, **r}) for r in rows) + "\n")
    return path


def test_jsonl_image_turns_carry_kind_and_caption(tmp_path):
    """An image turn in JSONL: ``kind``/``caption`` as such, or LoCoMo's ``blip_caption`` key
    (read in ingest only, never in the engine), which becomes the same two fields."""
    path = _jsonl(
        tmp_path,
        [
            {"text": "look", "kind": "image", "caption": "a dog on a beach"},
            {"text": "and this", "blip_caption": "a red bike"},
            {"text": "plain"},
        ],
    )
    (conv,) = load_conversations(path)
    kinds = [(t.kind, t.caption, "blip_caption" in t.metadata) for t in conv.turns]
    assert kinds == [
        ("image", "a dog on a beach", False),
        ("image", "a red bike", False),
        ("text", "", False),
    ]


@pytest.mark.parametrize(
    "row, field",
    [
        ({"text": "x", "kind": "video", "caption": "c"}, "kind"),
        ({"text": "x", "caption": 3}, "caption"),
        ({"text": "x", "kind": "text", "caption": "a caption on a text turn"}, "caption"),
    ],
)
def test_jsonl_bad_image_fields_are_refused(tmp_path, row, field):
    with pytest.raises(InputError, match=field):
        load_conversations(_jsonl(tmp_path, [row]))
