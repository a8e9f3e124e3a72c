"""The datasets' own fields read by their readers: LoCoMo and LongMemEval session times, and
LoCoMo's image captions as the turn's kind and caption."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from memlane.ingest import InputError, load_conversations
from memlane.ingest.dataset_times import locomo_time, longmemeval_time
from memlane.records import Turn
from memlane.retain.chunking import format_turn
from memlane.temporal import parse_timestamp
from tests.fixtures import write_locomo_fixture


@pytest.mark.parametrize(
    "value, expected",
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
        ("7:05 PM on 3 Aug, 2023", datetime(2023, 8, 3, 19, 5, tzinfo=UTC)),
        ("8 May, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
        ("May 8, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
        ("May 8th, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
    ],
)
def test_locomo_time_reads_locomo_session_times(value, expected):
    assert locomo_time(value) == expected
    with pytest.raises(ValueError):  # the engine's own parser knows no dataset's form
        parse_timestamp(value)


def test_longmemeval_time_reads_longmemeval_times():
    assert longmemeval_time("2023/05/20 (Sat) 02:21") == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert longmemeval_time("2023/05/20") == datetime(2023, 5, 20, tzinfo=UTC)
    assert longmemeval_time("2023-05-20") is None  # ISO: the generic parser's
    with pytest.raises(ValueError):
        parse_timestamp("2023/05/20 (Sat) 02:21")


@pytest.mark.parametrize(
    "value", ["13:56 pm on 8 May, 2023", "1:61 pm on 8 May, 2023", "1:56 pm on 31 February, 2023"]
)
def test_locomo_time_rejects_impossible_times(value):
    with pytest.raises(ValueError):
        locomo_time(value)


def test_locomo_time_leaves_other_forms_to_the_generic_parser():
    assert locomo_time("1:56 pm on 8 Mayo, 2023") is None
    assert locomo_time("2023-05-08T13:56:00Z") is None


def test_locomo_reader_still_reads_iso_session_times_and_names_bad_ones(tmp_path):
    path = write_locomo_fixture(tmp_path / "f.json")
    data = json.loads(path.read_text())
    data[0]["conversation"]["session_1_date_time"] = "2024-02-03T09:05:00Z"
    path.write_text(json.dumps(data))
    conv = load_conversations(path)[0]
    assert conv.turns[0].timestamp == datetime(2024, 2, 3, 9, 5, tzinfo=UTC)
    data[0]["conversation"]["session_1_date_time"] = "13:56 pm on 8 May, 2023"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert str(ei.value) == (
        "f.json: $[0].conversation.session_1_date_time: cannot parse timestamp '13:56 pm on 8 May, 2023'"
    )


def test_locomo_caption_must_be_a_string(tmp_path):
    path = write_locomo_fixture(tmp_path / "f.json")
    data = json.loads(path.read_text())
    data[0]["conversation"]["session_2"][1]["blip_caption"] = ["a photo"]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as ei:
        load_conversations(path)
    assert (
        str(ei.value) == "f.json: $[0].conversation.session_2[1].blip_caption: expected a string, got array"
    )


def _turn(**kw) -> Turn:
    base = dict(
        document_id="d",
        session_id="s",
        turn_id="t",
        index=0,
        speaker="Ann",
        text="",
        timestamp=datetime(2024, 1, 1, tzinfo=UTC),
    )
    return Turn(**(base | kw))


def test_image_turn_caption_is_content_and_chunk_text():
    turn = _turn(kind="image", caption="a dog on a beach")
    assert turn.has_content
    assert format_turn(turn) == "Ann:  [shares an image: a dog on a beach]"
    assert not _turn(text="  ").has_content
    assert not _turn(kind="image").has_content  # an image with no words says nothing


def test_a_caption_needs_an_image_kind():
    with pytest.raises(ValidationError, match="needs kind 'image'"):
        _turn(text="hi", caption="a dog")
