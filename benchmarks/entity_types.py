"""Do the bank's entity types say what a person would? The rules extractor (spaCy NER, the
speakers, the cues of memlane/retain/entity_types.py) and entity resolution run over small
labelled chats, and each labelled name's entity is checked against its kind.

``python benchmarks/entity_types.py [--speed N] [--show]``

Kinds are coarse, as a person reads them: person, assistant, animal, place (GPE, LOC, FAC),
org, other. Sets:

- ``fresh-a``: three chats written for this benchmark beside the rules (Nov 2026), so their
  wording may lean towards the cues;
- ``fresh-b``: two chats written after the rules, without looking at them again;
- ``samples``: samples/conversations.jsonl, labelled for this benchmark (the rules were
  written from the error classes a user reported, not from these turns).

None of these sentences appears in the rules or their tests. ``--speed N`` also times the
extractor over the first N LoCoMo turns (../shared/data/locomo10.json), the retain cost.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# ../shared beside the checkout (a worktree's is one level further up)
LOCOMO = next(
    (p for p in (r / "shared" / "data" / "locomo10.json" for r in ROOT.parents[:2]) if p.is_file()),
    ROOT.parent / "shared" / "data" / "locomo10.json",
)

# (speakers' lines, gold kinds by name); a kind may be a set of acceptable ones.
FRESH_A = [
    (
        [
            ("Wren", "Morning! Big news, I finally moved to Dundee last weekend."),
            ("assistant", "Congratulations, Wren! How does Dundee compare with Perth?"),
            ("Wren", "Quieter. My flatmate Oskar found us a place near Magdalen Green."),
            ("assistant", "That sounds lovely. Is Oskar from Dundee too?"),
            ("Wren", "No, he grew up in Tromsø, he works for Skyline Games now."),
            ("Wren", "Also adopted a lurcher called Turnip from the shelter on Clepington Road."),
            ("assistant", "Turnip is a great name! How is Turnip settling in?"),
            ("Wren", "Turnip hates the rain. We walk him along the Tay every evening."),
            ("Wren", "Oh and my sister Fenella is visiting from Inverness in May."),
            ("assistant", "Will you take Fenella to the V&A Dundee?"),
            ("Wren", "Definitely, and to Broughty Ferry for chips."),
        ],
        {
            "Wren": "person",
            "assistant": "assistant",
            "Dundee": "place",
            "Perth": "place",
            "Oskar": "person",
            "Magdalen Green": "place",
            "Tromsø": "place",
            "Skyline Games": "org",
            "Turnip": "animal",
            "Clepington Road": "place",
            "Tay": "place",
            "Fenella": "person",
            "Inverness": "place",
            "V&A Dundee": {"place", "org"},
            "Broughty Ferry": "place",
        },
    ),
    (
        [
            ("User", "I start my new job at Pellham Analytics on Monday."),
            ("Assistant", "Exciting! Is Pellham Analytics in Cardiff?"),
            ("User", "Yes, the office is in Cathays, right by Bute Park."),
            ("User", "My manager will be Siobhan Reyes, she used to run the data team at Brightwell."),
            ("Assistant", "Good luck with Siobhan. Are you commuting from Penarth?"),
            ("User", "For now, Gus my cat would hate moving again."),
            ("Assistant", "Gus has moved enough. Is Gus still scared of the hoover?"),
            ("User", "Terrified. Dad thinks we should move to Llandaff anyway."),
            ("User", "Playing five-a-side with Dev and Marco at Sophia Gardens on Thursdays."),
        ],
        {
            "User": "person",
            "Assistant": "assistant",
            "Pellham Analytics": "org",
            "Cardiff": "place",
            "Cathays": "place",
            "Bute Park": "place",
            "Siobhan Reyes": "person",
            "Brightwell": "org",
            "Penarth": "place",
            "Gus": "animal",
            "Llandaff": "place",
            "Dev": "person",
            "Marco": "person",
            "Sophia Gardens": "place",
        },
    ),
    (
        [
            ("Ayo", "Juniper, remind me what I said about the Lagos trip?"),
            ("Juniper", "You said you and Kemi fly to Lagos on 3 August."),
            ("Ayo", "Right. Kemi booked us into a hotel in Ikoyi."),
            ("Ayo", "Then we drive to Ibadan to see Grandma Folake."),
            ("Juniper", "Will you visit the University of Ibadan while you are there?"),
            ("Ayo", "Maybe. Kemi studied there before joining Zenith Bank."),
            ("Ayo", "Also need someone to feed Mango, our parrot, while we are away."),
            ("Juniper", "Could Tobi from next door feed Mango?"),
            ("Ayo", "Good idea, Tobi owes me after I fixed his bike in Peckham."),
        ],
        {
            "Ayo": "person",
            "Juniper": "assistant",  # a named assistant: nothing in the turns says so
            "Lagos": "place",
            "Kemi": "person",
            "Ikoyi": "place",
            "Ibadan": "place",
            "Grandma Folake": "person",
            "University of Ibadan": {"org", "place"},
            "Zenith Bank": "org",
            "Mango": "animal",
            "Tobi": "person",
            "Peckham": "place",
        },
    ),
]
FRESH_B = [
    (
        [
            ("Lior", "Back from Haifa at last, the flight was delayed four hours."),
            ("AI", "Welcome back, Lior. Did you get to see Noa while you were there?"),
            ("Lior", "Yes! Noa just started at Technion, she's doing mechanical engineering."),
            ("Lior", "Her cat Shoko knocked my coffee over on the first morning."),
            ("AI", "Classic Shoko. Are you still planning the Berlin conference in October?"),
            ("Lior", "Yep, presenting for Quantiva. My boss Adaeze wants a dry run next week."),
            ("Lior", "We might stay in Kreuzberg, Adaeze knows a cheap place there."),
            ("AI", "Kreuzberg is lively. Will Noa join you?"),
            ("Lior", "Probably not, exams. Maybe she comes to Tel Aviv for Hanukkah though."),
        ],
        {
            "Lior": "person",
            "AI": "assistant",
            "Haifa": "place",
            "Noa": "person",
            "Technion": "org",
            "Shoko": "animal",
            "Berlin": "place",
            "Quantiva": "org",
            "Adaeze": "person",
            "Kreuzberg": "place",
            "Tel Aviv": "place",
            "Hanukkah": "other",
        },
    ),
    (
        [
            ("Bea", "Hamish! Guess who got the allotment in Morningside?"),
            ("Hamish", "No way, Bea. After three years on the waiting list?"),
            ("Bea", "Three and a half. Rosie from the choir put in a word with the committee."),
            ("Hamish", "Rosie is a legend. Is it near Blackford Hill?"),
            ("Bea", "Five minutes away. I'm planting leeks and taking Crumble up there on weekends."),
            ("Hamish", "Crumble will dig up every leek, that spaniel is a menace."),
            ("Bea", "Ha, true. Anyway I'm heading to Aberdeen Friday for Gran's birthday."),
            ("Hamish", "Tell Gran hi from me. Still working at Scotmid?"),
            ("Bea", "Until March, then the new job at Heriot-Watt starts."),
        ],
        {
            "Bea": "person",
            "Hamish": "person",
            "Morningside": "place",
            "Rosie": "person",
            "Blackford Hill": "place",
            "Crumble": "animal",
            "Aberdeen": "place",
            "Scotmid": "org",
            "Heriot-Watt": "org",
        },
    ),
]
SAMPLES_GOLD = {
    "priya": {
        "Priya": "person",
        "Memlane": "assistant",  # the assistant, by name only
        "Bristol": "place",
        "Leeds": "place",
        "Rivermark": "org",
        "Harriet Cole": "person",
        "River Aire": "place",
        "Wakefield": "place",
        "Biscuit": "animal",
        "Kirkstall Vets": "org",
        "Gwen": "person",
        "Pepper": "animal",
        "Anjali": "person",
        "Rohan": "person",
        "Kochi": "place",
        "Kerala": "place",
        "Munnar": "place",
        "Chloe": "person",
        "Lisbon": "place",
        "Porto": "place",
        "Santiago": "place",
        "Leeds City Council": "org",
        "Harehills": "place",
        "Portuguese": "other",
    },
    "tomas": {
        "Tomás": "person",
        "Ines": "person",
        "Marguerite": "person",
        "Lyon": "place",
        "Daniel": "person",
        "Miso": "animal",
        "Miso Hungry": "org",
        "Partick": "place",
        "Oban": {"place", "other"},  # the town, and "the Oban sprint triathlon"
        "Clyde": "place",
        "Partick Harriers": "org",
        "Kelvingrove": "place",
        "Finnieston": "place",
        "Argyle Street": "place",
        "Salt & Ember": "org",
        "Ironman": "other",
    },
}
KINDS = {"PERSON": "person", "ASSISTANT": "assistant", "ANIMAL": "animal", "ORG": "org"}
KINDS.update(dict.fromkeys(("GPE", "LOC", "FAC"), "place"))


def kind(label: str) -> str:
    return KINDS.get(label, "other")


def _turns(lines):
    from memlane.records import Turn

    t0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
    return [
        Turn(
            document_id="d",
            session_id="s1",
            turn_id=f"s1:{i}",
            index=i,
            speaker=who,
            text=text,
            timestamp=t0 + timedelta(minutes=i),
        )
        for i, (who, text) in enumerate(lines)
    ]


def bank_entities(extractor, turns) -> list:
    """The entities a rules retain of ``turns`` leaves in a fresh bank (no store: the same
    chunking, extraction and resolution)."""
    from memlane.records import Bank
    from memlane.retain.chunking import chunk_turns
    from memlane.retain.entities import EntityResolver

    resolver = EntityResolver("b")
    chunks = chunk_turns("b", "d", turns, 8)
    for facts in extractor.extract(Bank(bank_id="b"), chunks):
        resolver.resolve_chunk([f.mentions for f in facts], [f.mentioned_at for f in facts])
    return resolver.entities()


def score(name: str, histories, extractor, show: bool) -> dict:
    from memlane.retain.entities import normalize

    gold_n = found = right = 0
    wrong = []
    for turns, gold in histories:
        entities = bank_entities(extractor, turns)
        by_key = {}
        for e in entities:
            for n in (e.name, *e.aliases):
                by_key.setdefault(normalize(n), e)
        for surface, want in gold.items():
            gold_n += 1
            ok = {want} if isinstance(want, str) else set(want)
            e = by_key.get(normalize(surface))
            if e is None:
                continue
            found += 1
            if kind(e.type) in ok:
                right += 1
            else:
                wrong.append(f"{surface}={e.type}")
    row = {
        "set": name,
        "labelled": gold_n,
        "found": found,
        "typed_right": right,
        "accuracy_of_found": round(right / found, 3) if found else None,
    }
    if show:
        row["wrong"] = wrong
    return row


def samples_histories():
    from memlane.ingest import load_conversations

    convs = {
        c.turns[0].document_id: c.turns for c in load_conversations(ROOT / "samples" / "conversations.jsonl")
    }
    return [(convs[doc], gold) for doc, gold in SAMPLES_GOLD.items()]


def speed(extractor, n: int) -> dict:
    from memlane.ingest import load_conversations
    from memlane.records import Bank
    from memlane.retain.chunking import chunk_turns

    turns = [t for c in load_conversations(LOCOMO) for t in c.turns][:n]
    chunks = chunk_turns("b", "d", turns, 8)
    extractor.extract(Bank(bank_id="b"), chunks[:4])  # warm
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        extractor.extract(Bank(bank_id="b"), chunks)
        best = min(best, time.perf_counter() - start)
    return {
        "set": "locomo-speed",
        "turns": len(turns),
        "best_of_3_s": round(best, 3),
        "turns_per_s": round(len(turns) / best, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--speed", type=int, default=0, help="also time the extractor on N LoCoMo turns")
    p.add_argument("--show", action="store_true", help="list the wrongly typed names")
    a = p.parse_args()
    from memlane.retain.extract_rules import RuleExtractor
    from memlane.retain.ner import SpacyNER

    extractor = RuleExtractor(SpacyNER())
    fresh_a = [(_turns(lines), gold) for lines, gold in FRESH_A]
    fresh_b = [(_turns(lines), gold) for lines, gold in FRESH_B]
    for name, histories in (("fresh-a", fresh_a), ("fresh-b", fresh_b), ("samples", samples_histories())):
        print(json.dumps(score(name, histories, extractor, a.show)))
    if a.speed:
        if not LOCOMO.is_file():
            print(f"error: {LOCOMO} not found", file=sys.stderr)
            raise SystemExit(2)
        print(json.dumps(speed(extractor, a.speed)))


if __name__ == "__main__":
    main()
