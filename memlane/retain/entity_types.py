"""What kind of thing a named entity is, where the turn says so itself.

spaCy's small English model types a lone capitalised name by its shape and a few words around
it, and in chat it often guesses wrong: a town someone moved to as a PERSON, a dog as an ORG,
a speaker as a NORP. The explorer shows those types, and a person reads them. These rules
override the model's label only where the turn's own words leave no doubt, and such a label
is *certain*: entity resolution lets it correct an entity typed by a guess earlier
(memlane/retain/entities.py).

- a speaker is a PERSON, and an assistant speaker (a role word such as "assistant", or a turn
  whose ``role`` metadata says so) is an ASSISTANT, never a person or a place;
- a name right after a pet word ("my cat X", "a lurcher called X", "X, our parrot") is an
  ANIMAL;
- a name right after a relation word ("my sister X", "X, my manager") is a PERSON;
- a name right after "moved to", "grew up in", "flew to", "visiting from" and the like is a
  place (GPE); after a bare "in", "near" or "around" too, unless the model said ORG, NORP
  or another place type (an office "in Rivermark" is still Rivermark, "in Portuguese" a
  language);
- otherwise the name's last word: "... Road", "... Park", "River ..." a place (FAC unless the
  model said GPE or LOC), "... Bank", "... Council", "University of ..." an ORG.

Measured on a labelled sample written for it (benchmarks/entity_types.py, which shares no
sentence with these rules or their tests).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

PERSON, ASSISTANT, ANIMAL, PLACE = "PERSON", "ASSISTANT", "ANIMAL", "GPE"
PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})

# Speaker names that are a role, not a name: chat exports and Hindsight's "Assistant: ..."
# transcripts name the model's turns so.
ASSISTANT_SPEAKERS = frozenset({"assistant", "ai", "ai assistant", "bot", "chatbot", "system", "model"})
ASSISTANT_ROLES = frozenset({"assistant", "system", "model", "bot"})

_PETS = (
    r"dog|doggo|puppy|pup|cat|kitten|kitty|lurcher|greyhound|whippet|beagle|terrier|spaniel|"
    r"labrador|retriever|collie|poodle|dachshund|pug|husky|parrot|budgie|canary|rabbit|bunny|"
    r"hamster|guinea pig|ferret|tortoise|turtle|horse|pony|goldfish|gecko|snake|pet"
)
_RELATIONS = (
    r"friend|best friend|flatmate|roommate|housemate|manager|boss|colleague|co-?worker|teammate|"
    r"sister|brother|sibling|mum|mom|mother|dad|father|parents?|wife|husband|partner|girlfriend|"
    r"boyfriend|fianc[eé]e?|son|daughter|kid|aunt|auntie|uncle|cousin|niece|nephew|grandma|"
    r"grandmother|grandpa|grandfather|gran|granny|nan|neighbou?r|landlord|landlady|teacher|"
    r"coach|tutor|therapist|doctor|dentist|mentor|client|student|bandmate"
)
_OWNER = r"(?:my|our|his|her|their|your|the|a|an)"
# the words before the name (the text up to it), and the words after it
_PET_BEFORE = re.compile(rf"\b{_OWNER}\s+(?:\w+\s+)?(?:{_PETS})s?\s*(?:,\s*|(?:called|named)\s+)?$", re.I)
_PET_AFTER = re.compile(rf"^(?:['\u2019]s)?\s*(?:,\s*)?(?:{_OWNER}\s+)?(?:\w+\s+)?(?:{_PETS})\b", re.I)
_PET_AFTER_THE = re.compile(rf"^\s+the\s+(?:{_PETS})\b", re.I)
_PERSON_BEFORE = re.compile(rf"\b(?:my|our|his|her|their|your)\s+(?:{_RELATIONS})\s*,?\s*$", re.I)
_PERSON_AFTER = re.compile(rf"^\s*,\s*(?:my|our|his|her|their|your)\s+(?:{_RELATIONS})\b", re.I)
_PLACE_VERB_BEFORE = re.compile(
    r"\b(?:mov(?:e|ed|ing)|relocat(?:e|ed|ing)|fl(?:y|ew|ying|own)|dr(?:ive|ove|iving)|"
    r"travel(?:l?ed|l?ing)?|trip|holiday|commut(?:e|ed|ing)|li(?:ve|ves|ved|ving)|based|born|"
    r"grew up|raised|stay(?:s|ed|ing)?|visit(?:s|ed|ing)?|back|home|headed|heading)\s+"
    r"(?:back\s+)?(?:to|in|from|into|near|around|outside)\s+$",
    re.I,
)
_PLACE_BEFORE = re.compile(r"\b(?:in|near|around|outside)\s+(?:central\s+|north\s+|south\s+)?$", re.I)
# The name's own last word: a street, a park, a river is a place; a bank, a council, a club an
# organisation, whatever the model guessed (a capitalised word decides: "Kirkstall Vets").
_PLACE_SHAPE = re.compile(
    r"^(?:(?:River|Lake|Loch|Mount|Port)\s+\S.*|.+\s(?:Road|Rd|Street|St|Lane|Avenue|Ave|Drive|Way|"
    r"Crescent|Terrace|Place|Square|Park|Green|Gardens|Common|Hill|Hills|Heath|Bridge|Ferry|Station|"
    r"Airport|Harbour|Harbor|Beach|Bay|Valley|Forest|Island|Quay|Wharf))$"
)
_ORG_SHAPE = re.compile(
    r"^(?:(?:University|College|Bank|Museum)\s+of\s+\S.*|.+\s(?:Ltd|Limited|Inc|LLC|plc|PLC|Corp|"
    r"Corporation|Company|Co\.?|Group|Bank|Council|University|College|School|Academy|Hospital|Clinic|"
    r"Vets|Labs|Analytics|Games|Studios?|Partners|Foundation|Trust|Society|Club|FC|Association|Agency|"
    r"Institute|Ministry))$"
)
# Labels a bare "in" does not move to a place: an organisation ("in Rivermark"), the places
# themselves, and NORP ("in Portuguese": a language).
_KEEP_AFTER_IN = PLACE_LABELS | {"ORG", "NORP", "LANGUAGE"}


def speaker_label(speaker: str, metadata: Mapping[str, object] | None = None) -> str:
    """PERSON, or ASSISTANT for a role-word speaker or a turn whose ``role`` is an assistant's."""
    role = str((metadata or {}).get("role") or "").casefold()
    if " ".join(speaker.casefold().split()) in ASSISTANT_SPEAKERS or role in ASSISTANT_ROLES:
        return ASSISTANT
    return PERSON


def _occurrences(text: str, surface: str) -> list[tuple[str, str]]:
    """(text before, text after) for each whole-word occurrence of ``surface``."""
    pattern = re.compile(rf"(?<![\w]){re.escape(surface)}(?![\w])")
    return [(text[: m.start()], text[m.end() :]) for m in pattern.finditer(text)]


def cue_label(text: str, surface: str, label: str) -> str | None:
    """The label the turn's own words give ``surface`` (a name the model labelled ``label``),
    or None where they say nothing certain."""
    for before, after in _occurrences(text, surface):
        if _PET_BEFORE.search(before) or _PET_AFTER.match(after) or _PET_AFTER_THE.match(after):
            return ANIMAL
        if _PERSON_BEFORE.search(before) or _PERSON_AFTER.match(after):
            return PERSON
        if after.startswith(("'s", "\u2019s")):
            continue  # "in Harriet's team": the name owns the place
        if _PLACE_VERB_BEFORE.search(before):
            return PLACE if label not in PLACE_LABELS else label
        if _PLACE_BEFORE.search(before) and label not in _KEEP_AFTER_IN:
            return PLACE
    if _ORG_SHAPE.match(surface):
        return "ORG"
    if _PLACE_SHAPE.match(surface):
        return label if label in PLACE_LABELS else "FAC"
    return None


def type_mentions(
    text: str, found: list[tuple[str, str]], speakers: Mapping[str, str], norm: Callable[[str], str]
) -> list[tuple[str, str, bool]]:
    """``found`` (the model's (surface, label) pairs in ``text``) as (surface, label, certain):
    a speaker's name takes the speaker's label (``speakers``: normalised name -> label), a
    cue's label wins over the model's, everything else keeps the model's guess."""
    out = []
    for surface, label in found:
        spoken = speakers.get(norm(surface))
        if spoken is not None:
            out.append((surface, spoken, True))
            continue
        cue = cue_label(text, surface, label)
        out.append((surface, cue, True) if cue is not None else (surface, label, False))
    return out
