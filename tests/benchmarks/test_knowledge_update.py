"""The knowledge-update benchmark (benchmarks/knowledge_update.py): its generator keeps to the
timeline it claims, its questions expect what that timeline says, and its scorer picks the
first fact of the slot. One small end-to-end run on a temporary data dir (two users)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from benchmarks.knowledge_update import (
    SKIPPED,
    SLOTS,
    generate,
    mentioned,
    run_config,
    score_memories,
    summarize,
)

SLOT = {s.name: s for s in SLOTS}


def _dump(users):
    return [
        (
            u.bank_id,
            [(t.turn_id, t.speaker, t.text, t.timestamp) for s in u.sessions for t in s],
            [(q.kind, q.slot, q.query, q.expected, q.as_of, q.anchor) for q in u.questions],
        )
        for u in users
    ]


def test_the_generator_is_deterministic_for_a_seed():
    a, b = _dump(generate(25, seed=4)), _dump(generate(25, seed=4))
    assert a == b
    assert _dump(generate(25, seed=5)) != a


@pytest.fixture(scope="module")
def users():
    return generate(120, seed=13)


def test_every_chain_really_changes(users):
    for u in users:
        assert 3 <= len(u.chains) <= 4
        for slot, chain in u.chains.items():
            values = [c.value for c in chain]
            assert 3 <= len(values) <= 6, (u.bank_id, slot, values)  # two to five changes
            assert all(a != b for a, b in zip(values, values[1:])), (u.bank_id, slot, values)
            if slot.startswith("pets_"):  # one animal more or fewer at a time
                counts = [SLOT[slot].values.index(v) for v in values]
                assert all(abs(a - b) == 1 for a, b in zip(counts, counts[1:])), values
            else:  # a named value never comes back, so "before X" has one answer
                assert len(set(values)) == len(values), values
            assert all(a.at < b.at for a, b in zip(chain, chain[1:]))


def test_each_change_is_said_by_the_user_in_its_session(users):
    for u in users:
        sessions = {s[0].session_id: s for s in u.sessions}
        for slot, chain in u.chains.items():
            for c in chain:
                said = [
                    t
                    for t in sessions[c.session]
                    if t.speaker == u.name and c.value in mentioned(t.text, [c.value])
                ]
                assert said, (u.bank_id, slot, c.value)
        starts = [s[0].timestamp for s in u.sessions]
        assert all(b - a >= timedelta(days=2) for a, b in zip(starts, starts[1:]))  # days/weeks apart


def test_other_speakers_talk_and_never_about_the_users_values_as_their_own(users):
    speakers = {t.speaker for u in users for s in u.sessions for t in s}
    assert "Assistant" in speakers and len(speakers) > 20
    friends_values = 0
    for u in users:
        for s in u.sessions:
            for t in s:
                if t.speaker != u.name and t.text.startswith(
                    ("My neighbour", "My aunt", "My sister", "Funny timing")
                ):
                    friends_values += 1
    assert friends_values > 10  # the friend's own values are there as distractors


def test_questions_follow_the_timeline(users):
    kinds = {"now": 0, "as_of": 0, "before": 0}
    for u in users:
        for q in u.questions:
            kinds[q.kind] += 1
            chain = u.chains[q.slot]
            assert q.values == list(dict.fromkeys(c.value for c in chain))
            assert q.expected in q.values
            if q.kind == "now":
                assert q.expected == chain[-1].value and q.as_of is None
                assert q.reference_time > u.last_time
            elif q.kind == "as_of":
                # the value stated last by as_of, and the next change is still to come
                held = [c for c in chain if c.at <= q.as_of]
                assert held and q.expected == held[-1].value
                assert any(c.at > q.as_of for c in chain)
            else:
                assert q.anchor in q.values and q.anchor in q.query
                j = [c.value for c in chain].index(q.anchor)
                assert j >= 1 and q.expected == chain[j - 1].value
    assert kinds["now"] == sum(len(u.chains) for u in users)
    assert kinds["as_of"] == kinds["before"] == len(users)


def test_value_matching_is_by_whole_words_and_counts_take_digits():
    assert mentioned("We have 3 dogs now.", ["two dogs", "three dogs"]) == ["three dogs"]
    assert mentioned("Three dogs and a cat", ["three dogs"]) == ["three dogs"]
    assert mentioned("down to one dog", ["one dog", "two dogs"]) == ["one dog"]
    assert mentioned("one of the dogs", ["one dog"]) == []
    assert mentioned("Pho at Phoenix Diner", ["pho"]) == ["pho"]
    assert mentioned("Phoenix Diner", ["pho"]) == []
    assert mentioned("Teal is my colour", ["teal", "lilac"]) == ["teal"]


def test_the_first_fact_of_the_slot_decides():
    values = ["Leeds", "York", "Bath"]
    texts = [
        "Maya: Went for a long run this morning.",  # no value: not a fact of the slot
        "Maya: Just moved to York last weekend.",  # the first fact of the slot
        "Maya: I live in Bath now.",
    ]
    s = score_memories(texts, values, "York")
    assert (s.hit, s.rank, s.found) == (True, 1, ["York"])
    # a later memory holding the expected value does not rescue a wrong first fact
    s = score_memories(texts, values, "Bath")
    assert (s.hit, s.rank) == (False, 1)
    # a first fact naming two values says nothing about which holds: a miss
    s = score_memories(["Maya: I still miss Leeds, York is fine though.", *texts], values, "York")
    assert (s.hit, s.rank, s.found) == (False, 0, ["Leeds", "York"])
    # no memory of the slot at all: a miss without a rank
    s = score_memories(texts[:1], values, "York")
    assert (s.hit, s.rank) == (False, None)
    # "before Bath": Bath's own facts are passed over in the skipped reading only
    before = ["Maya: I live in Bath now.", "Maya: Just moved to York last weekend."]
    assert not score_memories(before, values, "York").hit
    assert score_memories(before, values, "York", skip="Bath").hit


def test_summary_counts_per_kind():
    rows = [
        {"kind": "now", "slot": "lives_in", "hit": True, "rank": 0, "found": ["A"]},
        {"kind": "now", "slot": "works_at", "hit": False, "rank": None, "found": []},
        {"kind": "as_of", "slot": "lives_in", "hit": False, "rank": 2, "found": ["A", "B"]},
        {
            "kind": "before",
            "slot": "lives_in",
            "hit": False,
            "rank": 0,
            "found": ["C"],
            "hit_skipping_anchor": True,
        },
    ]
    s = summarize(rows)
    assert s["now"] == {"n": 2, "hits": 1, "share": 0.5, "no_fact": 1, "several": 0}
    assert s["as_of"]["several"] == 1 and s["as_of"]["share"] == 0.0
    assert s["all"]["n"] == 4 and s["all"]["hits"] == 1
    assert s[SKIPPED]["hits"] == 1 and s[SKIPPED]["n"] == 1
    assert s["now by slot"]["lives_in"]["share"] == 1.0


def test_a_small_run_end_to_end(tmp_path, embedder):
    users = generate(2, seed=21)
    out = run_config(users, tmp_path / "off", "off", embedder=embedder)
    rows = out["rows"]
    assert len(rows) == sum(len(u.questions) for u in users)
    assert out["retain_s"] > 0 and out["consolidate_s"] >= 0
    by_user = {u.bank_id: u for u in users}
    checked = 0
    for row in rows:
        if row["kind"] != "as_of" or row["first_fact"] is None:
            continue
        # recall as_of a date never returns a fact stated later: whatever the first fact of
        # the slot names was stated by then
        when = datetime.fromisoformat(row["as_of"])
        stated = {c.value for c in by_user[row["bank_id"]].chains[row["slot"]] if c.at <= when}
        assert set(row["found"]) <= stated, row
        checked += 1
    assert checked >= 1
    # the rows' verdicts agree with the scorer on the fact they name
    for row in rows:
        if row["first_fact"] is not None:
            assert row["hit"] == (row["found"] == [row["expected"]])


class _Bank:
    """A stand-in engine whose bank holds given units (``browse.list_memories`` only)."""

    def __init__(self, units):
        self.units = units
        self.browse = self

    def list_memories(self, bank_id, *, limit, include_invalid):
        assert include_invalid  # invalidated memories are what is counted
        return self.units, len(self.units)


def test_supersession_diagnostics_count_statement_memories():
    from benchmarks.knowledge_update import supersession
    from memlane.records import MemoryUnit

    user = generate(1, seed=3)[0]
    slot, chain = next(iter(user.chains.items()))
    t0 = chain[0].at

    def unit(i, change, invalid):
        return MemoryUnit(
            id=f"u{i}",
            bank_id=user.bank_id,
            text=f"{user.name}: something about {change.value}.",
            mentioned_at=t0,
            source_turns=[change.turn_id],
            invalid_at=t0 if invalid else None,
        )

    # first value invalidated (right), second left valid (missed), last invalidated (wrong);
    # any values in between leave no memory at all
    units = [unit(0, chain[0], True), unit(1, chain[1], False), unit(2, chain[-1], True)]
    out = supersession(_Bank(units), [user])
    entry = out["by_slot"][slot]
    older = len(chain) - 1
    assert entry == {"older_values": older, "superseded": 1, "unextracted": older - 2}
    assert out["current_invalidated"] == 1
    assert sum(e["older_values"] for e in out["by_template"].values()) == sum(
        len(c) - 1 for c in user.chains.values()
    )
