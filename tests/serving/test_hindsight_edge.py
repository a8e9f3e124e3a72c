"""The Hindsight surface's edge rules without a service (no client needed): the bank id
mapping (reversible, collision-free), how an item's text becomes turns, and the request fields
that change meaning. Expected values are written out from the rules in docs/hindsight.md."""

from __future__ import annotations

import pytest

from serve.errors import APIError
from serve.hindsight.answers import hindsight_operation, memlane_operation
from serve.hindsight.bank_ids import BankIdError, check_new, to_hindsight, to_memlane
from serve.hindsight.requests import RecallBody, RetainBody, recall_params, retain_params, turns_of

BANK_IDS = [
    ("user-123", "user-123"),  # Memlane takes it: the same id
    ("a.b_c-1", "a.b_c-1"),
    ("HS_x", "HS_x"),  # the prefix is case-sensitive
    ("user:alice", "hs_user_3aalice"),
    ("team a", "hs_team_20a"),
    ("a@b.com", "hs_a_40b.com"),
    ("é", "hs__c3_a9"),
    ("_lead", "hs__5flead"),  # Memlane's ids start with a letter or digit
    ("hs_x", "hs_hs_5fx"),  # an id with the prefix is always encoded
    ("x" * 128, "x" * 128),
]


@pytest.mark.parametrize(("hindsight", "memlane"), BANK_IDS)
def test_bank_ids_map_both_ways(hindsight, memlane):
    assert to_memlane(hindsight) == memlane
    assert to_hindsight(memlane) == hindsight


def test_the_mapping_is_collision_free_over_ids_that_look_alike():
    ids = ["hs_x", "hs_hs_5fx", "x", "hs__78", "hs_hs__5f78", "user:a", "hs_user_3aa", "user_3aa"]
    mapped = [to_memlane(i) for i in ids]
    assert len(set(mapped)) == len(ids)
    assert [to_hindsight(m) for m in mapped] == ids


@pytest.mark.parametrize("memlane", ["hs_garbage_zz", "hs_A", "hs__41", "hs__ff"])
def test_a_memlane_id_no_hindsight_id_maps_to_has_none(memlane):
    assert to_hindsight(memlane) is None


@pytest.mark.parametrize(
    ("bank_id", "message"),
    [
        ("", "must not be empty"),
        ("a" * 193, "at most 192 bytes"),
        ("a\nb", "control characters"),
        ("_x", "must not start with '_'"),
        ("é" * 60, "too long for Memlane"),  # 60 two-byte characters: 363 characters encoded
    ],
)
def test_new_bank_ids_follow_hindsights_rules_and_fit_memlanes(bank_id, message):
    with pytest.raises(BankIdError, match=message):
        check_new(bank_id)


TURNS = [
    ("I prefer dark mode", [("user", "I prefer dark mode")]),
    ("Ana: hi\nBen: hello", [("Ana", "hi"), ("Ben", "hello")]),
    # a blank line and a continued line stay in the turn before them
    ("USER: q\n\nASSISTANT: a list:\n- one", [("USER", "q\n"), ("ASSISTANT", "a list:\n- one")]),
    ("note first\nAna: then me", [("user", "note first"), ("Ana", "then me")]),
    ("Meeting at 10: bring notes", [("user", "Meeting at 10: bring notes")]),  # no name
    ("Mary Ann Lee: yes", [("Mary Ann Lee", "yes")]),
    ("One Two Three Four: no", [("user", "One Two Three Four: no")]),  # four words: no name
    ("Ana:   spaced", [("Ana", "  spaced")]),  # the text after ": " as sent
    ("\n\n", []),
]


@pytest.mark.parametrize(("content", "turns"), TURNS)
def test_an_items_text_becomes_turns(content, turns):
    assert turns_of(content) == turns


def test_a_transcript_reads_back_as_sent():
    text = "Ana: I adopted Pixel.\nBen: Lovely!\n\nAna: Pixel howls."
    assert "\n".join(f"{s}: {t}" for s, t in turns_of(text)) == text


def test_retain_items_carry_their_time_document_and_tags():
    body = RetainBody.model_validate(
        {
            "items": [
                {
                    "content": "Ana: a\nBen: b",
                    "timestamp": "2024-01-15T10:30:00Z",
                    "document_id": "d",
                    "tags": "x",
                },
                {"content": "plain", "timestamp": "unset", "tags": None},
            ],
            "document_tags": ["y"],
        }
    )
    items = retain_params(body)["items"]
    assert items == [
        {
            "content": "a",
            "speaker": "Ana",
            "tags": ["x", "y"],
            "timestamp": "2024-01-15T10:30:00+00:00",
            "document_id": "d",
        },
        {
            "content": "b",
            "speaker": "Ben",
            "tags": ["x", "y"],
            "timestamp": "2024-01-15T10:30:00+00:00",
            "document_id": "d",
        },
        {"content": "plain", "speaker": "user", "tags": ["y"]},
    ]


@pytest.mark.parametrize(
    ("item", "status", "field"),
    [
        ({"content": [{"type": "text", "text": "x"}]}, 422, "items.0.content"),
        ({"content": "x", "update_mode": "append"}, 501, "items.0.update_mode"),
        ({"content": "x", "timestamp": "yesterday"}, 422, "items.0.timestamp"),
        ({"content": "  \n "}, 422, "items.0.content"),
    ],
)
def test_retain_refuses_what_it_cannot_keep_naming_the_field(item, status, field):
    with pytest.raises(APIError) as refused:
        retain_params(RetainBody.model_validate({"items": [item]}))
    assert (refused.value.status, refused.value.field) == (status, field)


def test_recall_maps_modes_types_and_the_reference_time():
    params = recall_params(
        RecallBody.model_validate(
            {
                "query": "q",
                "tags": ["a"],
                "tags_match": "all",
                "types": ["opinion", "world"],
                "query_timestamp": "2024-02-01T00:00:00Z",
            }
        )
    )
    assert (params["tags"], params["tags_match"], params["types"]) == (["a"], "all_or_untagged", ["world"])
    assert params["reference_time"] == "2024-02-01T00:00:00+00:00"
    assert recall_params(RecallBody(query="q"))["types"] == ["world", "experience", "observation"]
    assert recall_params(RecallBody(query="q", tags=[], tags_match="exact"))["tags"] is None
    for body, status in (
        ({"query": "q", "types": ["belief"]}, 422),
        ({"query": "?!"}, 422),
        ({"query": "q", "query_timestamp": "soon"}, 400),
        ({"query": "q", "tag_groups": [{"tags": ["a"]}]}, 501),
        ({"query": "q", "tags": ["a"], "tag_groups": []}, 422),
        ({"query": "q", "min_scores": {"final": 0.1}}, 501),
    ):
        with pytest.raises(APIError) as refused:
            recall_params(RecallBody.model_validate(body))
        assert refused.value.status == status, body


def test_operation_ids_are_the_same_uuid_on_both_sides():
    op = "1f615087-04fb-4bdc-a42d-9bb0e4676235"
    assert memlane_operation(op) == "op-1f61508704fb4bdca42d9bb0e4676235"
    assert hindsight_operation("op-1f61508704fb4bdca42d9bb0e4676235") == op
    assert memlane_operation("not-a-uuid") is None
