"""Which extracted facts may invalidate others: the measured trust table, its one home.

A fact's extractor (``Slot.by``: ``rules``, ``classifier:<embedder>``, ``llm-slots:<model>``,
``llm`` for the chunk extractor) and its slot family (memlane/facts/families.py) decide. Per
(extractor, family), :data:`TABLE` holds the precision and recall measured on the statement
set's *held* half (evals/statements/held.jsonl, never tuned on) by :data:`COMMAND`. Only a pair
measured at precision >= :data:`BAR` may supersede an older fact; any other fact (a pair below
the bar, an extractor or family never measured) is a hint: stored, recalled, ranked, never
invalidating another (memlane/facts/resolve.py).

The figures are small-sample: a family has 12-23 labelled statements in the held half, so
0.95 means no wrong fact among the ones predicted. A pair is trusted only when it predicted at
least :data:`MIN_PREDICTED` facts there (a perfect score on two facts shows nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from memlane.facts.families import family_of
from memlane.facts.slots import Slot

BAR = 0.95  # the precision an (extractor, family) must reach on the held half to supersede
MIN_PREDICTED = 5
COMMAND = "memlane eval statements --split held --extractors rules,classifier --embedder <bge-small|minilm>"


@dataclass(frozen=True, slots=True)
class Measured:
    """One (extractor, family) on the held half: facts predicted, right, labelled, found."""

    predicted: int
    right: int
    labelled: int
    found: int

    @property
    def precision(self) -> float | None:
        return self.right / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.found / self.labelled if self.labelled else None

    @property
    def trusted(self) -> bool:
        p = self.precision
        return p is not None and p >= BAR and self.predicted >= MIN_PREDICTED


# (extractor, family) -> held-half counts, from COMMAND (see docs in the module docstring).
TABLE: dict[tuple[str, str], Measured] = {}


def extractor_of(slot: Slot) -> str:
    """The extractor a stored slot names (facts written before ``by`` existed are the rules')."""
    return slot.by or "rules"


def may_supersede(family: str | None, extractor: str) -> bool:
    """Whether a fact of ``family`` by ``extractor`` may invalidate an older fact: only when
    that pair was measured at precision >= BAR on the held half."""
    if family is None:
        return False
    measured = TABLE.get((extractor, family))
    return measured is not None and measured.trusted


def slot_may_supersede(slot: Slot) -> bool:
    """:func:`may_supersede` for a stored slot."""
    return may_supersede(family_of(slot.predicate), extractor_of(slot))


def table_rows() -> list[tuple[str, str, Measured]]:
    """The table as (extractor, family, measured) rows, sorted."""
    return [(e, f, m) for (e, f), m in sorted(TABLE.items())]
