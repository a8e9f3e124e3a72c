"""The temporal memory tree (memlane/tree) on the real engine: real Milvus Lite, the real
embedder and extractor. Windows and their closing, the invariants (containment, progressive
consolidation, children one level down), determinism and idempotent re-runs, deletion without
orphans, the LLM consolidator against the fake OpenAI-compatible server (malformed replies fall
back per node), the rules planner and hierarchical recall."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from llm_fake import FakeLLMServer

from memlane.engine import Memory
from memlane.errors import InvalidInput
from memlane.records import Level, Turn
from memlane.settings import Settings
from memlane.tree.invariants import tree_problems
from memlane.tree.nodes import node_id
from memlane.tree.planner import plan_rules
from memlane.tree.windows import Leaf, closed_windows

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)  # a Monday
LATER = datetime(2025, 1, 1, tzinfo=UTC)  # every window of the data below is closed by then

# (document, session, start offset, texts): 4 sessions on 3 days in 2 ISO weeks; two sessions
# on Tuesday 5 March, one of them in another document.
SESSIONS = [
    (
        "chat-a",
        "s1",
        timedelta(0),
        [
            "Lena: I started a new job at Acme Robotics in Leeds as a firmware engineer.",
            "Sam: Congratulations Lena! How is the commute from Headingley?",
            "Lena: Twenty minutes by bike along the canal, which I love.",
        ],
    ),
    (
        "chat-a",
        "s2",
        timedelta(days=1, hours=2),
        [
            "Lena: My sister Mira visited Leeds and we hiked in the Yorkshire Dales.",
            "Sam: Which trail did you and Mira take?",
            "Lena: The Malham Cove loop, about eleven kilometres with a picnic.",
        ],
    ),
    (
        "chat-b",
        "s1",
        timedelta(days=1, hours=9),
        [
            "Lena: I adopted a greyhound called Pixel from a rescue in York.",
            "Sam: Pixel is a great name for a greyhound!",
        ],
    ),
    (
        "chat-a",
        "s3",
        timedelta(days=8),
        [
            "Lena: Acme Robotics moved me onto the drone team this week.",
            "Sam: Does the drone team still work from Leeds?",
            "Lena: Yes, but I travel to the test site in Harrogate on Fridays.",
        ],
    ),
]


def _conversations(sessions=SESSIONS):
    docs: dict[str, list[Turn]] = {}
    for doc, session, offset, texts in sessions:
        turns = docs.setdefault(doc, [])
        for i, text in enumerate(texts):
            speaker, said = text.split(": ", 1)
            turns.append(
                Turn(
                    document_id=doc,
                    session_id=session,
                    turn_id=f"{doc}:{session}:{i}",
                    index=i,
                    speaker=speaker,
                    text=said,
                    timestamp=T0 + offset + timedelta(minutes=3 * i),
                )
            )
    return list(docs.items())


def _settings(tmp_path, name="data", background=None, **tree) -> Settings:
    return Settings(data_dir=tmp_path / name, tree=tree, background={"tree": False, **(background or {})})


@pytest.fixture
def lena(tmp_path, embedder, extractor):
    m = Memory(_settings(tmp_path), embedder=embedder, extractor=extractor)
    m.retain("lena", _conversations())
    yield m
    m.close()


def _unit_times(memory, bank="lena"):
    return {u.id: u.mentioned_at for page in memory.store.iter_units(bank) for u in page}


def _by_level(nodes):
    out: dict[Level, list] = {}
    for n in nodes:
        out.setdefault(n.level, []).append(n)
    return out


# ------------------------------------------------------------------------------- windows
def _leaf(i, at, session):
    return Leaf(id=f"u{i}", text="t", at=at, session=session, source_turns=[f"t{i}"], entity_ids=[])


def test_windows_close_by_next_session_idle_time_and_calendar():
    leaves = [
        _leaf(0, T0, "d|a"),
        _leaf(1, T0 + timedelta(minutes=5), "d|a"),
        _leaf(2, T0 + timedelta(hours=3), "d|b"),
    ]
    # Ten minutes after the last turn: "a" closed because "b" began; "b" still open (idle
    # 30 min), so its day and week stay open too.
    w = closed_windows(leaves, T0 + timedelta(hours=3, minutes=10), session_idle_s=1800)
    assert [s.key for s in w[Level.session]] == ["d|a"]
    assert w[Level.session][0].children == ["u0", "u1"]
    assert w[Level.day] == [] and w[Level.week] == [] and w[Level.profile] == []
    # An hour later "b" has been idle long enough, but Monday is not over.
    w = closed_windows(leaves, T0 + timedelta(hours=4), session_idle_s=1800)
    assert [s.key for s in w[Level.session]] == ["d|a", "d|b"] and w[Level.day] == []
    # Tuesday: the day is closed, the week (Monday to Sunday) is not.
    w = closed_windows(leaves, T0 + timedelta(days=1), session_idle_s=1800)
    assert [(d.key, d.children) for d in w[Level.day]] == [("2024-03-04", ["d|a", "d|b"])]
    assert w[Level.week] == []
    # The next Monday: the week closes and the profile appears.
    w = closed_windows(leaves, T0 + timedelta(days=7), session_idle_s=1800)
    assert [(x.key, x.children) for x in w[Level.week]] == [("2024-W10", ["2024-03-04"])]
    assert [(p.key, p.children) for p in w[Level.profile]] == [("profile", ["2024-W10"])]
    assert w[Level.profile][0].start == T0 and w[Level.profile][0].end == T0 + timedelta(hours=3)


# ------------------------------------------------------------------- build and invariants
def test_consolidation_builds_a_sound_tree(lena):
    report = lena.consolidate("lena", now=LATER)
    nodes = lena.tree.nodes("lena")
    assert tree_problems(nodes, _unit_times(lena)) == []
    levels = _by_level(nodes)
    # 4 sessions; 3 days (Mon 4, Tue 5 with two sessions, Tue 12 March); 2 ISO weeks; 1 profile
    assert [len(levels[lv]) for lv in (Level.session, Level.day, Level.week, Level.profile)] == [4, 3, 2, 1]
    assert report.nodes == {"session": 4, "day": 3, "week": 2, "profile": 1}
    assert report.written == report.nodes and report.removed == 0
    tuesday = next(d for d in levels[Level.day] if d.key == "2024-03-05")
    assert len(tuesday.children) == 2
    assert tuesday.id == node_id("lena", Level.day, "2024-03-05")
    # every session node covers its session's turns; the profile covers all of them
    turns = {t for _, ts in _conversations() for t in (x.turn_id for x in ts)}
    assert set(levels[Level.profile][0].source_turns) == turns
    pixel = next(s for s in levels[Level.session] if s.key == "chat-b|s1")
    assert set(pixel.source_turns) == {"chat-b:s1:0", "chat-b:s1:1"}
    # extractive: every point is a quotation of a unit under the node, and cites its turns
    units = {u.id: u for page in lena.store.iter_units("lena") for u in page}
    for n in nodes:
        assert n.consolidator == "rules"
        for text, cited in n.metadata["points"]:
            assert any(u.text == text and set(u.source_turns) == set(cited) for u in units.values())
            assert f"- {text}" in n.text
        assert set(n.cited_turns) <= set(n.source_turns)
    assert "Pixel" in pixel.text and "5 Mar 2024" in pixel.text
    # an extractive session's vector is the normalised mean of its quoted units' vectors
    stored = {n.id: n for n in lena.store.list_tree_nodes("lena", with_embedding=True)}
    vectors = {u.id: u.embedding for page in lena.store.iter_units("lena", with_embedding=True) for u in page}
    mean = np.mean([vectors[c] for c in pixel.cited], axis=0)
    assert np.allclose(stored[pixel.id].embedding, mean / np.linalg.norm(mean), atol=1e-5)


def test_rerun_writes_nothing_and_a_fresh_bank_gets_the_same_tree(lena, tmp_path, embedder, extractor):
    lena.consolidate("lena", now=LATER)
    first = {n.id: n.text for n in lena.tree.nodes("lena")}
    revision = lena.store.get_revision("lena")
    again = lena.consolidate("lena", now=LATER)
    assert sum(again.written.values()) == 0 and again.removed == 0
    assert sum(again.unchanged.values()) == len(first)
    assert lena.store.get_revision("lena") == revision  # nothing written, no revision bump
    with Memory(_settings(tmp_path, "other"), embedder=embedder, extractor=extractor) as other:
        other.retain("lena", _conversations())
        other.consolidate("lena", now=LATER)
        assert {n.id: n.text for n in other.tree.nodes("lena")} == first


def test_open_windows_wait_and_late_data_rewrites_only_its_windows(lena):
    last = T0 + timedelta(days=8, minutes=6)  # the last turn
    report = lena.consolidate("lena", now=last + timedelta(minutes=5))
    # the last session is open (idle < 30 min): 3 sessions, Monday and Tuesday, week 10
    assert report.nodes == {"session": 3, "day": 2, "week": 1, "profile": 1}
    report = lena.consolidate("lena", now=LATER)
    assert report.written == {"session": 1, "day": 1, "week": 1, "profile": 1}
    assert report.unchanged == {"session": 3, "day": 2, "week": 1, "profile": 0}
    assert tree_problems(lena.tree.nodes("lena"), _unit_times(lena)) == []


def test_deleting_a_document_leaves_no_orphan_and_consolidation_rewrites(lena):
    lena.consolidate("lena", now=LATER)
    before = _by_level(lena.tree.nodes("lena"))
    lena.forget.delete_document("lena", "chat-b")
    nodes = lena.tree.nodes("lena")
    # pruned at once: the chat-b session, Tuesday, week 10 and the profile are gone until the
    # next consolidation; nothing left points at a deleted unit
    assert tree_problems(nodes, _unit_times(lena)) == []
    assert not any(n.key == "chat-b|s1" for n in nodes)
    assert {n.key for n in nodes} == {
        "chat-a|s1",
        "chat-a|s2",
        "chat-a|s3",
        "2024-03-04",
        "2024-03-12",
        "2024-W11",
    }
    report = lena.consolidate("lena", now=LATER)
    nodes = lena.tree.nodes("lena")
    assert tree_problems(nodes, _unit_times(lena)) == []
    assert report.nodes == {"session": 3, "day": 3, "week": 2, "profile": 1}
    tuesday = next(n for n in nodes if n.key == "2024-03-05")
    assert len(tuesday.children) == 1 and "Pixel" not in tuesday.text
    assert len(before[Level.session]) == 4


def test_deleting_the_bank_deletes_its_tree(lena):
    lena.consolidate("lena", now=LATER)
    assert lena.tree.nodes("lena")
    lena.banks.delete("lena")
    assert lena.store.list_tree_nodes("lena") == []
    lena.create_bank("lena")
    assert lena.tree.nodes("lena") == []


def test_tree_filters_by_level_and_window(lena):
    lena.consolidate("lena", now=LATER)
    days = lena.tree.nodes("lena", level="day")
    assert [d.key for d in days] == ["2024-03-04", "2024-03-05", "2024-03-12"]
    assert [d.key for d in lena.tree.nodes("lena", level=3, since=T0 + timedelta(days=1))] == [
        "2024-03-05",
        "2024-03-12",
    ]
    assert [d.key for d in lena.tree.nodes("lena", level="day", until=T0 + timedelta(days=1))] == [
        "2024-03-04"
    ]
    with pytest.raises(InvalidInput, match="unknown tree level 'month'"):
        lena.tree.nodes("lena", level="month")
    with pytest.raises(InvalidInput, match="level: 1 is the memory units"):
        lena.tree.nodes("lena", level=1)
    with pytest.raises(InvalidInput, match="until: must be after since"):
        lena.tree.nodes("lena", since=T0, until=T0)


def test_sync_online_consolidation_follows_retain(tmp_path, embedder, extractor):
    with Memory(
        _settings(tmp_path, background={"tree": True, "mode": "sync"}), embedder=embedder, extractor=extractor
    ) as m:
        m.retain("lena", _conversations())
        assert len(m.tree.nodes("lena", level="session")) == 4  # every session of 2024 is closed now
        assert tree_problems(m.tree.nodes("lena"), _unit_times(m)) == []


def test_background_online_consolidation_builds_the_tree_after_the_retain(tmp_path, embedder, extractor):
    with Memory(_settings(tmp_path, background={"tree": True}), embedder=embedder, extractor=extractor) as m:
        m.retain("lena", _conversations())
        m.wait_background()
        assert len(m.tree.nodes("lena", level="profile")) == 1


# --------------------------------------------------------------------- the LLM consolidator
class Consolidating:
    """Answers tree prompts: a summary naming the window, or garbage for sessions when told."""

    def __init__(self, broken_sessions: bool = False) -> None:
        self.broken_sessions = broken_sessions
        self.prompts: list[str] = []

    def __call__(self, body):
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        self.prompts.append(system + "\n" + user)
        window = user.splitlines()[0].removeprefix("Window: ")
        if self.broken_sessions and system.startswith("Summarise this conversation session"):
            return "not json at all"
        return json.dumps({"summary": f"LLM summary of {window}"})


def _llm_memory(tmp_path, embedder, extractor, server):
    s = Settings(
        data_dir=tmp_path / "llm",
        llm={"consolidation": {"base_url": server.base_url, "model": "fake"}, "max_retries": 0},
        background={"tree": False, "reflect": False},
    )
    return Memory(s, embedder=embedder, extractor=extractor)


def test_llm_consolidator_writes_every_level_with_history(tmp_path, embedder, extractor):
    with FakeLLMServer() as server:
        server.responder = script = Consolidating()
        with _llm_memory(tmp_path, embedder, extractor, server) as m:
            m.retain("lena", _conversations())
            report = m.consolidate("lena", now=LATER)
            nodes = m.tree.nodes("lena")
            times = _unit_times(m)
    assert report.fallbacks == 0 and report.nodes == {"session": 4, "day": 3, "week": 2, "profile": 1}
    assert {n.consolidator for n in nodes} == {"llm:fake"}
    assert all(n.text.startswith("LLM summary of ") for n in nodes)
    # level-specific instructions; the second session sees the first one's summary as history
    systems = [p.split("\n")[0] for p in script.prompts]
    assert sum(s.startswith("Summarise this conversation session") for s in systems) == 4
    assert sum(s.startswith("Write the person profile") for s in systems) == 1
    second = [p for p in script.prompts if p.startswith("Summarise")][1]
    assert "LLM summary of Session on Mon 4 Mar 2024" in second
    assert tree_problems(nodes, times) == []


def test_malformed_llm_output_falls_back_per_node_and_loses_nothing(tmp_path, embedder, extractor):
    with FakeLLMServer() as server:
        server.responder = Consolidating(broken_sessions=True)
        with _llm_memory(tmp_path, embedder, extractor, server) as m:
            m.retain("lena", _conversations())
            report = m.consolidate("lena", now=LATER)
            nodes = m.tree.nodes("lena")
            times = _unit_times(m)
    assert report.fallbacks == 4
    assert tree_problems(nodes, times) == []
    sessions = [n for n in nodes if n.level == Level.session]
    assert len(sessions) == 4 and {n.consolidator for n in sessions} == {"rules"}
    assert all("llm_error" in n.metadata and "LLMOutputError" in n.metadata["llm_error"] for n in sessions)
    assert {n.consolidator for n in nodes if n.level != Level.session} == {"llm:fake"}


# --------------------------------------------------------------------------------- planner
@pytest.mark.parametrize(
    ("query", "complexity"),
    [
        ("Where does Lena work?", "simple"),
        ("What is the name of Lena's dog?", "simple"),
        ("What did Lena do last weekend?", "hybrid"),
        ("What does Lena usually eat for breakfast?", "hybrid"),
        ("Did Lena and Mira go hiking?", "hybrid"),
        ("How many dogs has Lena adopted?", "complex"),
        ("How has Lena's job changed since March?", "complex"),
        ("What did Lena do before she moved to Leeds?", "complex"),
        ("Which of Lena, Mira and Sam lives in York?", "complex"),
    ],
)
def test_rules_planner(query, complexity):
    from memlane.temporal import query_interval

    plan = plan_rules(query, query_interval(query, LATER))
    assert plan.complexity == complexity, plan.reasons
    expected = {"simple": (1, 2, 5), "hybrid": (1, 2, 3, 5), "complex": (1, 2, 3, 4, 5)}[complexity]
    assert plan.levels == expected and plan.planner == "rules" and plan.reasons


def test_llm_planner_and_its_fallback(tmp_path, embedder, extractor):
    with FakeLLMServer() as server:
        replies = iter(
            [json.dumps({"complexity": "complex", "keywords": ["job", "Lena"]}), "nonsense", "nonsense"]
        )
        server.responder = lambda body: next(replies)
        with _llm_memory(tmp_path, embedder, extractor, server) as m:
            m.retain("lena", _conversations())
            m.consolidate("lena", now=LATER, consolidator="rules")
            planned = m.recall("lena", "Where does Lena work?", planner="llm")
            fallback = m.recall("lena", "Where does Lena work?", planner="llm")
    assert planned.plan["plan"]["planner"] == "llm" and planned.plan["plan"]["complexity"] == "complex"
    assert planned.plan["plan"]["keywords"] == ["job", "Lena"]
    assert (
        fallback.plan["plan"]["planner"] == "rules" and "llm failed" in fallback.plan["plan"]["reasons"][-1]
    )


# ---------------------------------------------------------------------- hierarchical recall
def test_tree_recall_adds_the_ancestors_of_the_best_units_after_them(lena):
    lena.consolidate("lena", now=LATER)
    index = {n.id: n for n in lena.tree.nodes("lena")}
    parent = {c: n.id for n in index.values() for c in n.children}
    q = "Which greyhound did Lena adopt from a rescue?"
    # The gate never cuts the `leaves` best units; 2 of this bank's 11, and a floor of 0.8,
    # leave it a tail to trim (with the defaults every unit the nodes cite stays, and every
    # node only repeats them: the fused scores fall slowly with the semantic weight at 0.6).
    lena.settings.tree.leaves = 2
    lena.settings.tree.unit_floor = 0.8
    lena.settings.recall.ranker = "fused"  # the floor's own scale orders the list: a tail to trim
    res = lena.recall("lena", q, levels=[1, 2, 3], trace=True)
    flat = [m.unit.id for m in lena.recall("lena", q, planner="off").memories]
    assert res.plan is not None and res.plan["levels"] == [1, 2, 3]
    assert res.nodes and {int(n.node.level) for n in res.nodes} <= {2, 3}
    ranked = res.ranked()
    kinds = ["node" if hasattr(x, "node") else "unit" for x in ranked]
    assert kinds == sorted(kinds, key=lambda k: k == "node")  # units first, then nodes
    # the units keep flat recall's order (the floor only cuts its tail)
    ids = [m.unit.id for m in res.memories]
    assert ids == flat[: len(ids)] and res.plan["gated"]["units_below_floor"] == len(flat) - len(ids)
    assert len(ids) >= lena.settings.tree.leaves and res.plan["gated"]["units_below_floor"] > 0
    # nodes by level; each is an ancestor of one of the best units
    assert [int(n.node.level) for n in res.nodes] == sorted(int(n.node.level) for n in res.nodes)
    ancestors = set()
    for u in flat[: lena.settings.tree.leaves]:
        a = parent.get(u)
        while a is not None:
            ancestors.add(a)
            a = parent.get(a)
    assert {n.node.id for n in res.nodes} <= ancestors
    # the Pixel session itself only repeats its two recalled units: dropped as redundant
    assert "chat-b|s1" not in {n.node.key for n in res.nodes} and res.plan["gated"]["nodes_redundant"] >= 1
    # within a level, nearest in time to the query's "now" (no time expression: today) first
    for a, b in zip(res.nodes, res.nodes[1:]):
        if a.node.level == b.node.level:
            assert a.node.end >= b.node.end
    # no node only repeats units already recalled
    texts = {m.unit.text for m in res.memories}
    assert all(not all(t in texts for t, _ in n.node.metadata["points"]) for n in res.nodes)
    assert res.tokens == sum(m.tokens for m in res.memories) + sum(n.tokens for n in res.nodes)


def test_tree_recall_respects_the_budget_levels_and_planner_off(lena):
    lena.consolidate("lena", now=LATER)
    q = "How has Lena's job at Acme Robotics changed?"
    tight = lena.recall("lena", q, levels=[1, 2, 3, 4, 5], max_tokens=120)
    assert tight.tokens <= 120
    flat_levels = lena.recall("lena", q, levels=[1])
    assert flat_levels.nodes == [] and flat_levels.plan["levels"] == [1]
    off = lena.recall("lena", q, planner="off")
    assert off.nodes == [] and off.plan is None
    full = lena.recall("lena", q)
    assert full.plan["plan"]["complexity"] == "complex" and full.plan["levels"] == [1, 2, 3, 4, 5]


def test_gating_drops_nodes_below_the_similarity_floor(tmp_path, embedder, extractor):
    with Memory(_settings(tmp_path, min_similarity=0.99), embedder=embedder, extractor=extractor) as m:
        m.retain("lena", _conversations())
        m.consolidate("lena", now=LATER)
        res = m.recall("lena", "Which greyhound did Lena adopt?", levels=[1, 2, 3, 4, 5])
    assert res.nodes == [] and res.plan["gated"]["nodes_below_similarity"] > 0
