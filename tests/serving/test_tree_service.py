"""The temporal tree over the service: `memlane serve` on loopback (real Ray Serve, Milvus Lite
server, MiniLM, spaCy), with online consolidation off so that POST .../consolidate is what
builds the tree. Its routes (GET .../tree, POST .../consolidate, sync and async), recall's
``levels``/``planner`` and ``nodes``/``plan``, the SDK's methods, the keys' bank permissions and
the error bodies, and the tree carried by export and import over HTTP."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from live import live_service
from tree_samples import TREE_ITEMS, TREE_SHAPE

KEYS = {"k-ana": ["ana", "ana-async"], "k-bob": ["bob"], "k-admin": "*"}
NO_CHANGE = dict.fromkeys(TREE_SHAPE, 0)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    # The tree is built by the route under test only. The tree's unit gate never cuts the
    # `leaves` best units, and a node that only quotes kept units is redundant: with the default
    # 10, every unit of this 6-item bank stays and no node is left to answer; 2 leaves it a tail.
    env = {"MEMLANE_BACKGROUND__TREE": "false", "MEMLANE_TREE__LEAVES": "2"}
    with live_service(tmp_path_factory.mktemp("tree-service"), keys=KEYS, env=env) as state:
        yield state


def _client(service, key="k-ana"):
    from memlane_client import MemlaneClient

    return MemlaneClient(service["url"], key, timeout=300)


def _http(service, key="k-ana"):
    return httpx.Client(base_url=service["url"], headers={"Authorization": f"Bearer {key}"}, timeout=300)


def _error(resp, status, field=None):
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"]
    if field is not None:
        assert body["error"]["field"] == field, body
    return body["error"]


@pytest.fixture(scope="module")
def ana(service):
    """Bank ``ana`` with TREE_ITEMS retained and no tree yet; the first consolidation's report."""
    with _client(service) as sdk:
        sdk.put_bank("ana", name="Ana")
        sdk.retain("ana", TREE_ITEMS, document_id="chat")
        before = sdk.tree("ana")
        report = sdk.consolidate("ana")
    return {"before": before, "report": report}


def test_consolidate_builds_the_tree_once_and_the_tree_lists_it(service, ana):
    assert ana["before"] == []  # online consolidation is off: nothing until asked
    report = ana["report"]
    assert report["bank_id"] == "ana" and report["leaves"] == len(TREE_ITEMS)
    assert report["nodes"] == TREE_SHAPE and report["written"] == TREE_SHAPE
    with _client(service) as sdk, _http(service) as http:
        again = sdk.consolidate("ana")  # idempotent: every window unchanged
        assert again["written"] == NO_CHANGE and again["unchanged"] == TREE_SHAPE and again["removed"] == 0
        nodes = http.get("/v1/banks/ana/tree").json()["nodes"]
        assert sdk.tree("ana") == nodes
    assert [n["level_name"] for n in nodes] == ["session"] * 3 + ["day"] * 3 + ["week"] * 2 + ["profile"]
    assert [n["level"] for n in nodes] == [2] * 3 + [3] * 3 + [4] * 2 + [5]
    assert [n["key"] for n in nodes[3:]] == [
        "2024-05-06",
        "2024-05-08",
        "2024-05-14",
        "2024-W19",
        "2024-W20",
        "profile",
    ]
    for n in nodes:
        assert "embedding" not in n and "signature" not in n
        assert n["start"] <= n["end"] and n["text"] and n["children"] and n["bank_id"] == "ana"
    by_key = {n["key"]: n for n in nodes}
    # intervals: when the turns were said (the fixture's first and last turn of each window)
    assert (by_key["2024-W19"]["start"], by_key["2024-W19"]["end"]) == (
        "2024-05-06T09:00:00Z",
        "2024-05-08T18:10:00Z",
    )
    assert (by_key["profile"]["start"], by_key["profile"]["end"]) == (
        "2024-05-06T09:00:00Z",
        "2024-05-14T08:40:00Z",
    )
    assert by_key["2024-W19"]["children"] == [by_key["2024-05-06"]["id"], by_key["2024-05-08"]["id"]]


def test_tree_filters_by_level_and_window(service, ana):
    with _client(service) as sdk:
        days = sdk.tree("ana", level="day")
        assert [n["key"] for n in days] == ["2024-05-06", "2024-05-08", "2024-05-14"]
        assert sdk.tree("ana", level=3) == days and sdk.tree("ana", level="DAY") == days
        assert [n["key"] for n in sdk.tree("ana", level="week")] == ["2024-W19", "2024-W20"]
        # nodes overlapping [13 May, 15 May): the third session, its day and week, the profile
        window = sdk.tree("ana", since="2024-05-13T00:00:00Z", until="2024-05-15T00:00:00Z")
        assert [n["key"] for n in window] == ["chat|s3", "2024-05-14", "2024-W20", "profile"]
        assert [n["key"] for n in sdk.tree("ana", level="session", until="2024-05-07")] == ["chat|s1"]


def test_bad_tree_and_consolidate_requests_get_the_error_body_and_change_nothing(service, ana):
    with _http(service) as http, _http(service, "k-admin") as admin:
        nodes = http.get("/v1/banks/ana/tree").json()["nodes"]
        assert (
            "year"
            in _error(http.get("/v1/banks/ana/tree", params={"level": "year"}), 422, "level")["message"]
        )
        assert (
            "memories"
            in _error(http.get("/v1/banks/ana/tree", params={"level": "1"}), 422, "level")["message"]
        )
        _error(http.get("/v1/banks/ana/tree", params={"level": "6"}), 422, "level")
        _error(http.get("/v1/banks/ana/tree", params={"from": "yesterday"}), 422, "from")
        _error(http.get("/v1/banks/ana/tree", params={"from": "0001-01-01T00:00:00+01:00"}), 422, "from")
        _error(http.get("/v1/banks/ana/tree", params={"to": "9999-12-31T23:59:59-05:00"}), 422, "to")
        _error(http.get("/v1/banks/ana/tree", params={"from": "2024-05-10", "to": "2024-05-10"}), 422, "to")
        _error(http.get("/v1/banks/ana/tree", params={"from": "2024-05-10", "to": "2024-05-01"}), 422, "to")
        assert _error(admin.get("/v1/banks/nobody/tree"), 404)["code"] == "bank_not_found"
        assert _error(admin.post("/v1/banks/nobody/consolidate"), 404)["code"] == "bank_not_found"
        _error(http.post("/v1/banks/ana/consolidate", json={"consolidator": "magic"}), 422, "consolidator")
        _error(http.post("/v1/banks/ana/consolidate", json={"concolidator": "rules"}), 422, "concolidator")
        _error(
            http.post(
                "/v1/banks/ana/consolidate", content=b"{nope", headers={"content-type": "application/json"}
            ),
            400,
        )
        llm = _error(http.post("/v1/banks/ana/consolidate", json={"consolidator": "llm"}), 503)
        assert llm["code"] == "llm_not_configured"
        llm_async = _error(
            http.post("/v1/banks/ana/consolidate", json={"consolidator": "llm", "async": True}), 503
        )
        assert llm_async["code"] == "llm_not_configured"
        _error(http.post("/v1/banks/ana/recall", json={"query": "dog", "levels": [0]}), 422, "levels.0")
        _error(http.post("/v1/banks/ana/recall", json={"query": "dog", "levels": []}), 422, "levels")
        _error(http.post("/v1/banks/ana/recall", json={"query": "dog", "planner": "oracle"}), 422, "planner")
        assert http.get("/v1/banks/ana/tree").json()["nodes"] == nodes


def test_keys_reach_only_their_banks_trees(service, ana):
    with _http(service, "k-bob") as bob, httpx.Client(base_url=service["url"], timeout=60) as anon:
        assert _error(bob.get("/v1/banks/ana/tree"), 403)["code"] == "forbidden"
        assert _error(bob.post("/v1/banks/ana/consolidate"), 403)["code"] == "forbidden"
        # a foreign bank is refused whether or not it exists, before its body is read
        _error(bob.get("/v1/banks/nobody/tree"), 403)
        _error(
            bob.post(
                "/v1/banks/ana/consolidate", content=b"{nope", headers={"content-type": "application/json"}
            ),
            403,
        )
        _error(anon.get("/v1/banks/ana/tree"), 401)
        _error(anon.post("/v1/banks/ana/consolidate"), 401)


def test_recall_takes_levels_and_planner_and_answers_nodes_and_plan(service, ana):
    with _client(service) as sdk, _http(service) as http:
        tree = {n["id"]: n for n in sdk.tree("ana")}
        flat = http.post(
            "/v1/banks/ana/recall", json={"query": "Who looks after Pixel?", "planner": "off"}
        ).json()
        assert flat["nodes"] == [] and flat["plan"] is None and flat["memories"]
        climbed = sdk.recall("ana", "What did Ana do in May?", levels=[1, 2, 3, 4, 5], planner="rules")
    # the tree stage ran as asked; the memories its nodes quote may give way to the nodes
    assert (
        climbed["plan"]["plan"]["levels"] == [1, 2, 3, 4, 5] and climbed["plan"]["plan"]["planner"] == "rules"
    )
    assert climbed["nodes"]
    for hit in climbed["nodes"]:  # nodes of this bank's tree, shown as the tree route shows them
        node = hit["node"]
        assert "embedding" not in node and "signature" not in node
        assert node["id"] in tree and node["text"] == tree[node["id"]]["text"]
        assert {"score", "tokens", "rank"} <= set(hit)


def test_async_consolidate_answers_an_operation_that_completes_with_the_report(service):
    with _client(service, "k-ana") as sdk, _http(service) as http:
        sdk.put_bank("ana-async", name="Ana")
        sdk.retain("ana-async", TREE_ITEMS, document_id="chat")
        resp = http.post("/v1/banks/ana-async/consolidate", json={"async": True, "consolidator": "rules"})
        assert resp.status_code == 202, resp.text
        op = resp.json()
        assert resp.headers["location"] == f"/v1/banks/ana-async/operations/{op['operation_id']}"
        assert op["kind"] == "consolidate" and op["status"] in ("queued", "running", "succeeded")
        deadline = time.monotonic() + 300  # a bound on the wait, not an assertion on speed
        while op["status"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.5)
            op = sdk.operation("ana-async", op["operation_id"])
        assert op["status"] == "succeeded", op
        assert op["result"]["nodes"] == TREE_SHAPE and op["result"]["written"] == TREE_SHAPE
        assert len(sdk.tree("ana-async")) == sum(TREE_SHAPE.values())
        queued = sdk.consolidate("ana-async", wait=False)  # the SDK's async form
        assert queued["kind"] == "consolidate" and queued["bank_id"] == "ana-async"


def test_export_and_import_over_http_carry_the_tree(service, ana):
    with _client(service, "k-admin") as admin:
        text = admin.export_bank("ana")
        records = [json.loads(line) for line in text.splitlines()]
        assert records[0]["format"] == 2 and records[0]["counts"]["tree_nodes"] == sum(TREE_SHAPE.values())
        assert sum(r["kind"] == "tree_node" for r in records) == sum(TREE_SHAPE.values())
        report = admin.import_bank("ana-copy", text)
        assert report["tree_nodes"] == sum(TREE_SHAPE.values())

        def shape(bank):
            return [(n["level"], n["key"], n["start"], n["end"], n["text"]) for n in admin.tree(bank)]

        assert shape("ana-copy") == shape("ana")
