"""The LLM slot extractor: one focused prompt per statement, asking only for the speaker's own
current values of the slot families (memlane/facts/families.py).

Unlike the chunk extractor (memlane/retain/extract_llm.py: 2-5 narrative facts per chunk, a
slot on the side), the prompt here names the families, says what is *not* a fact (another
person's, a plan, a wish, a question, a negation, the past, a hobby) and shows three examples
written for it. The reply is validated JSON; a reply that fails after its repair round, or a
server that cannot be reached, gives no facts (logged and counted), never a guess. The facts
carry ``by = "llm-slots:<model>"`` so that trust (memlane/facts/trust.py) is per model. A fact
whose value the message does not contain is dropped (:func:`grounded`).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memlane.facts import vocab
from memlane.facts.families import FAMILIES
from memlane.facts.slots import Slot, norm_predicate, norm_text
from memlane.llm.errors import LLMError
from memlane.llm.structured import complete_json
from memlane.temporal.vocabulary import NUM_WORDS

log = logging.getLogger(__name__)

BY_PREFIX = "llm-slots:"
MAX_FACTS = 6

Family = Literal[
    "works_at", "job_title", "lives_in", "relationship", "pet", "diet", "car", "studies", "favourite", "count"
]


class SlotFactReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    slot: Family
    category: str | None = Field(None, description="favourite: what kind of thing; count: the thing counted")
    value: str = Field(min_length=1, max_length=120)


class SlotsReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    facts: list[SlotFactReply]  # more than MAX_FACTS are cut, not refused (a small model lists every slot)


assert set(SlotFactReply.model_fields["slot"].annotation.__args__) == set(FAMILIES)  # type: ignore[union-attr]

SYSTEM = """You read one message that a person (the speaker) wrote to an assistant, and list the
facts it states about the speaker's OWN, CURRENT situation, in these slots only:
- works_at: the organisation the speaker works for now
- job_title: the speaker's job now
- lives_in: the place where the speaker lives now
- relationship: "married to NAME", "engaged to NAME", "dating NAME", "single", "divorced", "widowed"
- pet: a pet the speaker has now: its species and name
- diet: the speaker's diet (vegan, vegetarian, halal, gluten-free, ...)
- car: the car the speaker has now: make and model
- studies: what and where the speaker studies now (a degree, not a hobby class)
- favourite: one of the speaker's favourite things; category says what kind of thing
- count: how many of something the speaker has; category is the thing, value the number in digits
Do NOT list: other people's facts (a friend's job, a sister's city, a son's studies), plans and
things starting later, wishes and hypotheticals ("if I..."), questions, what is no longer true,
the past ("used to", "grew up in"), hobbies, classes and volunteering, opinions about places.
Most messages state one such fact or none; never fill a slot the message does not speak of.
Values are the shortest words the message itself uses. Reply with JSON only: {"facts": [...]}, each
{"slot": ..., "category": ... or null, "value": ...}; {"facts": []} when there is none."""

# Examples written for this prompt (none from the statement set).
_EXAMPLES = (
    (
        "Ben: Morning! Still at Halvorsen Foods, now as the night-shift supervisor. My brother just moved to Leeds.",
        '{"facts": [{"slot": "works_at", "category": null, "value": "Halvorsen Foods"}, '
        '{"slot": "job_title", "category": null, "value": "night-shift supervisor"}]}',
    ),
    (
        "Ana: If I ever got a dog I'd call it Pickles. Do you think a flat in Porto is too small for one?",
        '{"facts": []}',
    ),
    (
        "Mia: My sister works at Nordbank, and I start at the Corner Bakery on Monday! Vegan food is overrated though.",
        '{"facts": []}',
    ),
    (
        "Raj: We've got three kids and a very old beagle called Toffee. Been pescatarian for years.",
        '{"facts": [{"slot": "count", "category": "children", "value": "3"}, '
        '{"slot": "pet", "category": null, "value": "dog Toffee"}, '
        '{"slot": "diet", "category": null, "value": "pescatarian"}]}',
    ),
)


def slot_messages(text: str, speaker: str, before: str = "") -> list[dict[str, str]]:
    """The chat messages that ask for one statement's slot facts."""
    messages = [{"role": "system", "content": SYSTEM}]
    for question, answer in _EXAMPLES:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    line = f"{speaker}: {text}"
    if before:
        line = f"(the assistant had said: {before.removeprefix('Assistant:').strip()})\n{line}"
    messages.append({"role": "user", "content": line})
    return messages


_STATUS_WORDS = frozenset("married engaged dating single divorced widowed separated to".split())


def grounded(fact: SlotFactReply, text: str) -> bool:
    """Whether the message says the value: its words (a count's number, a relationship's
    name) are in the text. A small model copies its examples' values into unrelated
    statements; a value the message does not contain is never its fact."""
    said = set(norm_text(text).split())
    value = norm_text(fact.value)
    words = value.split()
    if not words:
        return False
    if fact.slot == "count":
        n = words[0]
        return n in said or any(NUM_WORDS.get(w) == int(n) for w in said if n.isdigit())
    if fact.slot == "diet":
        return any(vocab.DIETS.get(w) == fact.value.strip().lower() for w in said) or set(words) <= said
    if fact.slot == "relationship":
        rest = [w for w in words if w not in _STATUS_WORDS]
        return set(rest) <= said if rest else True
    if fact.slot == "pet":
        return bool(set(words) & said)
    return set(words) <= said


def _slot(fact: SlotFactReply, speaker: str, by: str, order: int) -> Slot | None:
    value = fact.value.strip()
    category = norm_predicate(fact.category or "") or None
    if fact.slot == "count":
        digits = value.split()[0] if value.split() else ""
        if not digits.isdigit():
            return None  # a count that is not a number is no count
        return Slot(speaker, f"owns:{category or 'things'}", digits, count=int(digits), by=by, order=order)
    if fact.slot == "favourite":
        return Slot(speaker, f"favourite:{category or 'thing'}", value, by=by, order=order)
    return Slot(speaker, fact.slot, value, by=by, order=order)


class LLMSlotExtractor:
    """Slot facts of one statement from a chat model (``llm``: memlane/llm's client)."""

    def __init__(self, llm, model: str, *, max_tokens: int = 160) -> None:
        self.llm = llm
        self.by = f"{BY_PREFIX}{model}"
        self.max_tokens = max_tokens
        self.stats: Counter[str] = Counter()

    def extract(self, text: str, speaker: str, *, before: str = "", order: int = 0) -> list[Slot]:
        try:
            reply = complete_json(
                self.llm, slot_messages(text, speaker, before), SlotsReply, max_tokens=self.max_tokens
            )
        except (LLMError, ValueError) as exc:
            self.stats["failed"] += 1
            log.warning("slot extraction failed for %r: %s", text[:60], exc)
            return []
        self.stats["answered"] += 1
        kept = [f for f in reply.facts[:MAX_FACTS] if grounded(f, text)]
        self.stats["ungrounded"] += min(len(reply.facts), MAX_FACTS) - len(kept)
        slots = [_slot(f, speaker, self.by, order) for f in kept]
        return [s for s in slots if s is not None]
