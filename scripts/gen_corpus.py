"""Generate a synthetic chat corpus as generic backfill records (JSONL or Parquet).

    python scripts/gen_corpus.py OUT.jsonl --turns 100000 --banks 1000 [--seed 7] [--bad 0]

Each record is ``{bank_id, document_id, session_id, turn_id, timestamp, speaker, text}``: one
bank per user, one document per bank, sessions of 6-14 turns a few days apart, two speakers
(the user and a friend). The text comes from templates written for this script (no dataset
content): plans, places, people, pets, jobs and time expressions ("last week", "in March"),
so NER, the temporal parser and entity resolution all have work. The same seed gives the same
file. ``--bad N`` appends N malformed records (missing text, bad timestamp) to test rejects.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

FIRST = [
    "Amara",
    "Bastien",
    "Chiara",
    "Dmitri",
    "Esme",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kalani",
    "Lior",
    "Maren",
    "Nikhil",
    "Odile",
    "Pavel",
    "Quinn",
    "Rosa",
    "Soren",
    "Tamsin",
    "Umar",
    "Vera",
    "Wendell",
    "Ximena",
    "Yusuf",
    "Zofia",
]
CITIES = [
    "Lisbon",
    "Osaka",
    "Tallinn",
    "Valparaiso",
    "Halifax",
    "Nairobi",
    "Ghent",
    "Cusco",
    "Tromso",
    "Adelaide",
    "Split",
    "Kraków",
    "Hanoi",
    "Oaxaca",
    "Bergen",
]
PLACES = [
    "the climbing gym",
    "the night market",
    "the public library",
    "the harbour",
    "the community garden",
    "the old cinema",
    "the ferry terminal",
    "the bakery on Elm Street",
    "the botanical garden",
    "the swimming pool",
]
ORGS = [
    "Northwind Labs",
    "Bluefin Studio",
    "Kestrel Health",
    "Lumen Robotics",
    "Harbor & Pine",
    "the city council",
    "Quarry Books",
    "Tidewater Bank",
]
HOBBIES = [
    "pottery",
    "bouldering",
    "sourdough baking",
    "birdwatching",
    "salsa dancing",
    "chess",
    "watercolour painting",
    "trail running",
    "beekeeping",
    "film photography",
]
PETS = [
    "a tabby cat called Pickle",
    "a greyhound named Comet",
    "two goldfish",
    "a rescue rabbit",
    "a parrot that whistles",
    "an old beagle called Toast",
]
WHEN = [
    "last week",
    "yesterday",
    "two days ago",
    "last weekend",
    "this morning",
    "in March",
    "last summer",
    "on Friday",
    "a month ago",
    "next Tuesday",
    "in two weeks",
]
MOODS = [
    "exhausted but happy",
    "a bit nervous",
    "really proud",
    "honestly relieved",
    "still undecided",
    "so excited",
]

USER_TEMPLATES = [
    "I started {hobby} {when} and I'm already hooked.",
    "{when_cap} I went to {place} with {friend}.",
    "My manager at {org} asked me to lead the new project.",
    "I'm thinking about moving to {city} next year.",
    "We adopted {pet} {when}!",
    "I finally finished the report for {org}, I feel {mood}.",
    "{friend} and I are planning a trip to {city} {when}.",
    "I signed up for a {hobby} class at {place}.",
    "My sister just got a job at {org} in {city}.",
    "I keep forgetting to water the plants, {pet_short} knocked one over {when}.",
    "Do you remember the restaurant in {city}? I want to go back.",
    "I ran into {friend} at {place} {when}.",
]
FRIEND_TEMPLATES = [
    "That sounds wonderful, how did it go?",
    "Wait, {city}? Tell me more!",
    "You always loved {hobby}, I'm not surprised.",
    "How is {friend} doing these days?",
    "Congratulations! {org} is lucky to have you.",
    "Send me photos from {place} next time.",
    "I'm a bit jealous, honestly. When do you leave?",
    "Did you tell your family yet?",
    "That must have been a long day. Are you {mood}?",
    "Let's meet at {place} {when} and catch up properly.",
]


def _fill(rng: random.Random, template: str, friend: str) -> str:
    when = rng.choice(WHEN)
    return template.format(
        hobby=rng.choice(HOBBIES),
        when=when,
        when_cap=when[:1].upper() + when[1:],
        place=rng.choice(PLACES),
        friend=friend,
        org=rng.choice(ORGS),
        city=rng.choice(CITIES),
        pet=rng.choice(PETS),
        pet_short="the cat" if rng.random() < 0.5 else "the dog",
        mood=rng.choice(MOODS),
    )


def generate(turns: int, banks: int, seed: int = 7):
    """Yield ``turns`` records spread over ``banks`` banks (sizes vary +-50% around the mean)."""
    rng = random.Random(seed)
    weights = [rng.uniform(0.5, 1.5) for _ in range(banks)]
    scale = turns / sum(weights)
    sizes = [max(1, int(w * scale)) for w in weights]
    i = 0
    while sum(sizes) < turns:  # fix rounding, deterministically
        sizes[i % banks] += 1
        i += 1
    while sum(sizes) > turns:
        j = i % banks
        if sizes[j] > 1:
            sizes[j] -= 1
        i += 1
    for b, size in enumerate(sizes):
        user = f"{rng.choice(FIRST)}"
        friend = rng.choice([n for n in FIRST if n != user])
        bank_id = f"user-{b:05d}"
        start = datetime(2021, 1, 1, tzinfo=UTC) + timedelta(
            days=rng.randrange(900), minutes=rng.randrange(1440)
        )
        when = start
        emitted, session = 0, 0
        while emitted < size:
            session += 1
            when += timedelta(days=rng.randrange(1, 12), minutes=rng.randrange(600))
            n = min(size - emitted, rng.randrange(6, 15))
            for k in range(n):
                speaker = user if k % 2 == 0 else friend
                pool = USER_TEMPLATES if speaker == user else FRIEND_TEMPLATES
                text = _fill(rng, rng.choice(pool), friend if speaker == user else user)
                yield {
                    "bank_id": bank_id,
                    "document_id": f"{bank_id}-chat",
                    "session_id": f"s{session:03d}",
                    "turn_id": f"s{session:03d}:{k + 1}",
                    "timestamp": (when + timedelta(minutes=2 * k)).isoformat(),
                    "speaker": speaker,
                    "text": text,
                }
            emitted += n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="output .jsonl or .parquet")
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--banks", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--bad", type=int, default=0, help="malformed records to append")
    args = ap.parse_args()
    if args.turns < args.banks or args.banks < 1:
        ap.error("need --turns >= --banks >= 1")
    rows = list(generate(args.turns, args.banks, args.seed))
    for k in range(args.bad):
        bad = dict(rows[k % len(rows)], turn_id=f"bad:{k}")
        if k % 2:
            bad["timestamp"] = "sometime soonish"
        else:
            bad.pop("text")
        rows.append(bad)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), args.out)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} records ({args.turns} turns, {args.banks} banks, {args.bad} bad) to {args.out}")


if __name__ == "__main__":
    main()
