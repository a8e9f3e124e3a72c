"""Knowledge-update regression check on synthetic data (issue 13, facts that change): does
recall put a slot's *current* value first, and the right earlier value for questions about the
past?

What it is not: a measure of how well the rules read real statements. Its phrasings and the
slot patterns were written side by side (the first lives_in statement is the template
tests/memlane/test_facts.py pins, and memlane/facts/patterns.py's lives_in, works_at and
favourite rules match its sentences: 16 of its 47 statement templates fill a slot), so it
checks the resolution machinery on statements the rules were built for. Real phrasings:
:mod:`benchmarks.knowledge_update_lme` (LongMemEval's knowledge-update sessions).

The data is generated here, seeded and deterministic (:func:`generate`): ``--users`` synthetic
users, each one bank, each holding three to four slots whose value changes two to five times
over sessions days or weeks apart (where they live, where they work, their job title, who they
are dating, how many dogs or cats they have, their favourite food, colour and band). Slot
statements are written the way people say them, several phrasings per slot, indirect ones
included ("we finally moved into our new place in Leeds"), and are interleaved with chit-chat:
the user's own small talk, an assistant's or a friend's replies (which repeat the value now and
then), a friend's *own* changes ("I just moved to Porto myself": a value that is not the
user's) and the occasional fond mention of an old value ("I still miss the coffee in Leeds"),
so the words of a memory alone do not say which value is current.

Questions per user (one of each kind, on slots drawn at random):

* ``now``: the current value ("Where do I live now?", "Where does Maya work?"), recalled with
  the day after the last session as recall's reference time;
* ``as_of``: recall with ``as_of`` half-way between two updates; the expected value is the one
  stated at the earlier update;
* ``before``: "Where did I live before Leeds?", the value just before X (X a later value that
  occurs once in the chain), recalled with ``include_history`` left to recall (None: it detects
  a question about the past).

Score (:func:`score_memories`): the first memory, in recall order, whose text mentions any of
that user's values for that slot is the *first fact of the slot*; the question is a hit when
that memory mentions the expected value and no other value of the slot. No such memory, a
wrong value or a memory naming several values is a miss. "before X" is also scored with X's
own facts passed over (``before, X skipped``): recall with history ranks a predecessor below
its successor by design, so the plain reading asks more than recall promises. The same
questions run against two engines on two data directories, ``facts.resolve="auto"``
(supersession at consolidation) and ``"off"`` (every fact stays valid), in one process; the
table gives the hit share per kind and overall, retain and consolidate seconds per engine,
and what resolution did: of the values a later one replaced, how many had their statement
invalidated, per slot and per phrasing in the JSON (:func:`supersession`).

Run: ``python -m benchmarks.knowledge_update [--users 300] [--seed 13] [--out ku.json]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from memlane.records import Turn

KINDS = ("now", "as_of", "before")
# Users in the default run. The issue asked for 300; retain embeds ~73 turns a user at about
# 16 turns/s on this 2-core machine shared with three other jobs (40 users: 2916 turns
# retained in 170-185 s by the first engine), so 300 users take ~25 minutes of retain alone.
# 40 keeps the default run (both engines, 222 questions each) at 417-423 s wall; --users 300
# runs the full set.
DEFAULT_USERS = 40
CONFIGS = ("auto", "off")
START = datetime(2024, 1, 8, tzinfo=UTC)

# --------------------------------------------------------------------------------------------
# People

USER_NAMES = [
    "Maya", "Daniel", "Priya", "Tomás", "Chloe", "Oliver", "Aisha", "Lukas", "Sofia", "Marcus",
    "Hannah", "Kenji", "Fatima", "Ethan", "Zoe", "Rafael", "Ingrid", "Samir", "Grace", "Mateo",
    "Nadia", "Owen", "Leila", "Victor", "Ruby", "Jonas", "Amara", "Felix", "Elena", "Isaac",
]  # fmt: skip
FRIEND_NAMES = ["Jess", "Ravi", "Mark", "Lena", "Chris", "Nora", "Theo", "Bea", "Sanjay", "Paula"]
ASSISTANT = "Assistant"
PARTNERS = [
    "Alex", "Jamie", "Robin", "Sam", "Charlie", "Morgan", "Riley", "Noah", "Emma", "Lucas",
    "Mia", "Ben", "Ava", "Leo", "Isla", "Hugo", "Layla", "Finn", "Clara", "Omar",
]  # fmt: skip

# --------------------------------------------------------------------------------------------
# Slots: values, how people state them, how they ask about them


@dataclass(frozen=True)
class Slot:
    """One kind of fact that changes: its values and phrasings.

    ``say`` are the user's statements of a (new) value ``{v}``; ``ack`` replies of the other
    speaker that may repeat it; ``miss`` fond mentions of an old value that claim nothing about
    the present; ``friend`` another speaker's statement of *their own* value. ``now``, ``ever``
    (present tense, for as_of questions) and ``before`` are questions; ``first`` the first
    person forms, ``third`` the forms naming the user (``{name}``)."""

    name: str
    values: tuple[str, ...]
    say: tuple[str, ...]
    ack: tuple[str, ...]
    miss: tuple[str, ...]
    friend: tuple[str, ...]
    now: tuple[str, ...]
    ever: tuple[str, ...]
    before: tuple[str, ...]


CITY = Slot(
    "lives_in",
    (
        "Leeds",
        "Bristol",
        "Lisbon",
        "Denver",
        "Osaka",
        "Toronto",
        "Melbourne",
        "Glasgow",
        "Austin",
        "Seattle",
        "Dublin",
        "Porto",
        "Valencia",
        "Krakow",
        "Montreal",
        "Edinburgh",
        "Nashville",
        "Wellington",
        "Vienna",
        "Utrecht",
    ),  # fmt: skip
    (
        "We finally moved into our new place in {v}! Boxes everywhere but it already feels like home.",
        "Just moved to {v} last weekend, still living out of suitcases.",
        "Living in {v} now, and honestly my commute is so much better.",
        "Quick life update: I relocated to {v} for good.",
        "It's been a week since the move to {v} and I already love my neighbourhood.",
        "I live in {v} now, so give me a shout if you're ever passing through.",
        "Got the keys to my flat in {v} yesterday, I'm officially a local.",
        "The movers dropped the last of our stuff off in {v} this morning, we're in!",
    ),
    (
        "That's exciting! How are you finding {v} so far?",
        "Congrats on the move! I hear {v} has a great food scene.",
        "Moving is exhausting, hope you get settled in soon.",
        "Oh nice, my cousin lives in {v}, she loves it there.",
    ),
    (
        "I still miss the coffee shops back in {v}, nothing here comes close.",
        "Saw a documentary about {v} last night and got a bit homesick.",
    ),
    ("Funny timing, I actually just moved to {v} myself.", "We're thinking of staying in {v} for good."),
    ("Where do I live now?", "What city am I living in these days?", "Where does {name} live now?"),
    ("Where do I live?", "Which city does {name} live in?"),
    ("Where did I live before {x}?", "Which city was {name} living in before moving to {x}?"),
)

COMPANY = Slot(
    "works_at",
    (
        "Acme",
        "Globex",
        "Initech",
        "Northwind",
        "Contoso",
        "Bluebird Analytics",
        "Greenleaf Foods",
        "Orbital Labs",
        "Harbor Health",
        "Pinecone Media",
        "Redwood Bank",
        "Lumen Studios",
        "Vertex Robotics",
        "Meridian Insurance",
        "Foxglove Games",
        "Tidewater Energy",
    ),  # fmt: skip
    (
        "Started my new job at {v} today, everyone seems really nice.",
        "Just signed my contract with {v}, first week went better than I expected.",
        "I'm at {v} now, I handed in my notice at the old place last month.",
        "First week at {v} done. The onboarding was intense.",
        "I've been working for {v} since the start of the month and I love the team.",
        "Got hired by {v}, finally! The interviews paid off.",
        "Badge, laptop, desk: it's official, I work at {v} now.",
    ),
    (
        "Congratulations on the new job! What's the team like at {v}?",
        "That's great news, {v} is supposed to be a good place to work.",
        "New job nerves are normal, you'll be fine.",
    ),
    ("Bumped into some old colleagues from {v} at the station today, it was nice to catch up.",),
    ("I just accepted an offer from {v}, wish me luck!", "My sister got a job at {v} last week."),
    ("Where do I work now?", "Which company am I working for these days?", "Where does {name} work now?"),
    ("Where do I work?", "Which company does {name} work for?"),
    ("Where did I work before {x}?", "Which company was {name} working for before joining {x}?"),
)

TITLE = Slot(
    "job_title",
    (
        "software engineer",
        "product manager",
        "data analyst",
        "team lead",
        "graphic designer",
        "staff nurse",
        "maths teacher",
        "accountant",
        "marketing manager",
        "sous chef",
        "project coordinator",
        "sales director",
        "office manager",
        "research scientist",
    ),  # fmt: skip
    (
        "I got promoted to {v}! Still can't believe it.",
        "My new role is {v}, lots more responsibility but I'm up for it.",
        "The title change went through today, I'm officially {a_v} now.",
        "I switched careers and I'm working as {a_v} these days.",
        "They made me {v} this week, so I guess I'm a grown-up now.",
        "New business cards arrived: {v}. Feels weird seeing it in print.",
    ),
    (
        "Well deserved! How does it feel to be {a_v}?",
        "That's a big step, congratulations!",
        "Being {a_v} sounds like a lot of meetings, good luck!",
    ),
    ("Had lunch with the person who took over my old job as {a_v}, they're doing great.",),
    ("I'm training to be {a_v}, it's hard work.", "My brother just became {a_v}."),
    ("What is my job title now?", "What's my current role at work?", "What does {name} do for a living now?"),
    ("What is my job title?", "What is {name}'s role at work?"),
    ("What was my job before I became {a_x}?", "What did {name} do before becoming {a_x}?"),
)

PARTNER = Slot(
    "relationship",
    tuple(PARTNERS),
    (
        "I've started seeing someone! Their name is {v} and we met at a friend's barbecue.",
        "{v} and I made it official this weekend.",
        "My partner {v} is cooking dinner tonight, I'm a lucky person.",
        "I'm dating {v} now, it's still early days but it feels right.",
        "Moved on from the last relationship. I'm with {v} now and really happy.",
        "{v} asked me to be their partner on our third date, of course I said yes.",
    ),
    (
        "Aww, {v} sounds lovely, I'm happy for you!",
        "That's wonderful news, where did you two go for your first date?",
        "Look at you, all loved up!",
    ),
    ("Walked past the restaurant where {v} and I used to go and felt a bit nostalgic.",),
    ("Oh, I've been seeing {v} for a few months myself.", "My roommate just started dating {v}."),
    ("Who am I dating now?", "Who is my partner these days?", "Who is {name} in a relationship with now?"),
    ("Who am I dating?", "Who is {name}'s partner?"),
    ("Who was I dating before {x}?", "Who was {name} seeing before {x}?"),
)

COUNT_WORDS = ("one", "two", "three", "four", "five")


def _pets(species: str) -> Slot:
    """How many dogs (or cats) the user has: the value is a count, said as "three dogs".
    ``say`` holds the first statement and the phrasings that fit either direction; a change
    up or down by one also draws from :data:`PET_UP` or :data:`PET_DOWN`."""
    return Slot(
        f"pets_{species}",
        tuple(f"{w} {species}{'' if w == 'one' else 's'}" for w in COUNT_WORDS),
        (
            "Current household headcount: {v} and one very tired human.",
            "Yes I have {v}, they are my whole world.",
            "Life with {v} is chaos but I wouldn't change it.",
        ),
        ("How are the " + species + "s settling in?", "Sending love to the whole furry family!"),
        ("Found an old photo from when we had {v}, they were so small back then.",),
        ("My neighbour has {v} and they bark all day.", "My aunt just told me she has {v} now."),
        (
            "How many " + species + "s do I have now?",
            "How many " + species + "s have I got at the moment?",
            "How many " + species + "s does {name} have now?",
        ),
        ("How many " + species + "s do I have?", "How many " + species + "s does {name} have?"),
        (
            "How many " + species + "s did I have before I had {x}?",
            "How many " + species + "s did {name} have before having {x}?",
        ),
    )


PET_UP = (
    "We adopted another {young} from the shelter, so now we have {v}.",
    "Surprise, we brought home a new {species}! That makes {v} in the house.",
    "Couldn't resist at the rescue centre, we're a {v} household now.",
)
PET_DOWN = (
    "Sad news, we lost our oldest {species} last week. We have {v} now.",
    "We found a lovely new home for one of ours, so we're down to {v}.",
    "My ex kept one of the {species}s when we split the flat, so it's just {v} with me now.",
)


FOOD = Slot(
    "favourite_food",
    (
        "ramen",
        "tacos",
        "sushi",
        "lasagna",
        "pho",
        "paella",
        "dumplings",
        "green curry",
        "falafel",
        "biryani",
        "pad thai",
        "pierogi",
        "shakshuka",
        "bibimbap",
    ),  # fmt: skip
    (
        "Honestly {v} is my favourite food now, I could eat it every single day.",
        "My new obsession is {v}. Had it three times this week already.",
        "If you asked me my favourite food right now I'd say {v}, no contest.",
        "Can't get enough of {v} lately, it's my go-to comfort food.",
        "Nothing beats {v}, it has officially replaced everything else as my favourite.",
    ),
    ("Ooh, {v} is delicious. Do you have a favourite place for it?", "You have good taste!"),
    ("Made {v} for old times' sake tonight, it used to be my absolute favourite.",),
    ("I tried {v} for the first time and loved it.", "My favourite is {v}, always has been."),
    (
        "What's my favourite food now?",
        "What food do I love most these days?",
        "What is {name}'s favourite food now?",
    ),
    ("What's my favourite food?", "What is {name}'s favourite food?"),
    ("What was my favourite food before {x}?", "What did {name} love eating most before {x}?"),
)

COLOUR = Slot(
    "favourite_colour",
    ("navy blue", "mustard yellow", "purple", "burnt orange", "teal", "crimson", "forest green", "lilac"),
    (
        "I repainted my bedroom {v} because it's my favourite colour now.",
        "My favourite colour these days is {v}, I keep buying {v} everything.",
        "{V} is my colour now, I just bought a {v} jacket to prove it.",
        "Don't laugh, but I've become a total {v} person. Favourite colour by a mile.",
    ),
    ("{V} is such a bold choice, I love it.", "Ha, your wardrobe must be changing fast!"),
    ("Gave away my old {v} scarf today, I used to wear it constantly.",),
    ("I'm painting my kitchen {v}, what do you think?", "My daughter's favourite colour is {v}."),
    (
        "What's my favourite colour now?",
        "Which colour do I like best these days?",
        "What is {name}'s favourite colour?",
    ),
    ("What's my favourite colour?", "What is {name}'s favourite colour?"),
    ("What was my favourite colour before {x}?", "What colour did {name} like best before {x}?"),
)

BAND = Slot(
    "favourite_band",
    (
        "Arctic Monkeys",
        "Fleetwood Mac",
        "Radiohead",
        "Khruangbin",
        "Paramore",
        "Tame Impala",
        "Bon Iver",
        "Haim",
        "Vampire Weekend",
        "Coldplay",
        "Fontaines D.C.",
        "Wet Leg",
    ),  # fmt: skip
    (
        "{v} is my favourite band right now, I've had them on repeat all month.",
        "I'm so into {v} lately, saw them live last Friday and it was unreal.",
        "New favourite band alert: {v}.",
        "Can't stop listening to {v}, they've overtaken everyone else for me.",
        "If I could only listen to one band for the rest of the year it'd be {v}.",
    ),
    ("Great pick, {v} are amazing live.", "I need to give them a proper listen!"),
    ("Heard an old {v} song in a shop today and it took me right back.",),
    ("I've got tickets to see {v} next month!", "My brother is obsessed with {v}."),
    (
        "What's my favourite band now?",
        "Which band am I into these days?",
        "What is {name}'s favourite band right now?",
    ),
    ("What's my favourite band?", "What is {name}'s favourite band?"),
    ("What was my favourite band before {x}?", "Which band did {name} like most before {x}?"),
)

SLOTS: tuple[Slot, ...] = (CITY, COMPANY, TITLE, PARTNER, _pets("dog"), _pets("cat"), FOOD, COLOUR, BAND)

# --------------------------------------------------------------------------------------------
# Chit-chat: none of it names a slot value (the lists above keep their words out of it)

SMALL_TALK = (
    "Had the most relaxing weekend, mostly reading and napping.",
    "The weather has been all over the place this week.",
    "I finally finished that crime series everyone was talking about. The ending was wild.",
    "Went for a long run this morning, my legs are dead.",
    "I'm trying to drink more water, it's harder than it sounds.",
    "My laptop decided to update itself in the middle of a call today.",
    "Booked a dentist appointment, which I've been avoiding for months.",
    "Spent the evening sorting out old photos on my phone.",
    "I signed up for a pottery class, the first session is on Thursday.",
    "Baked banana bread and it actually came out well for once.",
    "Does anyone else feel like this month is going on forever?",
    "Tried a new podcast on the way home, it was surprisingly good.",
    "I've been sleeping terribly, I think I need a new mattress.",
    "Went to a friend's birthday party last night, stayed out way too late.",
    "Cleaned the whole flat today, feels so good.",
    "I'm thinking about learning to play the guitar again.",
    "My plants are somehow still alive, I'm very proud.",
    "Got caught in the rain without an umbrella, classic.",
    "The gym was packed this morning, everyone's new year resolutions I guess.",
    "I've started journaling before bed, it helps me switch off.",
    "Watched a really old film last night, the acting was so dramatic.",
    "Spent way too much money at the farmers market.",
    "I need a holiday, even just a long weekend somewhere quiet.",
    "Had a video call with my parents, they finally figured out the camera.",
)
REPLIES = (
    "That sounds really nice, you deserve a break.",
    "Ha, I know exactly what you mean.",
    "Oh no! Hope the rest of the week is better.",
    "Nice, tell me how it goes!",
    "Good for you, that's a great habit.",
    "Sounds like a lot, take it easy.",
    "I'm jealous, that sounds lovely.",
    "Same here honestly, it's been one of those weeks.",
    "What did you think of it?",
    "Love that for you.",
)


# --------------------------------------------------------------------------------------------
# The generated data


@dataclass
class Change:
    """One value of one slot, stated at ``at`` in session ``session`` by turn ``turn_id``
    with ``template``."""

    slot: str
    value: str
    at: datetime
    session: str
    turn_id: str = ""
    template: str = ""


@dataclass
class Question:
    """One question: ``kind`` (now, as_of, before), the query, recall's ``as_of`` and
    reference time, the expected value and every value of the slot (what the scorer looks
    for)."""

    user: str
    bank_id: str
    kind: str
    slot: str
    query: str
    expected: str
    values: list[str]
    reference_time: datetime
    as_of: datetime | None = None
    anchor: str | None = None  # the X of a "before X" question


@dataclass
class User:
    """One synthetic user: a bank, its sessions and the value chains of its slots."""

    name: str
    bank_id: str
    chains: dict[str, list[Change]] = field(default_factory=dict)
    sessions: list[list[Turn]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def documents(self) -> list[tuple[str, list[Turn]]]:
        """What retain gets: one document per session."""
        return [(turns[0].document_id, turns) for turns in self.sessions]

    @property
    def last_time(self) -> datetime:
        return max(t.timestamp for turns in self.sessions for t in turns)


def _article(v: str) -> str:
    return ("an " if v[0].lower() in "aeiou" else "a ") + v


def _fill(template: str, v: str = "", x: str = "", name: str = "") -> str:
    return template.format(
        v=v,
        V=v[:1].upper() + v[1:],
        a_v=_article(v) if v else "",
        x=x,
        a_x=_article(x) if x else "",
        name=name,
    )


def _chain(rng: random.Random, slot: Slot) -> list[str]:
    """Three to six values (two to five changes), no value twice in a row; named values are
    never repeated at all, counts may come back ("two dogs" again after three)."""
    n = rng.randint(3, 6)
    if slot.name.startswith("pets_"):
        # a household changes by one animal at a time: a walk of +-1 within one to five
        counts = [rng.randint(1, 3)]
        while len(counts) < n:
            counts.append(rng.choice([c for c in (counts[-1] - 1, counts[-1] + 1) if 1 <= c <= 5]))
        return [slot.values[c - 1] for c in counts]
    return rng.sample(slot.values, n)


def _statement(rng: random.Random, slot: Slot, chain: Sequence[Change]) -> str:
    """A template stating the newest value of ``chain``; a count that went up or down may be
    told as the adoption or loss it was."""
    if not slot.name.startswith("pets_") or len(chain) < 2:
        return rng.choice(slot.say)
    species = slot.name.removeprefix("pets_")
    up = slot.values.index(chain[-1].value) > slot.values.index(chain[-2].value)
    moves = PET_UP if up else PET_DOWN
    template = rng.choice([*slot.say[:1], *moves])
    young = "puppy" if species == "dog" else "kitten"
    return template.replace("{young}", young).replace("{species}", species)


def _other_value(rng: random.Random, slot: Slot, taken: Iterable[str]) -> str | None:
    """A value of ``slot`` none of ``taken`` (None when a count chain used them all)."""
    free = [v for v in slot.values if v not in set(taken)]
    return rng.choice(free) if free else None


def _make_user(rng: random.Random, index: int) -> User:
    name = USER_NAMES[index % len(USER_NAMES)]
    user = User(name=name, bank_id=f"ku-{index:04d}")
    slots = rng.sample([s for s in SLOTS if not s.name.startswith("pets_")], rng.randint(2, 3))
    slots.append(rng.choice([s for s in SLOTS if s.name.startswith("pets_")]))
    rng.shuffle(slots)
    by_name = {s.name: s for s in slots}
    # One event per value; plus a few sessions of chit-chat only. Order: every chain keeps its
    # own order, chains are interleaved at random (a value of one slot can change between two
    # of another's).
    pending = {s.name: _chain(rng, s) for s in slots}
    events: list[str | None] = [s for s, vals in pending.items() for _ in vals]
    events += [None] * rng.randint(2, 4)
    rng.shuffle(events)
    if events[0] is None:  # the first session opens with a fact, as a first chat would
        first = next(i for i, e in enumerate(events) if e is not None)
        events[0], events[first] = events[first], events[0]
    pos = {s: 0 for s in pending}
    when = START + timedelta(days=rng.randint(0, 120), hours=rng.randint(8, 21), minutes=rng.randint(0, 59))
    friend = rng.choice(FRIEND_NAMES)
    for si, slot_name in enumerate(events):
        when += timedelta(days=rng.randint(3, 24), minutes=rng.randint(-90, 90))
        other = ASSISTANT if rng.random() < 0.6 else friend
        doc = f"{user.bank_id}-s{si + 1:02d}"
        lines: list[tuple[str, str]] = []
        talk = rng.sample(SMALL_TALK, 2)  # two different topics at most per session
        if rng.random() < 0.5:
            lines += [(name, talk[0]), (other, rng.choice(REPLIES))]
        if slot_name is not None:
            slot = by_name[slot_name]
            value = pending[slot_name][pos[slot_name]]
            pos[slot_name] += 1
            chain = user.chains.setdefault(slot_name, [])
            change = Change(slot_name, value, when, doc, f"{doc}:{len(lines) + 1}")
            chain.append(change)
            change.template = _statement(rng, slot, chain)
            lines.append((name, _fill(change.template, value)))
            lines.append((other, _fill(rng.choice(slot.ack), value)))
            if other != ASSISTANT and rng.random() < 0.3:
                # the friend's own value of the slot: never one of the user's
                theirs = _other_value(rng, slot, pending[slot_name])
                if theirs is not None:
                    lines.append((other, _fill(rng.choice(slot.friend), theirs)))
            if len(chain) >= 2 and rng.random() < 0.12:
                # a fond word about a value the user no longer holds
                lines.append((name, _fill(rng.choice(slot.miss), chain[-2].value)))
        if slot_name is None or rng.random() < 0.4:
            lines += [(name, talk[1]), (other, rng.choice(REPLIES))]
        user.sessions.append(
            [
                Turn(
                    document_id=doc,
                    session_id=doc,
                    turn_id=f"{doc}:{i + 1}",
                    index=i,
                    speaker=speaker,
                    text=text,
                    timestamp=when + timedelta(minutes=2 * i),
                )
                for i, (speaker, text) in enumerate(lines)
            ]
        )
    user.questions = _questions(rng, user, by_name)
    return user


def _ask(rng: random.Random, templates: Sequence[str], user: User, x: str = "") -> str:
    return _fill(rng.choice(templates), x=x, name=user.name)


def _questions(rng: random.Random, user: User, slots: dict[str, Slot]) -> list[Question]:
    """A ``now`` question per slot, one ``as_of`` and one ``before`` question on slots drawn
    at random (every chain has at least two changes, so both kinds always exist). Recall, not
    retain, is what questions cost: one per slot for the headline kind, one each for the
    others keeps the default run in its time (module doc)."""
    ref = user.last_time + timedelta(days=1)
    out = []
    names = sorted(user.chains)

    def question(
        kind: str,
        slot: str,
        query: str,
        expected: str,
        as_of: datetime | None = None,
        anchor: str | None = None,
    ) -> Question:
        values = list(dict.fromkeys(c.value for c in user.chains[slot]))
        return Question(
            user.name, user.bank_id, kind, slot, query, expected, values, as_of or ref, as_of, anchor
        )

    for slot in names:  # the headline kind: every slot of the user
        out.append(question("now", slot, _ask(rng, slots[slot].now, user), user.chains[slot][-1].value))

    slot = rng.choice(names)
    chain = user.chains[slot]
    i = rng.randrange(len(chain) - 1)
    # half-way between the statement of value i and the next one: value i holds then
    as_of = chain[i].at + (chain[i + 1].at - chain[i].at) / 2
    out.append(question("as_of", slot, _ask(rng, slots[slot].ever, user), chain[i].value, as_of))

    candidates = [
        (s, j)
        for s in names
        for j in range(1, len(user.chains[s]))
        if [c.value for c in user.chains[s]].count(user.chains[s][j].value) == 1
    ]
    slot, j = rng.choice(candidates)
    chain = user.chains[slot]
    x = chain[j].value
    out.append(question("before", slot, _ask(rng, slots[slot].before, user, x), chain[j - 1].value, anchor=x))
    return out


def generate(users: int = DEFAULT_USERS, seed: int = 13) -> list[User]:
    """``users`` synthetic users with their sessions and questions; the same for a seed."""
    rng = random.Random(seed)
    return [_make_user(rng, i) for i in range(users)]


# --------------------------------------------------------------------------------------------
# Scoring


def _value_re(value: str) -> re.Pattern[str]:
    # Whole words, case-insensitive ("Teal" opening a sentence is still teal); a count matches
    # its digit too ("3 dogs" for "three dogs").
    words = value.split()
    if words[0] in COUNT_WORDS:
        n = COUNT_WORDS.index(words[0]) + 1
        head = f"(?:{words[0]}|{n})"
        return re.compile(rf"\b{head}\s+{re.escape(' '.join(words[1:]))}\b", re.IGNORECASE)
    return re.compile(rf"(?<!\w){re.escape(value)}(?!\w)", re.IGNORECASE)


def mentioned(text: str, values: Sequence[str]) -> list[str]:
    """The values of ``values`` that ``text`` mentions, in ``values`` order."""
    return [v for v in values if _value_re(v).search(text)]


@dataclass
class Score:
    """A question's outcome: ``hit``; ``rank`` of the first fact of the slot among the recalled
    memories (None: none mentions a value); the values that fact mentions."""

    hit: bool
    rank: int | None
    found: list[str]


def score_memories(
    texts: Sequence[str], values: Sequence[str], expected: str, skip: str | None = None
) -> Score:
    """Score one recall: the first of ``texts`` (memory texts in recall order) mentioning any
    of ``values`` is the slot's first fact; a hit when it mentions ``expected`` and nothing
    else of ``values`` (a fact naming two values does not say which one holds). ``skip``: a
    value whose own facts (those naming it alone) are passed over, the X of "before X"."""
    for rank, text in enumerate(texts):
        found = mentioned(text, values)
        if found and found != [skip]:
            return Score(found == [expected], rank, found)
    return Score(False, None, [])


# --------------------------------------------------------------------------------------------
# The run


class MemoEmbedder:
    """The embedder with a memory: a text embedded once is not embedded again. Both engines
    retain the very same texts, and embedding is 95 % of retain here (cProfile of three users'
    retain: 16.2 of 17.0 s in the model), so the second engine reuses the first one's vectors;
    its retain and consolidate times leave embedding out and the report says so. Queries are
    not reused (``reuse`` is off while questions run), so recall latencies compare."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.reuse = True
        self._cache: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]):
        import numpy as np

        if not self.reuse:
            return self.inner.embed(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing)):
                self._cache[text] = vector
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts]).astype(np.float32)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def __getattr__(self, name: str) -> Any:  # name, batch_size, max_seq_length ...
        return getattr(self.inner, name)


def _memory(data_dir: Path, resolve: str, embedder=None, overrides: dict[str, Any] | None = None):
    from benchmarks.recall_sweep import apply
    from memlane.engine import Memory
    from memlane.settings import Settings

    settings = Settings(data_dir=data_dir, facts={"resolve": resolve})
    apply(settings, overrides or {})
    return Memory(settings, embedder=embedder)


def supersession(memory, users: Sequence[User]) -> dict[str, Any]:
    """Diagnostics of resolution after consolidation, from the user's statement turns: of the
    values a later one replaced, how many have their statement's memories invalidated
    (``superseded``: every memory of that turn naming the value), per slot and per phrasing;
    and of the current values, how many were invalidated (``current_invalidated``: wrong,
    nothing replaced them). A value whose turn left no memory naming it is ``unextracted``."""
    by_slot: dict[str, dict[str, int]] = {}
    by_template: dict[str, dict[str, int]] = {}
    current_invalidated = 0
    for u in users:
        units, _ = memory.browse.list_memories(u.bank_id, limit=1000, include_invalid=True)
        by_turn: dict[str, list[Any]] = {}
        for unit in units:
            for turn in unit.source_turns:
                by_turn.setdefault(turn, []).append(unit)
        for slot, chain in u.chains.items():
            for i, c in enumerate(chain):
                mine = [x for x in by_turn.get(c.turn_id, []) if c.value in mentioned(x.text, [c.value])]
                gone = bool(mine) and all(x.invalid_at is not None for x in mine)
                if i == len(chain) - 1:
                    current_invalidated += gone
                    continue
                for key, table in ((slot, by_slot), (f"{slot}: {c.template}", by_template)):
                    entry = table.setdefault(key, {"older_values": 0, "superseded": 0, "unextracted": 0})
                    entry["older_values"] += 1
                    entry["superseded"] += gone
                    entry["unextracted"] += not mine
    total = {k: sum(e[k] for e in by_slot.values()) for k in ("older_values", "superseded", "unextracted")}
    return {
        "total": total,
        "current_invalidated": current_invalidated,
        "by_slot": by_slot,
        "by_template": by_template,
    }


def run_config(
    users: Sequence[User],
    data_dir: Path,
    resolve: str,
    *,
    embedder=None,
    progress: Callable[[str, int], None] | None = None,
    budget: str = "mid",
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Retain, consolidate and ask every user's questions with ``facts.resolve=resolve`` on a
    fresh ``data_dir``, recalling at ``budget`` with the settings ``overrides`` (``area.field``:
    value). Returns the timings and one row per question."""
    tick = progress or (lambda stage, n: None)
    memory = _memory(data_dir, resolve, embedder, overrides)
    try:
        if isinstance(embedder, MemoEmbedder):
            embedder.reuse = True
        t0 = time.perf_counter()
        for u in users:
            memory.create_bank(u.bank_id, name=u.name)
            memory.retain(u.bank_id, u.documents)
            tick("retain", 1)
        retain_s = time.perf_counter() - t0
        memory.wait_background()
        t0 = time.perf_counter()
        facts: dict[str, int] = {}
        for u in users:
            tree = memory.consolidate(u.bank_id)
            # what conflict resolution did (memlane/facts; empty with resolve "off")
            for name, n in (getattr(tree, "facts", None) or {}).items():
                facts[name] = facts.get(name, 0) + int(n)
            tick("consolidate", 1)
        consolidate_s = time.perf_counter() - t0
        if isinstance(embedder, MemoEmbedder):
            embedder.reuse = False  # every engine embeds its queries itself
        superseded = supersession(memory, users)
        rows = []
        latencies = []
        for u in users:
            for q in u.questions:
                start = time.perf_counter()
                result = memory.recall(
                    u.bank_id, q.query, as_of=q.as_of, reference_time=q.reference_time, budget=budget
                )
                latencies.append(time.perf_counter() - start)
                texts = [m.unit.text for m in result.memories]
                s = score_memories(texts, q.values, q.expected)
                first = result.memories[s.rank].unit if s.rank is not None else None
                row = {
                    "bank_id": q.bank_id,
                    "kind": q.kind,
                    "slot": q.slot,
                    "query": q.query,
                    "as_of": q.as_of.isoformat() if q.as_of else None,
                    "expected": q.expected,
                    "hit": s.hit,
                    "rank": s.rank,
                    "found": s.found,
                    "first_fact": first.text if first else None,
                    "first_fact_superseded_by": first.superseded_by if first else None,
                }
                if q.anchor is not None:
                    # The X-skipped reading of "before X": X's own facts rank high on the
                    # question's words alone, and recall with history ranks a predecessor
                    # below its successor by design; this says whether the predecessor is
                    # the next fact of the slot once those are passed over.
                    row["hit_skipping_anchor"] = score_memories(texts, q.values, q.expected, q.anchor).hit
                rows.append(row)
                tick("questions", 1)
            memory.derived.evict(u.bank_id)  # banks are many and small: keep one in memory
        latencies.sort()
        return {
            "resolve": resolve,
            "retain_s": round(retain_s, 1),
            "consolidate_s": round(consolidate_s, 1),
            "facts": facts,
            "supersession": superseded,
            "recall_p50_ms": round(1000 * latencies[len(latencies) // 2], 1) if latencies else None,
            "rows": rows,
        }
    finally:
        memory.close()


SKIPPED = "before, X skipped"


def _share(sel: Sequence[dict[str, Any]], key: str = "hit") -> dict[str, Any]:
    hits = sum(1 for r in sel if r[key])
    return {
        "n": len(sel),
        "hits": hits,
        "share": round(hits / len(sel), 4) if sel else None,
        "no_fact": sum(1 for r in sel if r["rank"] is None),
        "several": sum(1 for r in sel if len(r["found"]) > 1),
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{kind or "all": {"n", "hits", "share", "no_fact", "several"}}``: hits per question
    kind and overall, with the misses where no recalled memory named a value of the slot and
    where the first fact named several; ``SKIPPED``: the before questions scored with X's own
    facts passed over (``no_fact``/``several`` there are those of the plain reading);
    ``"now by slot"``: the now kind per slot."""
    out: dict[str, Any] = {}
    for kind in (*KINDS, "all"):
        out[kind] = _share([r for r in rows if kind == "all" or r["kind"] == kind])
    before = [r for r in rows if "hit_skipping_anchor" in r]
    out[SKIPPED] = _share(before, "hit_skipping_anchor")
    now = [r for r in rows if r["kind"] == "now"]
    out["now by slot"] = {
        slot: _share([r for r in now if r["slot"] == slot]) for slot in sorted({r["slot"] for r in now})
    }
    return out


def _advance(bar, tasks: dict[str, Any], stage: str, n: int) -> None:
    bar.advance(tasks[stage], n)


def run_benchmark(
    users: int = DEFAULT_USERS,
    seed: int = 13,
    configs: Sequence[str] = CONFIGS,
    work_dir: Path | None = None,
    progress: bool = True,
    budget: str = "mid",
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Generate the data, run every config (one data dir each under ``work_dir``, default a
    temporary directory removed afterwards) and return the report. Every recall runs at
    ``budget`` with the settings ``overrides``."""
    from evals.harness import progress_bar

    data = generate(users, seed)
    owned = work_dir is None
    root = Path(tempfile.mkdtemp(prefix="memlane-ku-")) if work_dir is None else Path(work_dir)
    report: dict[str, Any] = {
        "benchmark": "knowledge_update",
        "users": users,
        "seed": seed,
        "sessions": sum(len(u.sessions) for u in data),
        "turns": sum(len(s) for u in data for s in u.sessions),
        "changes": sum(len(c) - 1 for u in data for c in u.chains.values()),
        "questions": sum(len(u.questions) for u in data),
        "budget": budget,
        "overrides": overrides or {},
        "configs": {},
    }
    from memlane.models.embedder import build_embedder
    from memlane.settings import Settings

    # one model for both engines; the second reuses the first one's vectors (MemoEmbedder)
    embedder = MemoEmbedder(build_embedder(Settings()))
    t_all = time.perf_counter()
    try:
        with progress_bar(progress) as bar:
            for resolve in configs:
                tasks = {
                    "retain": bar.add_task(f"{resolve}: retain", total=len(data)),
                    "consolidate": bar.add_task(f"{resolve}: consolidate", total=len(data)),
                    "questions": bar.add_task(f"{resolve}: questions", total=report["questions"]),
                }
                data_dir = root / resolve
                shutil.rmtree(data_dir, ignore_errors=True)
                out = run_config(
                    data,
                    data_dir,
                    resolve,
                    embedder=embedder,
                    progress=functools.partial(_advance, bar, tasks),
                    budget=budget,
                    overrides=overrides,
                )
                out["embeddings_reused"] = resolve != configs[0]
                out["summary"] = summarize(out["rows"])
                report["configs"][resolve] = out
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)
    report["wall_s"] = round(time.perf_counter() - t_all, 1)
    return report


def print_report(report: dict[str, Any], console=None) -> None:
    """The hit shares per kind and config, and the timings, as a rich table."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    configs = list(report["configs"])
    table = Table(
        title=(
            f"Knowledge update (synthetic regression check): first fact of the slot holds the expected value "
            f"({report['users']} users, seed {report['seed']}, {report['questions']} questions, budget "
            f"{report.get('budget', 'mid')}{', ' + str(report['overrides']) if report.get('overrides') else ''})"
        )
    )
    table.add_column("kind")
    table.add_column("n", justify="right")
    for c in configs:
        table.add_column(f"resolve={c}", justify="right")
        table.add_column("no fact / several", justify="right")
    for kind in (*KINDS, SKIPPED, "all"):
        cells = []
        for c in configs:
            s = report["configs"][c]["summary"][kind]
            cells += [
                f"{s['share']:.3f}" if s["share"] is not None else "-",
                f"{s['no_fact']} / {s['several']}",
            ]
        table.add_row(kind, str(report["configs"][configs[0]]["summary"][kind]["n"]), *cells)
    console.print(table)
    for c in configs:
        r = report["configs"][c]
        reused = " (embeddings of the first engine reused)" if r.get("embeddings_reused") else ""
        console.print(
            f"resolve={c}: retain {r['retain_s']} s, consolidate {r['consolidate_s']} s{reused}, "
            f"recall p50 {r['recall_p50_ms']} ms; resolution: {r.get('facts') or 'nothing'}"
        )
        sup = r.get("supersession")
        if sup:
            t = sup["total"]
            console.print(
                f"  replaced values whose statement was invalidated: {t['superseded']} of "
                f"{t['older_values']} ({t['unextracted']} left no memory naming the value); "
                f"current values invalidated: {sup['current_invalidated']}"
            )
    console.print(
        f"{report['sessions']} sessions, {report['turns']} turns, {report['changes']} value changes; "
        f"wall {report['wall_s']} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=DEFAULT_USERS)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="facts.resolve values, comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="Write the report (with every row) as JSON")
    parser.add_argument("--work-dir", type=Path, default=None, help="Keep the data dirs here")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--budget", choices=("low", "mid", "high"), default="mid", help="Every recall's budget"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="AREA.FIELD=VALUE",
        help="A setting for every engine (repeatable), e.g. recall.rerank_current_margin=0.2",
    )
    args = parser.parse_args(argv)
    if args.users < 1:
        parser.error("--users must be >= 1")
    from benchmarks.recall_sweep import parse_config

    overrides: dict[str, Any] = {}
    for spec in args.set:
        if "=" not in spec or "." not in spec.partition("=")[0]:
            parser.error(f"--set takes AREA.FIELD=VALUE, got {spec!r}")
        overrides.update(parse_config(f"x:{spec}")[1])
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    report = run_benchmark(
        args.users,
        args.seed,
        configs,
        args.work_dir,
        progress=not args.no_progress,
        budget=args.budget,
        overrides=overrides,
    )
    report["command"] = "python -m benchmarks.knowledge_update " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    print_report(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
