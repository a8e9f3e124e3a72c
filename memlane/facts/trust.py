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
COMMAND = (
    "memlane eval statements --split held --extractors rules,classifier,llm --embedder <bge-small|minilm>"
)


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


# (extractor, family) -> held-half counts (predicted, right, labelled, found), by COMMAND on
# 2026-11-28, after the rules, the weights and the thresholds were fixed on the calibration
# half. Measured twice: once at commit 60348e2, and again after a fix of the rules' counts
# found by a unit test ("two dogs now" read "now" as the thing); only the count rows moved
# (rules 1/1 -> 2/2, minilm 4/5 -> 5/6).
TABLE: dict[tuple[str, str], Measured] = {
    ("rules", "works_at"): Measured(3, 3, 19, 3),
    ("rules", "job_title"): Measured(9, 9, 16, 9),
    ("rules", "lives_in"): Measured(3, 3, 23, 3),
    ("rules", "relationship"): Measured(2, 2, 14, 2),
    ("rules", "pet"): Measured(4, 4, 14, 5),
    ("rules", "diet"): Measured(4, 4, 13, 4),
    ("rules", "car"): Measured(4, 4, 13, 4),
    ("rules", "studies"): Measured(3, 2, 12, 2),
    ("rules", "favourite"): Measured(0, 0, 14, 0),
    ("rules", "count"): Measured(2, 2, 14, 2),
    ("classifier:bge-small", "works_at"): Measured(6, 6, 19, 6),
    ("classifier:bge-small", "job_title"): Measured(11, 11, 16, 11),
    ("classifier:bge-small", "lives_in"): Measured(9, 7, 23, 7),
    ("classifier:bge-small", "relationship"): Measured(10, 10, 14, 10),
    ("classifier:bge-small", "pet"): Measured(12, 8, 14, 7),
    ("classifier:bge-small", "diet"): Measured(6, 5, 13, 5),
    ("classifier:bge-small", "car"): Measured(11, 9, 13, 9),
    ("classifier:bge-small", "studies"): Measured(7, 7, 12, 7),
    ("classifier:bge-small", "favourite"): Measured(8, 8, 14, 8),
    ("classifier:bge-small", "count"): Measured(8, 7, 14, 7),
    ("classifier:minilm", "works_at"): Measured(5, 5, 19, 5),
    ("classifier:minilm", "job_title"): Measured(11, 11, 16, 11),
    ("classifier:minilm", "lives_in"): Measured(6, 4, 23, 4),
    ("classifier:minilm", "relationship"): Measured(10, 10, 14, 10),
    ("classifier:minilm", "pet"): Measured(8, 6, 14, 4),
    ("classifier:minilm", "diet"): Measured(5, 4, 13, 4),
    ("classifier:minilm", "car"): Measured(8, 6, 13, 6),
    ("classifier:minilm", "studies"): Measured(7, 7, 12, 7),
    ("classifier:minilm", "favourite"): Measured(9, 9, 14, 9),
    ("classifier:minilm", "count"): Measured(6, 5, 14, 5),
    # the focused LLM slot prompt, by model (MEMLANE_LLM__MODEL as served by memlane llm
    # serve-local): memlane eval statements --split held --extractors llm
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "works_at"): Measured(97, 12, 19, 12),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "job_title"): Measured(94, 9, 16, 9),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "lives_in"): Measured(8, 3, 23, 3),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "relationship"): Measured(17, 3, 14, 3),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "pet"): Measured(94, 7, 14, 7),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "diet"): Measured(53, 7, 13, 7),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "car"): Measured(13, 4, 13, 4),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "studies"): Measured(2, 0, 12, 0),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "favourite"): Measured(0, 0, 14, 0),
    ("llm-slots:qwen2.5-coder-0.5b-instruct-q4_k_m", "count"): Measured(10, 2, 14, 2),
    ("llm-slots:smollm2-135m-instruct", "works_at"): Measured(31, 7, 19, 7),
    ("llm-slots:smollm2-135m-instruct", "job_title"): Measured(19, 4, 16, 4),
    ("llm-slots:smollm2-135m-instruct", "lives_in"): Measured(0, 0, 23, 0),
    ("llm-slots:smollm2-135m-instruct", "relationship"): Measured(0, 0, 14, 0),
    ("llm-slots:smollm2-135m-instruct", "pet"): Measured(29, 2, 14, 2),
    ("llm-slots:smollm2-135m-instruct", "diet"): Measured(4, 1, 13, 1),
    ("llm-slots:smollm2-135m-instruct", "car"): Measured(5, 4, 13, 4),
    ("llm-slots:smollm2-135m-instruct", "studies"): Measured(0, 0, 12, 0),
    ("llm-slots:smollm2-135m-instruct", "favourite"): Measured(0, 0, 14, 0),
    ("llm-slots:smollm2-135m-instruct", "count"): Measured(22, 3, 14, 3),
}


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
