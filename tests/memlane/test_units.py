"""One table of cases for the unit rules of memlane/units.py, run against every implementation:
the Milvus expression (on real Milvus Lite), the in-process numpy mask (BankIndex) and the
Python check on hit fields; and one table of occurrence intervals run against both time
searches. Expected values are written out by hand from the rule, never computed by the code
under test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlane.interfaces import UnitFilter
from memlane.recall.index import BankIndex
from memlane.records import FactType, MemoryUnit
from memlane.settings import Settings
from memlane.stores.milvus import MilvusStore
from memlane.units import (
    FilterError,
    check_filter,
    effective_interval,
    fields_interval,
    matches,
    milvus_expr,
    occurrence,
    unit_fields,
    unit_from_fields,
)
from tests.conftest import _purge_prefix, server_prefix

DIM = 8
# the server prefix it shares with the other modules of 8-dim stores (tests/conftest.py)
SERVER_COLLECTIONS = "dim-8"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def unit(bank: str, uid: str, seed: int, **kw) -> MemoryUnit:
    v = np.random.default_rng(seed).normal(size=DIM)
    kw.setdefault("mentioned_at", day(0))
    return MemoryUnit(
        id=uid, bank_id=bank, text=f"memory {uid}", embedding=(v / np.linalg.norm(v)).tolist(), **kw
    )


# A bank covering each rule: types, tags, documents, invalidation, validity after the mention,
# and each shape of occurrence (end-only as the LLM extractor writes it, start-only, open, both).
FILTER_BANK = [
    unit("f", "w", 1, fact_type="world", tags=["x"], document_id="d1", entity_ids=["ent-a"]),
    unit(
        "f",
        "o",
        2,
        fact_type="opinion",
        tags=["x", "y"],
        document_id="d2",
        mentioned_at=day(1),
        invalid_at=day(9),
        superseded_by="n",
    ),
    unit(
        "f",
        "n",
        3,
        fact_type="opinion",
        tags=["y"],
        document_id="d2",
        mentioned_at=day(9),
        valid_from=day(9),
        entity_ids=["ent-a", "ent-b"],
    ),
    unit(
        "f",
        "e",
        4,
        fact_type="experience",
        document_id="d1",
        mentioned_at=day(2),
        valid_from=day(4),
        entity_ids=["ent-b"],
    ),
    unit("f", "end", 5, tags=["z"], document_id="d3", occurred_end=day(20), mentioned_at=day(25)),
    unit("f", "start", 6, document_id="d3", occurred_start=day(15), mentioned_at=day(25)),
    unit("f", "open", 7, document_id="d3", mentioned_at=day(12)),
    unit(
        "f", "both", 8, document_id="d3", occurred_start=day(10), occurred_end=day(14), mentioned_at=day(30)
    ),
]
ALL = {u.id for u in FILTER_BANK}

FILTER_CASES = [
    ("no filter", None, ALL),
    ("default hides invalidated", UnitFilter(), ALL - {"o"}),
    ("only_valid off", UnitFilter(only_valid=False), ALL),
    ("one type", UnitFilter(fact_types=[FactType.opinion]), {"n"}),
    ("one type, invalidated too", UnitFilter(fact_types=[FactType.opinion], only_valid=False), {"o", "n"}),
    (
        "two types",
        UnitFilter(fact_types=[FactType.world, FactType.experience]),
        {"w", "e", "end", "start", "open", "both"},
    ),
    ("empty types: any", UnitFilter(fact_types=[]), ALL - {"o"}),
    ("tags any", UnitFilter(tags=["x", "y"], only_valid=False), {"w", "o", "n"}),
    ("tags all", UnitFilter(tags=["x", "y"], tags_match="all", only_valid=False), {"o"}),
    ("one tag all", UnitFilter(tags=["y"], tags_match="all"), {"n"}),
    ("tag of an end-only unit", UnitFilter(tags=["z"]), {"end"}),
    # Hindsight's modes: its "any"/"all" take untagged units too, "exact" compares the sets.
    # Untagged here: e, start, open, both (o is invalidated, shown with only_valid off).
    (
        "tags any or untagged",
        UnitFilter(tags=["y"], tags_match="any_or_untagged"),
        {"n", "e", "start", "open", "both"},
    ),
    (
        "tags all or untagged",
        UnitFilter(tags=["x", "y"], tags_match="all_or_untagged", only_valid=False),
        {"o", "e", "start", "open", "both"},
    ),
    ("tags exact", UnitFilter(tags=["x"], tags_match="exact"), {"w"}),
    ("tags exact, a set", UnitFilter(tags=["y", "x", "y"], tags_match="exact", only_valid=False), {"o"}),
    ("tags exact, none: untagged", UnitFilter(tags_match="exact"), {"e", "start", "open", "both"}),
    ("tags exact, empty: untagged", UnitFilter(tags=[], tags_match="exact"), {"e", "start", "open", "both"}),
    ("no tags, any or untagged: any", UnitFilter(tags=[], tags_match="any_or_untagged"), ALL - {"o"}),
    ("document", UnitFilter(document_id="d1"), {"w", "e"}),
    ("document, invalidated too", UnitFilter(document_id="d2", only_valid=False), {"o", "n"}),
    ("empty document: any", UnitFilter(document_id=""), ALL - {"o"}),
    ("as_of between mentions", UnitFilter(as_of=day(5)), {"w", "o", "e"}),
    ("as_of before valid_from", UnitFilter(as_of=day(3)), {"w", "o"}),
    ("as_of at invalidation (exclusive)", UnitFilter(as_of=day(9)), {"w", "n", "e"}),
    ("as_of before most mentions", UnitFilter(as_of=day(0.5)), {"w"}),
    ("as_of after every mention", UnitFilter(as_of=day(100)), ALL - {"o"}),
    ("as_of before an end-only unit's mention", UnitFilter(as_of=day(24)), {"w", "n", "e", "open"}),
    ("as_of ignores only_valid", UnitFilter(as_of=day(5), only_valid=False), {"w", "o", "e"}),
    ("as_of and type", UnitFilter(as_of=day(5), fact_types=[FactType.opinion]), {"o"}),
    ("mention window", UnitFilter(mentioned_since=day(1), mentioned_until=day(12)), {"n", "e"}),
    (
        "mention window, invalidated too",
        UnitFilter(mentioned_since=day(1), mentioned_until=day(12), only_valid=False),
        {"o", "n", "e"},
    ),
    ("mention window: since only", UnitFilter(mentioned_since=day(25)), {"end", "start", "both"}),
    ("mention window: until is exclusive", UnitFilter(mentioned_until=day(2), only_valid=False), {"w", "o"}),
    ("mention window and as_of", UnitFilter(mentioned_since=day(1), as_of=day(5)), {"o", "e"}),
    ("entity", UnitFilter(entity_id="ent-a"), {"w", "n"}),
    ("entity and type", UnitFilter(entity_id="ent-b", fact_types=[FactType.experience]), {"e"}),
    ("unknown entity", UnitFilter(entity_id="ent-zz"), set()),
    ("empty entity: any", UnitFilter(entity_id=""), ALL - {"o"}),
]

# (name, occurred_start, occurred_end, mentioned_at, expected interval); days.
INTERVAL_CASES = [
    ("both", 10, 14, 30, (10, 14)),
    ("both, reversed", 14, 10, 30, (10, 14)),
    ("start only", 15, None, 25, (15, 15)),
    ("end only, mentioned after (LLM: 'finished by ...')", None, 20, 25, (20, 20)),
    ("end only, mentioned before (a plan)", None, 20, 5, (20, 20)),
    ("open", None, None, 12, (12, 12)),
]

# (query start, query end, ids found) over a bank of the INTERVAL_CASES units.
TIME_QUERIES = [
    (
        19.5,
        20.5,
        {"end only, mentioned after (LLM: 'finished by ...')", "end only, mentioned before (a plan)"},
    ),
    (21, 26, set()),  # an end-only unit does not stretch to its mention
    (6, 9, set()),  # nor back to an earlier mention (the plan)
    (15, 15, {"start only"}),
    (11, 13, {"both", "both, reversed", "open"}),
    (14, 14, {"both", "both, reversed"}),
    (26, 40, set()),  # the mention does not stand in when an occurrence time is set
]


@pytest.fixture(scope="module", params=["lite", "server"])
def milvus(request, tmp_path_factory):
    """The table's banks in Milvus Lite, then on the local Milvus server (tests/conftest.py)."""
    store_settings: dict = {}
    if request.param == "server":
        store_settings = {
            "milvus_uri": request.getfixturevalue("milvus_server_uri"),
            "collection_prefix": server_prefix(SERVER_COLLECTIONS),
        }
    settings = Settings(data_dir=tmp_path_factory.mktemp("units") / "data", store=store_settings)
    store = MilvusStore(settings, dim=DIM)
    store.upsert_units("f", FILTER_BANK)
    store.upsert_units("t", interval_bank())
    yield store
    for bank in ("f", "t"):
        store.delete_bank(bank)
    store.close()
    if request.param == "server":
        _purge_prefix(store_settings["milvus_uri"], store_settings["collection_prefix"])


def interval_bank() -> list[MemoryUnit]:
    out = []
    for i, (name, s, e, m, _) in enumerate(INTERVAL_CASES):
        out.append(
            unit(
                "t",
                name,
                100 + i,
                mentioned_at=day(m),
                occurred_start=None if s is None else day(s),
                occurred_end=None if e is None else day(e),
            )
        )
    return out


def _index(units: list[MemoryUnit]) -> BankIndex:
    index = BankIndex(DIM)
    index.upsert(units)
    return index


FILTER_IMPLEMENTATIONS = {
    "python": lambda milvus, flt: {u.id for u in FILTER_BANK if matches(unit_fields(u), flt)},
    # The in-process mask both ways: at the rows asked for (candidates) and over every row (a
    # search whose limit takes every passing row).
    "numpy": lambda milvus, flt: set(_index(FILTER_BANK).candidates(sorted(ALL), flt)),
    "numpy-rows": lambda milvus, flt: {
        h.id for h in _index(FILTER_BANK).search_dense(np.ones(DIM, dtype=np.float32), len(ALL), flt)
    },
    "milvus": lambda milvus, flt: set(milvus.list_unit_ids("f", flt)),
}


@pytest.mark.parametrize("impl", sorted(FILTER_IMPLEMENTATIONS))
@pytest.mark.parametrize("name, flt, expected", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_filter_table(milvus, impl, name, flt, expected):
    assert FILTER_IMPLEMENTATIONS[impl](milvus, flt) == expected


@pytest.mark.parametrize("impl", sorted(FILTER_IMPLEMENTATIONS))
def test_bad_tags_match_is_refused_everywhere(milvus, impl):
    with pytest.raises(ValueError, match="tags_match"):
        FILTER_IMPLEMENTATIONS[impl](milvus, UnitFilter(tags=["x"], tags_match="some"))


@pytest.mark.parametrize("impl", sorted(FILTER_IMPLEMENTATIONS))
def test_empty_mention_window_is_refused_everywhere(milvus, impl):
    with pytest.raises(ValueError, match="mentioned_since must be before mentioned_until"):
        FILTER_IMPLEMENTATIONS[impl](milvus, UnitFilter(mentioned_since=day(3), mentioned_until=day(3)))


def test_milvus_expression_text():
    assert milvus_expr(None) == ""
    assert milvus_expr(UnitFilter(only_valid=False)) == ""
    assert milvus_expr(
        UnitFilter(fact_types=[FactType.world], tags=["a"], tags_match="all", only_valid=False)
    ) == ('(fact_type in ["world"]) and (array_contains_all(tags, ["a"]))')


@pytest.mark.parametrize("name, s, e, m, expected", INTERVAL_CASES, ids=[c[0] for c in INTERVAL_CASES])
def test_occurrence_interval_forms_agree(name, s, e, m, expected):
    u = [x for x in interval_bank() if x.id == name][0]
    assert effective_interval(u) == (day(expected[0]), day(expected[1]))
    secs = tuple(day(x).timestamp() for x in expected)
    assert fields_interval(unit_fields(u)) == secs
    assert occurrence(s, e, m) == expected


@pytest.mark.parametrize("q0, q1, expected", TIME_QUERIES)
def test_time_search_table_in_process_and_milvus(milvus, q0, q1, expected):
    index = _index(interval_bank())
    in_process = {h.id for h in index.search_time(day(q0).timestamp(), day(q1).timestamp(), 50)}
    on_milvus = {h.id for h in milvus.search_time("t", day(q0), day(q1), 50)}
    assert in_process == expected
    assert on_milvus == expected


def test_fields_round_trip_and_candidates_match_the_store(milvus):
    index = _index(FILTER_BANK)
    ids = sorted(ALL)
    from_index = index.candidates(ids, None)
    from_store = milvus.candidates("f", ids, None)
    assert from_index == from_store  # the same scoring fields from either backend
    for u in FILTER_BANK:
        assert unit_from_fields("f", u.id, from_index[u.id]) == u.model_copy(update={"embedding": None})


def test_a_refused_filter_names_its_field():
    now = datetime(2024, 1, 1, tzinfo=UTC)
    with pytest.raises(FilterError, match="tags_match must be") as bad_match:
        check_filter(UnitFilter(tags=["a"], tags_match="some"))
    assert bad_match.value.field == "tags_match"
    with pytest.raises(FilterError, match="tags_match must be"):  # refused without tags too
        check_filter(UnitFilter(tags_match="some"))
    with pytest.raises(FilterError, match="mentioned_since must be before") as bad_window:
        check_filter(UnitFilter(mentioned_since=now, mentioned_until=now - timedelta(days=1)))
    assert bad_window.value.field == "mentioned_until"
