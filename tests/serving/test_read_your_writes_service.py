"""Read-your-writes through the service (the one-process runtime, background fact resolution on
as `memlane serve` sets it): five retains through the Hindsight surface, then at once the
question the last of them changed the answer to. Before the recall waited for the bank's fact
job, the old job came first until the job ran, seconds later. Sentences written for this test."""

from __future__ import annotations

import pytest
from live import live_service

KEY = "k-ryw"
RETAINS = [
    ("2026-01-10T09:00:00+00:00", "Maya: I work at Fenwick & Hale as a junior accountant."),
    ("2026-02-01T12:00:00+00:00", "Maya: Lunch with Ola at the canal cafe was lovely."),
    ("2026-03-02T18:00:00+00:00", "Maya: Started my new job at Octopus Energy today!"),
    ("2026-03-09T08:00:00+00:00", "Maya: The commute is so much shorter now."),
    ("2026-03-10T19:00:00+00:00", "Maya: Bought a second-hand road bike for the summer."),
]


@pytest.fixture(scope="module", params=["0", "5"], ids=["no-wait", "wait"])
def url(request, tmp_path_factory):
    """A service whose recalls wait at most 0 s or 5 s for a bank's pending fact job; the
    background job waits for 60 s of quiet, so only the recall's wait can run it in time."""
    pytest.importorskip("hindsight_client", reason='the hindsight extra: pip install -e ".[hindsight]"')
    env = {
        "MEMLANE_RECALL__READ_YOUR_WRITES_S": request.param,
        "MEMLANE_BACKGROUND__DELAY_S": "60",
        "MEMLANE_BACKGROUND__MAX_DELAY_S": "120",
    }
    with live_service(tmp_path_factory.mktemp("ryw"), keys={KEY: "*"}, env=env, runtime="process") as state:
        yield request.param, state["url"]


def test_a_recall_right_after_retains_sees_their_supersession(url):
    import httpx
    from hindsight_client import Hindsight

    wait, base = url
    client = Hindsight(base_url=base + "/hindsight", api_key=KEY, timeout=300)
    try:
        client.create_bank("maya", name="Maya")
        for i, (when, text) in enumerate(RETAINS):
            client.retain("maya", text, timestamp=when, document_id=f"chat/{i}")
    finally:
        client.close()
    got = httpx.post(
        f"{base}/v1/banks/maya/recall",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"query": "Where does Maya work now?", "reference_time": "2026-03-11T09:00:00+00:00"},
        timeout=300,
    ).json()
    units = {m["unit"]["text"]: m["unit"] for m in got["memories"]}
    old = units["Maya: I work at Fenwick & Hale as a junior accountant."]
    if wait == "5":  # the recall ran the bank's fact job first: the old job is superseded
        assert got["memories"][0]["unit"]["text"] == "Maya: Started my new job at Octopus Energy today!"
        assert old["superseded_by"] is not None and got["timings_ms"]["facts_wait"] > 0
    else:  # no wait: the job is still queued behind its 60 s of quiet
        assert old["superseded_by"] is None and "facts_wait" not in got["timings_ms"]
