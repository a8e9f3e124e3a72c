"""One bank whichever path wrote it.

After a random sequence of writes over every path a user has (``memlane retain``, ``memlane
backfill`` with and without ``--consolidate``, ``memlane consolidate``, the REST API's retain,
sync and async, the Hindsight surface's retain, MCP's retain tool, LangGraph's ``put``),
re-retains of unchanged and of changed input and writes by other paths between two backfills
included, a bank's whole derived state (tests/derived_state.py: units with their facts, links,
vectors, chunks, entities, the tree) is that of a fresh bank fed the final input through one
path (the engine's ``retain_items``), consolidated if the bank was. Stronger on the way:

* a write of input the bank already holds leaves the bank exactly as it was (no memory
  rewritten, no tree node dropped), whatever wrote it before;
* a backfill skips a bank whose file it retained last time, unchanged, while the bank still
  holds that file's input (whatever else the bank received since), and retains it otherwise.

Each path is driven through its own surface, on one live ``memlane serve`` (the one-process
runtime, auth off) over one data directory: the CLI commands in this process (their engine on
the service's Milvus Lite server; the models shared with the fresh engine, so a command does
not load them again), REST and the Hindsight surface over HTTP, MCP with its client at /mcp,
LangGraph's ``MemlaneStore`` over the SDK. The service runs its background work inline
(``MEMLANE_BACKGROUND__MODE=sync``: the tree and fact pass after a write finish before the
write answers), so one step is over before the next starts; what a write leaves is the same in
either mode. The backfill's Ray Data pool runs in this process (tests/write_paths.py's
``jobs_here``: the job's own driver, ledger and worker classes, one row after another), and one
case runs on a local Ray. The paths' drivers are in tests/write_paths.py.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest
from derived_state import (
    differences,
    snapshot,
    tree_subset_differences,
    without_resolution,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from live import live_service
from write_paths import api, cli, cli_models, hindsight, jobs_here, jsonl_file, langgraph, mcp, rest

pytestmark = pytest.mark.slow

# A small history with a job change: two chat documents (three turns, one session each) a month
# apart, a one-turn note (MCP) and a LangGraph item. Version 1 of each is the changed input:
# the chats' edit a turn and add one, m1's and lg's change the text. (A version with as many
# turns as the one a backfill wrote is the last test's: the ledger does not see it.)
CHATS: dict[str, list[list[tuple[str, str, str]]]] = {
    "d1": [
        [
            (
                "Dana",
                "2025-01-06T19:00:00+00:00",
                "I work as a junior accountant at Fenwick & Hale in Bristol.",
            ),
            ("Assistant", "2025-01-06T19:01:00+00:00", "How long have you been there?"),
            ("Dana", "2025-01-06T19:02:00+00:00", "Two years now. I live in Bristol with my cat Miso."),
        ],
        [
            (
                "Dana",
                "2025-01-06T19:00:00+00:00",
                "I work as a junior accountant at Fenwick & Hale in Bristol.",
            ),
            ("Assistant", "2025-01-06T19:01:00+00:00", "How long have you been there?"),
            ("Dana", "2025-01-06T19:02:00+00:00", "Three years now. I live in Bath with my cat Miso."),
            ("Dana", "2025-01-06T19:03:00+00:00", "Month end close at Fenwick & Hale was brutal this week."),
        ],
    ],
    "d2": [
        [
            (
                "Dana",
                "2025-02-03T20:00:00+00:00",
                "Big news: I accepted an offer as a financial analyst at Northwind Energy.",
            ),
            ("Assistant", "2025-02-03T20:01:00+00:00", "Congratulations! When do you start?"),
            ("Dana", "2025-02-03T20:02:00+00:00", "I start on 1 March, so I am leaving Fenwick & Hale."),
        ],
        [
            (
                "Dana",
                "2025-02-03T20:00:00+00:00",
                "Big news: I accepted an offer as a financial analyst at Northwind Energy.",
            ),
            ("Assistant", "2025-02-03T20:01:00+00:00", "Congratulations! When do you start?"),
            (
                "Dana",
                "2025-02-03T20:02:00+00:00",
                "I am moving to Leeds next week because Northwind Energy is based there.",
            ),
            ("Dana", "2025-02-03T20:03:00+00:00", "I start on 1 March."),
        ],
        [  # as many turns as version 0, one edited: the last test's
            (
                "Dana",
                "2025-02-03T20:00:00+00:00",
                "Big news: I accepted an offer as a financial analyst at Northwind Energy.",
            ),
            ("Assistant", "2025-02-03T20:01:00+00:00", "Congratulations! When do you start?"),
            (
                "Dana",
                "2025-02-03T20:02:00+00:00",
                "I am moving to Leeds next week because Northwind Energy is based there.",
            ),
        ],
    ],
    "m1": [
        [
            (
                "Dana",
                "2025-03-04T19:00:00+00:00",
                "I moved to Leeds last weekend and the new flat is near Roundhay Park.",
            )
        ],
        [("Dana", "2025-03-04T19:00:00+00:00", "I moved to Leeds last weekend; my manager is Priya Shah.")],
    ],
}
NOTES = [{"note": "Dana climbs at The Depot on Tuesdays"}, {"note": "Dana climbs at The Depot on Fridays"}]
LG_NAMESPACE = "notes"  # the item's namespace is (bank, "notes"), its key "climbing"
LG_KEY = "climbing"

FILE_PATHS = ("cli", "backfill", "backfill_c")  # a JSON Lines file of one or both chats
HTTP_PATHS = ("rest", "rest_async", "hindsight")
# paths after which the bank is consolidated: the service's own writes (background.tree is on
# in `memlane serve`), the backfill's --consolidate
CONSOLIDATING = {*HTTP_PATHS, "mcp", "langgraph", "backfill_c", "backfill_c_ray"}


# ------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("write-paths")
    with live_service(root, env={"MEMLANE_BACKGROUND__MODE": "sync"}, runtime="process") as state:
        yield {**state, "data": root / "data", "tmp": root}


@pytest.fixture(scope="module")
def engines(service, tmp_path_factory):
    """(the fresh engine, a reader over the service's store): the fresh one on its own Milvus
    Lite directory, both with the default settings' models (what the service loads)."""
    from cluster.route import store_settings
    from memlane.engine import Memory
    from memlane.settings import Settings

    with Memory(Settings(data_dir=tmp_path_factory.mktemp("fresh"))) as fresh:
        with Memory(
            store_settings(service["data"]), embedder=fresh.embedder, extractor=fresh.extractor
        ) as reader:
            yield fresh, reader


# ------------------------------------------------------------------------------- the input
def _items(doc: str, version: int) -> list[dict[str, Any]]:
    """A chat's version as retain items (the fresh bank's input): one session, the document's."""
    return [
        {"content": text, "speaker": who, "session_id": doc, "document_id": doc, "timestamp": at, "tags": []}
        for who, at, text in CHATS[doc][version]
    ]


# ------------------------------------------------------------------------------- the model
class Bank:
    """A bank under test and what it must hold: the final input per document, whether it was
    consolidated, whether its input changed since by a path that leaves the tree for
    `memlane consolidate` (``dirty``), and its last backfill's file as the ledger keeps it."""

    def __init__(self, bank_id: str) -> None:
        self.id = bank_id
        self.current: dict[str, list[dict[str, Any]]] = {}
        self.consolidated = False
        self.dirty = False
        self.backfilled: tuple[str, dict[str, list[dict[str, Any]]]] | None = None


_banks = itertools.count()


def _write(service, engines, bank: Bank, doc: str, version: int, path: str) -> None:
    fresh, reader = engines
    if doc == "lg":
        new = None  # its time is known after the put
    elif doc == "both":
        new = {d: _items(d, version) for d in ("d1", "d2")}
    else:
        new = {doc: _items(doc, version)}
    unchanged = new is not None and all(bank.current.get(d) == items for d, items in new.items())
    # a write of what the bank holds must leave it as it is: compared when the bank is not
    # waiting for a consolidation the write would run
    compare = unchanged and not bank.dirty and (bank.consolidated or path not in CONSOLIDATING)
    before = snapshot(reader, bank.id) if compare else None

    if path in ("cli", "backfill", "backfill_c", "backfill_c_ray"):
        assert new is not None
        text = jsonl_file(service["tmp"] / f"{bank.id}.jsonl", bank.id, new).read_text()
        if path == "cli":
            with cli_models(fresh):
                cli(
                    "retain",
                    str(service["tmp"] / f"{bank.id}.jsonl"),
                    "--bank",
                    bank.id,
                    "--data-dir",
                    str(service["data"]),
                )
        else:
            # skipped: the same file as the bank's last backfill, whose input the bank holds still
            skip = bank.backfilled is not None and bank.backfilled[0] == text
            skip = skip and all(bank.current.get(d) == items for d, items in bank.backfilled[1].items())
            args = ["backfill", str(service["tmp"] / f"{bank.id}.jsonl"), "--workers", "1"]
            args += ["--data-dir", str(service["data"])]
            if path != "backfill":
                args.append("--consolidate")
            with contextlib.nullcontext() if path == "backfill_c_ray" else jobs_here(fresh):
                summary = cli(*args)
            assert (summary["banks"], summary["failed_banks"]) == (1, 0), summary
            assert summary["skipped_banks"] == int(skip), (summary, "skipped" if skip else "retained")
            if not skip:
                bank.backfilled = (text, new)
    elif path in ("rest", "rest_async"):
        (items,) = new.values()
        rest(service, bank.id, items, wait=path == "rest")
    elif path == "hindsight":
        ((d, items),) = new.items()
        hindsight(service, bank.id, d, items)
    elif path == "mcp":
        (items,) = new.values()
        mcp(service, bank.id, items[0])
    else:  # langgraph: a put of the same value is still a new turn (the put's time)
        items = langgraph(service, reader, bank.id, LG_NAMESPACE, LG_KEY, NOTES[version])
        new = {items[0]["document_id"]: items}

    bank.current.update(new)
    if path in CONSOLIDATING:
        bank.consolidated, bank.dirty = True, False
    elif not unchanged and bank.consolidated:
        bank.dirty = True
    if before is not None:
        assert differences(snapshot(reader, bank.id), before) == [], (
            "unchanged input rewrote the bank",
            path,
        )


def _consolidate(service, bank: Bank) -> None:
    out = cli("consolidate", "--bank", bank.id, "--data-dir", str(service["data"]))
    assert out["failed_banks"] == 0, out
    if bank.current:
        bank.consolidated, bank.dirty = True, False


# ------------------------------------------------------------------------------- the property
chat = st.sampled_from(["d1", "d2"])
version = st.integers(0, 1)
op = st.one_of(
    st.tuples(st.just("write"), chat, version, st.sampled_from([*FILE_PATHS, *HTTP_PATHS])),
    st.tuples(st.just("write"), st.just("both"), version, st.sampled_from(FILE_PATHS)),
    st.tuples(st.just("write"), st.just("m1"), version, st.just("mcp")),
    st.tuples(st.just("write"), st.just("lg"), version, st.just("langgraph")),
    st.tuples(st.just("consolidate")),
)


@settings(
    max_examples=5,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(op, min_size=2, max_size=4))
# the reported case, on Ray: a file backfilled and consolidated, then retained again with
# `memlane retain --bank`
@example(ops=[("write", "both", 0, "backfill_c_ray"), ("write", "both", 0, "cli")])
# the same in this process, then the same file backfilled again after another path's write
@example(
    ops=[
        ("write", "both", 0, "backfill_c"),
        ("write", "d2", 0, "cli"),
        ("write", "m1", 0, "mcp"),
        ("write", "both", 0, "backfill"),
    ]
)
# another path rewrites the backfilled chat (as many turns): the next backfill retains it again
@example(ops=[("write", "d2", 0, "backfill"), ("write", "d2", 1, "rest"), ("write", "d2", 0, "backfill")])
# consolidated, then changed by the paths that leave the tree for `memlane consolidate`
@example(
    ops=[
        ("write", "d1", 0, "backfill"),
        ("consolidate",),
        ("write", "d1", 1, "backfill"),
        ("write", "d2", 1, "cli"),
    ]
)
# every service path, a changed version, then the unchanged file through the CLI
@example(
    ops=[
        ("write", "d1", 0, "hindsight"),
        ("write", "d2", 1, "rest_async"),
        ("write", "lg", 0, "langgraph"),
        ("write", "d2", 0, "rest"),
        ("write", "both", 0, "cli"),
    ]
)
def test_a_bank_is_the_same_whichever_paths_wrote_it(service, engines, ops):
    fresh, reader = engines
    bank = Bank(f"w{next(_banks)}")
    with api(service) as http:
        assert http.put(f"/v1/banks/{bank.id}", json={}).status_code == 201
    fresh.create_bank(bank.id)
    try:
        for step in ops:
            if step[0] == "consolidate":
                _consolidate(service, bank)
            else:
                _write(service, engines, bank, *step[1:])

        for doc in sorted(bank.current, reverse=True):
            fresh.retain_items(bank.id, bank.current[doc])
        if bank.consolidated:
            fresh.consolidate(bank.id)
        got, want = snapshot(reader, bank.id), snapshot(fresh, bank.id)
        assert reader.banks.doctor(bank.id).findings == []
        if not bank.dirty:
            assert differences(got, want) == [], ops
            return
        # changed since its consolidation by a path that leaves the tree for `memlane
        # consolidate`: the rest is exact, the tree holds nothing outdated, and `memlane
        # consolidate` brings the bank to the fresh one
        parts = ("units", "chunks", "entities")
        assert differences(without_resolution(got), without_resolution(want), parts) == [], ops
        assert tree_subset_differences(got, want) == [], ops
        _consolidate(service, bank)
        assert differences(snapshot(reader, bank.id), want) == [], (ops, "consolidated")
    finally:
        with api(service) as http:
            http.delete(f"/v1/banks/{bank.id}")
        fresh.banks.delete(bank.id)


def test_a_memorys_entities_are_in_the_same_order_whatever_was_retained_before(engines):
    fresh, _ = engines
    first = {"content": "I work at Fenwick & Hale.", "speaker": "Dana", "document_id": "a"}
    second = {"content": "Dana climbs at The Depot on Tuesdays", "speaker": "Assistant", "document_id": "b"}
    order = {}
    for bank, items in (("order-ab", [first, second]), ("order-ba", [second, first])):
        fresh.create_bank(bank)
        try:
            for at, item in zip(("2025-01-06T19:00:00+00:00", "2025-01-07T19:00:00+00:00"), items):
                fresh.retain_items(bank, [{**item, "timestamp": at}])
            names = {e.entity_id: e.name for e in fresh.store.list_entities(bank)}
            (unit,) = [u for page in fresh.store.iter_units(bank) for u in page if u.document_id == "b"]
            order[bank] = [names[e] for e in unit.entity_ids]
        finally:
            fresh.banks.delete(bank)
    assert sorted(order["order-ab"]) == ["Assistant", "Dana", "The Depot"]
    assert order["order-ab"] == order["order-ba"]


def test_a_backfill_retains_its_file_again_after_another_path_rewrote_one_of_its_documents(service, engines):
    fresh, reader = engines
    bank = Bank("rewritten")
    with api(service) as http:
        assert http.put(f"/v1/banks/{bank.id}", json={}).status_code == 201
    try:
        _write(service, engines, bank, "d2", 0, "backfill")
        _write(service, engines, bank, "d2", 2, "rest")  # one turn edited
        _write(service, engines, bank, "d2", 0, "backfill")  # asserts it was not skipped
        said = sorted(u.text for page in reader.store.iter_units(bank.id) for u in page)
        assert said == sorted(f"{it['speaker']}: {it['content']}" for it in _items("d2", 0))
    finally:
        with api(service) as http:
            http.delete(f"/v1/banks/{bank.id}")
