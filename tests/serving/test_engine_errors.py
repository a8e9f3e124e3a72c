"""Engine errors carry the field at fault (memlane/errors.py), and the API's error body reads it
from the error, raised here or re-raised by Ray from another replica (serve/errors.py)."""

from __future__ import annotations

import pickle

import pytest
from ray.exceptions import RayTaskError

from memlane.errors import InvalidInput
from serve.errors import engine_error


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ("types: 'rumour' is not a fact type", "types"),
        ("items.0.content: must not be blank; tags: invalid tag ''", "items.0.content"),
        ("line 3: not JSON (Expecting value at column 1)", None),  # a place, not a field
        ("/data/chat.jsonl: line 3: no 'text'", None),  # a file (memlane.ingest's InputError)
        ("offset must be >= 0 and limit in 1..1000", None),
    ],
)
def test_the_field_is_read_from_the_message_prefix_when_not_given(message, field):
    assert InvalidInput(message).field == field


def test_a_field_given_is_kept_across_processes():
    exc = InvalidInput("offset must be >= 0", field="offset")
    again = pickle.loads(pickle.dumps(exc))
    assert (type(again), str(again), again.field) == (InvalidInput, "offset must be >= 0", "offset")


def test_the_api_error_names_the_field_also_when_ray_re_raises_it():
    exc = InvalidInput("until: must be after since")
    here = engine_error(exc)
    assert here is not None and (here.status, here.code, here.field) == (422, "invalid_request", "until")
    # What a DeploymentHandle's caller gets: a RayTaskError subclassing the replica's error,
    # with the (unpickled) original as its cause.
    remote = RayTaskError("retain", "Traceback (most recent call last): ...", pickle.loads(pickle.dumps(exc)))
    re_raised = remote.as_instanceof_cause()
    assert isinstance(re_raised, InvalidInput)
    there = engine_error(re_raised)
    assert there is not None
    assert (there.status, there.message, there.field) == (422, "until: must be after since", "until")
    unnamed = engine_error(InvalidInput("offset must be >= 0 and limit in 1..1000"))
    assert unnamed is not None and unnamed.field is None
