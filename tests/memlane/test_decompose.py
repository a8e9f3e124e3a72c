"""Multi-hop decomposition (memlane/recall/decompose.py): the rules, the LLM decomposer against
the fake OpenAI-compatible server (malformed replies fall back to the rules), the fusion weights,
and recall on a real bank (Milvus Lite in a temp dir) where the second fact of a join is
recalled only with decomposition."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from llm_fake import FakeLLMServer

from memlane.engine import Memory
from memlane.errors import InvalidInput
from memlane.interfaces import Hit
from memlane.llm import build_llm
from memlane.recall.decompose import (
    SUBQUERY_WEIGHT,
    bridge,
    decompose,
    decompose_llm,
    decompose_rules,
    merge_channels,
)
from memlane.records import Turn
from memlane.settings import Settings

JOIN = "the city where the person Nora met in Lisbon lives"


# ------------------------------------------------------------------------------------ rules
@pytest.mark.parametrize(
    "query, subqueries, reason",
    [
        (
            "the city where the person she met in Lisbon lives",
            ["the person she met in Lisbon", "the city where the person lives"],
            "relative clause",
        ),
        (
            "Which city does the person she met in Lisbon live in?",
            ["the person she met in Lisbon", "Which city does the person live in?"],
            "relative clause",
        ),
        (
            "What did the woman who gave John the book study in Paris?",
            ["the woman who gave John the book", "What did the woman study in Paris?"],
            "relative clause",
        ),
        (
            "Who did Evan meet on his trip to Canada, and who did he come back from Canada with?",
            ["Who did Evan meet on his trip to Canada", "who did Evan come back from Canada with?"],
            "clauses joined by a conjunction",
        ),
        (
            "Where does Priya work? And what car does she drive?",
            ["Where does Priya work", "And what car does Priya drive?"],
            "clauses joined by a conjunction",
        ),
        (
            "What do Jon and Gina both have in common?",
            ["What do Jon have in common?", "What do Gina have in common?"],
            "coordinated names",
        ),
        (
            "Which hobbies do Anna, Ben and Carla share?",
            ["Which hobbies do Anna share?", "Which hobbies do Ben share?", "Which hobbies do Carla share?"],
            "coordinated names",
        ),
    ],
)
def test_rules_split_joins(query, subqueries, reason):
    out = decompose_rules(query)
    assert out.subqueries == subqueries
    assert out.decomposer == "rules" and out.reasons == [reason]


@pytest.mark.parametrize(
    "query",
    [
        "Where does Priya work?",
        "What is Caroline's identity?",
        "What activities has Melanie done with her family?",
        "How many times has Melanie gone to the beach in 2023?",
        "What did Evan offer to share with Sam after talking about healthy snacks?",
        "How did Calvin meet Frank Ocean?",
        "When did Melanie paint a sunrise?",
        "Salt and pepper: which does Tom prefer?",  # capitalised first word, not two names
        "Who is the woman who gave her the book?",  # the rest ("Who is the woman?") says nothing
    ],
)
def test_rules_leave_single_facts_whole(query):
    out = decompose_rules(query)
    assert out.subqueries == [] and out.reasons == ["one fact"]


def test_relative_clause_bridges_and_bridge_puts_in_the_new_name():
    out = decompose_rules("Which city does the person she met in Lisbon live in?")
    assert out.bridges == {1: (0, "the person")}
    texts = [
        "Nora: Lisbon was sunny in May.",  # no new name: the next unit is used
        "Nora: I met Marco in Lisbon at the design conference.",
        "Sam: Felix lives in Vienna.",  # a later unit: someone else
    ]
    q = bridge(
        out.subqueries[1], "the person", texts, "Which city does the person she met in Lisbon live in?"
    )
    assert q == "Which city does Marco live in?"
    # no unit names anyone new: unchanged
    assert bridge("the city where the person lives", "the person", ["Nora: Lisbon!"], JOIN) == (
        "the city where the person lives"
    )


def test_off_by_default():
    # the rules did not move LoCoMo multi-hop recall (memlane/settings/ has the figures)
    assert Settings().recall.decompose == "off"


def test_off_and_modes_without_an_llm():
    calls = []

    def llm():
        calls.append(1)
        return None

    assert decompose(JOIN, "off", llm).subqueries == []
    assert calls == []  # off never builds the model
    auto = decompose(JOIN, "auto", llm)
    assert auto.decomposer == "rules" and len(auto.subqueries) == 2
    forced = decompose(JOIN, "llm", llm)
    assert forced.decomposer == "rules" and "no LLM configured" in forced.reasons[-1]
    assert decompose(JOIN, "rules", llm).subqueries == auto.subqueries and len(calls) == 2


def test_merge_channels_weights_subqueries_below_the_question():
    main = {"lexical": [Hit(id="a", score=2.0)], "semantic": [Hit(id="b", score=0.5)]}
    subs = [{"lexical": [Hit(id="c", score=1.0)]}, {"semantic": [Hit(id="d", score=0.4)]}]
    weights = {"lexical": 1.0, "semantic": 0.2}
    hits, w = merge_channels(main, subs, weights)
    assert list(hits) == ["lexical", "semantic", "lexical@1", "semantic@2"]
    assert w == {
        "lexical": 1.0,
        "semantic": 0.2,
        "lexical@1": SUBQUERY_WEIGHT,
        "semantic@2": pytest.approx(0.2 * SUBQUERY_WEIGHT),
    }
    assert [h.id for h in hits["lexical@1"]] == ["c"]
    assert merge_channels(main, [], weights) == ({k: list(v) for k, v in main.items()}, weights)


# -------------------------------------------------------------------------------------- LLM
def _llm(server):
    s = Settings(llm={"consolidation": {"base_url": server.base_url, "model": "fake"}, "max_retries": 0})
    return build_llm(s, "consolidation")


def test_llm_decomposes_with_bridges():
    with FakeLLMServer() as server:
        server.script = [
            json.dumps({"subqueries": ["the person Nora met in Lisbon", "the city where #1 lives"]})
        ]
        out = decompose_llm(_llm(server), JOIN)
        prompt = server.requests[0]["messages"]
    assert out.decomposer == "llm"
    assert out.subqueries == ["the person Nora met in Lisbon", "the city where #1 lives"]
    assert out.bridges == {1: (0, "#1")}
    assert prompt[-1]["content"] == JOIN
    assert (
        bridge(out.subqueries[1], "#1", ["Nora: I met Marco in Lisbon."], JOIN)
        == "the city where Marco lives"
    )


def test_llm_one_fact_is_not_split():
    with FakeLLMServer() as server:
        server.script = [json.dumps({"subqueries": []})]
        out = decompose_llm(_llm(server), "Where does Priya work?")
    assert out.subqueries == [] and out.decomposer == "llm"


@pytest.mark.parametrize(
    "replies",
    [
        ["not json at all", "still not json"],
        [json.dumps({"subqueries": "one string"}), json.dumps({"queries": 3})],
        [json.dumps({"subqueries": ["only one"]}), json.dumps({"subqueries": ["", "x"]})],
        [{"status": 500}],
    ],
)
def test_llm_failure_falls_back_to_rules(replies):
    with FakeLLMServer() as server:
        server.script = list(replies)
        out = decompose_llm(_llm(server), JOIN)
        asked = len(server.requests)
    assert asked == len(replies)  # one repair round for a rejected reply, none for a 500
    assert out.decomposer == "rules"
    assert out.subqueries == decompose_rules(JOIN).subqueries
    assert out.reasons[-1].startswith("llm failed: LLM")


# ----------------------------------------------------------------------------------- engine
T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
# One conversation per turn, a day apart: each unit's lexical context is its own turn.
SAID = [
    ("Nora", "I met Marco in Lisbon at the design conference last spring."),  # fact 1
    ("Sam", "That sounds like a great trip, did you like the talks?"),
    ("Nora", "Marco has a small flat in Porto, right by the river."),  # fact 2: no word of the question
    ("Sam", "My cousin Ines lives in Madrid and works at a bank."),
    ("Nora", "Tom lives in Berlin with his two dogs."),
    ("Sam", "Paula lives in Lyon since she finished school."),
    ("Nora", "The city I love most is Rome, for the food."),
    ("Sam", "Which city would you live in if you could pick any?"),
    ("Nora", "Probably a city by the sea, somewhere warm."),
    ("Sam", "Greta lives in Oslo and hates the winter there."),
    ("Nora", "Felix lives in Vienna and plays the cello."),
    ("Sam", "I met a person at the gym who lives in my street."),
    ("Nora", "Lisbon was sunny and the custard tarts were amazing."),
    ("Sam", "The person at the hotel desk in Lisbon was very kind."),
    ("Nora", "I met my sister at the airport when I came back."),
    ("Sam", "We should plan a trip to a new city next year."),
    ("Nora", "Living in a big city is tiring sometimes."),
    ("Sam", "She met her old teacher at the market yesterday."),
    ("Nora", "The river in my city floods every winter."),
    ("Sam", "I bought a new bike for riding around the city."),
]
MET, FLAT = "t0", "t2"


def _conversations():
    return [
        (
            f"d{i}",
            [
                Turn(
                    document_id=f"d{i}",
                    session_id="s1",
                    turn_id=f"t{i}",
                    index=0,
                    speaker=who,
                    text=text,
                    timestamp=T0 + timedelta(days=i),
                )
            ],
        )
        for i, (who, text) in enumerate(SAID)
    ]


def _top(result, k=10):
    return [m.unit.source_turns[0] for m in result.memories[:k]]


def test_engine_join_recalls_the_second_fact_only_with_decomposition(tmp_path, embedder, extractor):
    with FakeLLMServer() as server:
        server.responder = lambda body: json.dumps(
            {"subqueries": ["the person Nora met in Lisbon", "the city where #1 lives"]}
        )
        s = Settings(
            data_dir=tmp_path / "data",
            llm={"consolidation": {"base_url": server.base_url, "model": "fake"}},
            background={"reflect": False},
            # the fused order: what the sub-queries add to it (the learned ranker reorders a
            # pool of half this small bank, and may bring the flat's turn into the top 10 alone)
            recall={"decompose": "auto", "ranker": "fused"},
        )
        with Memory(s, embedder=embedder, extractor=extractor) as m:
            m.retain("nora", _conversations())
            plain = m.recall("nora", JOIN, decompose="off")
            rules = m.recall("nora", JOIN, decompose="rules", trace=True)
            llm = m.recall("nora", JOIN, decompose="llm")
            auto = m.recall("nora", JOIN)  # the setting, "auto": the LLM is configured
            with pytest.raises(InvalidInput):
                m.recall("nora", JOIN, decompose="sometimes")
        asked = len(server.requests)
    assert plain.subqueries == []
    assert MET in _top(plain) and FLAT not in _top(plain)
    # the bridged sub-query carries the name the first one found
    assert rules.subqueries == ["the person Nora met in Lisbon", "the city where Marco lives"]
    assert (
        llm.subqueries == auto.subqueries == ["the person Nora met in Lisbon", "the city where Marco lives"]
    )
    assert asked == 2  # llm and auto; rules and off never ask
    for result in (rules, llm):
        assert MET in _top(result) and FLAT in _top(result)
    # the trace shows each sub-query's channels beside the question's
    flat = next(m for m in rules.memories if m.unit.source_turns[0] == FLAT)
    assert {"lexical", "lexical@2", "semantic@2"} <= set(flat.trace["channels"])
    assert "decompose" in rules.timings_ms and "subqueries" in rules.timings_ms
    assert "subqueries" not in plain.timings_ms


def test_eval_system_nodecomp_is_recall_without_decomposition():
    from evals.systems import ALLOWED, channels_of, parse_systems

    assert parse_systems("NoDecomp, bm25") == ["memlane", "nodecomp", "bm25"]
    assert channels_of("nodecomp") is None and "nodecomp" in ALLOWED
