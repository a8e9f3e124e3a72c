"""The slot vocabulary: the words that name a slot's predicate, in a question ("where does Ana
live?" asks ``lives_in``) and in a statement ("I have two rescue dogs" fills ``owns:dog``).
The retain patterns (memlane/facts/patterns.py) and the question side
(:func:`asked_predicates`) read the same tables."""

from __future__ import annotations

import re

# Possessions counted by ``owns:<thing>``: a word as said -> the thing it counts.
COUNTABLE = {
    "dog": "dog",
    "puppy": "dog",
    "pup": "dog",
    "cat": "cat",
    "kitten": "cat",
    "kitty": "cat",
    "rabbit": "rabbit",
    "bunny": "rabbit",
    "hamster": "hamster",
    "guinea pig": "guinea pig",
    "fish": "fish",
    "goldfish": "fish",
    "bird": "bird",
    "parrot": "bird",
    "horse": "horse",
    "turtle": "turtle",
    "tortoise": "turtle",
    "snake": "snake",
    "lizard": "lizard",
    "chicken": "chicken",
    "pet": "pet",
    "kid": "child",
    "child": "child",
    "son": "son",
    "daughter": "daughter",
    "grandchild": "grandchild",
    "car": "car",
    "bike": "bike",
    "bicycle": "bike",
    "motorcycle": "motorcycle",
    "house": "house",
    "guitar": "guitar",
}
# Plurals that dropping an "s" does not undo.
PLURALS = {"children": "child", "puppies": "puppy", "bunnies": "bunny", "kitties": "kitty", "fish": "fish"}

# The words of a question that ask about a predicate (facts.slot_first puts that slot's latest
# fact first; a superseded fact of an asked slot follows its successor). "job" asks both the
# employer and the title; the families the learned extractor added (pet, diet, car, studies)
# have their words too. Not yet measured: they match 40 (lives_in) and 38 (works_at) of LoCoMo's 1,540
# answerable questions, but the ordering acts only where a slotted fact exists, which is rare
# on both dev sets (none of LongMemEval dev60's 20 knowledge-update evidence turns fills a slot).
_ASKS = (
    (
        re.compile(r"\b(?:live|lives|living|reside|resides|based|home ?town|moved|move|city|town)\b", re.I),
        "lives_in",
    ),
    (re.compile(r"\b(?:work|works|working|employer|company|employed|job|jobs)\b", re.I), "works_at"),
    (
        re.compile(
            r"\b(?:job|jobs|job title|title|role|position|occupation|profession|do for a living|"
            r"what does \w+ do)\b",
            re.I,
        ),
        "job_title",
    ),
    (re.compile(r"\b(?:pet|pets|dog|dogs|cat|cats|puppy|kitten)\b", re.I), "pet"),
    (re.compile(r"\b(?:diet|eat|eats|eating|vegetarian|vegan|pescatarian|keto)\b", re.I), "diet"),
    (re.compile(r"\b(?:car|cars|drive|drives|driving|vehicle)\b", re.I), "car"),
    (
        re.compile(r"\b(?:study|studies|studying|degree|course|university|college|enrolled|student)\b", re.I),
        "studies",
    ),
    (
        re.compile(
            r"\b(?:relationship|married|engaged|dating|single|partner|girlfriend|boyfriend|husband|wife|divorced)\b",
            re.I,
        ),
        "relationship",
    ),
)
_HOW_MANY = re.compile(r"\bhow many\s+(?P<thing>guinea pigs?|[a-z]+(?:\s+[a-z]+)?)", re.I)
_FAVOURITE = re.compile(r"\bfavou?rite\s+(?P<cat>[a-z]+)", re.I)


def asked_predicates(query: str) -> set[str]:
    """The predicates a question asks about (empty: none it recognises)."""
    out = {pred for pattern, pred in _ASKS if pattern.search(query)}
    m = _HOW_MANY.search(query)
    if m:
        words = m.group("thing").lower()
        for noun in (words, *words.split()):  # "guinea pigs", "rescue dogs" -> dog
            noun = PLURALS.get(noun, noun[:-1] if noun.endswith("s") else noun)
            if noun in COUNTABLE:
                out.add(f"owns:{COUNTABLE[noun]}")
                out.discard("pet")  # "how many dogs" asks a count, not which pet
                break
    m = _FAVOURITE.search(query)
    if m:
        out.add(f"favourite:{m.group('cat').lower()}")
    return out
