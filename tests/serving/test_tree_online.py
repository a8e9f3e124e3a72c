"""Online consolidation in the service: `memlane serve` with its defaults (background.tree
is true in the replicas: memlane/settings/entry_points.py) keeps a bank's temporal tree current after a retain, with no
POST .../consolidate, and re-consolidates after a document is deleted. The service is the one
shared by the modules on the defaults (tests/serving/conftest.py); its bank here is ana."""

from __future__ import annotations

import time

import pytest
from tree_samples import TREE_ITEMS, TREE_SHAPE

pytestmark = pytest.mark.slow
WAIT_S = 180  # a loaded 2-core CI machine; the consolidation itself takes well under a second


@pytest.fixture(scope="module")
def service(default_service):
    return default_service  # key "k" (every bank)


def _wait_for(fn, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(1.0)
    raise AssertionError(f"no {what} within {WAIT_S} s")


def test_the_service_consolidates_after_a_retain_and_after_a_deletion(service):
    from memlane_client import MemlaneClient

    with MemlaneClient(service["url"], "k", timeout=300) as sdk:
        sdk.put_bank("ana", name="Ana")
        sdk.retain("ana", TREE_ITEMS, document_id="chat")
        nodes = _wait_for(lambda: len(sdk.tree("ana", level="profile")) == 1 and sdk.tree("ana"), "tree")
        counts = {lv: sum(1 for n in nodes if n["level_name"] == lv) for lv in TREE_SHAPE}
        assert counts == TREE_SHAPE
        sdk.retain(
            "ana",
            [
                {
                    "content": "Dora sold her bike.",
                    "speaker": "Dora",
                    "session_id": "x",
                    "timestamp": "2024-06-03T10:00:00Z",
                }
            ],
            document_id="other",
        )
        _wait_for(lambda: any(n["key"] == "other|x" for n in sdk.tree("ana", level="session")), "new session")
        sdk.delete_document("ana", "other")
        _wait_for(
            lambda: not any("other" in n["key"] for n in sdk.tree("ana", level="session")), "pruned session"
        )
        # The deletion prunes every node above the session it emptied (the profile included);
        # the tree job, started once the bank's writes pause (background.delay_s), writes them
        # again from what remains: the shape of the first retain.
        _wait_for(
            lambda: {lv: len(sdk.tree("ana", level=lv)) for lv in TREE_SHAPE} == TREE_SHAPE,
            "tree rebuilt after the deletion",
        )
