"""Cheap-then-escalate conflict resolution between facts of one slot (Engram, section 3.4).

Pure decisions: given a bank's slotted facts, what each one's validity and links should be.
Per slot (subject, predicate), facts in time order; each new fact meets every earlier fact of
the slot that is still valid:

* same value -> **restated**: both stay valid, the newer one ``restates`` the older (evidence:
  its salience grows);
* one object's words contain the other's ("Bristol" / "Clifton, Bristol") -> **elaboration**:
  both valid, the newer ``elaborates`` the older;
* a different value said later -> **superseded**: ``old.invalid_at = new.valid_from``,
  ``old.superseded_by = new``, ``new.supersedes = old`` (never deleted);
* a different value said later by an extractor not trusted for the slot (memlane/facts/trust.py:
  below 0.95 precision on the held statement set, or never measured) -> **untrusted**: both
  stay valid; the newer one records ``would_supersede`` the older (a hint recall may read),
  the older one is left as it was;
* said at the same instant in different documents -> **ambiguous**, as is a pair of one subject
  whose predicates differ but embed close (a likely update: "resides_in" / "lives_in").
  Ambiguous pairs go to the adjudicator when one is configured; without one, or when it fails,
  both stay valid and the older is marked ``possibly_superseded_by`` the newer (recall ranks it
  below its sibling).

A fact a user invalidated by hand (``invalid_at`` set, not by resolution) takes no part.
Re-running over the same facts gives the same decisions (idempotent); a verdict the
adjudicator gave is kept on the newer fact and reused.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

from memlane.facts.slots import Slot, norm_text
from memlane.facts.trust import slot_may_supersede

Verdict = Literal["supersedes", "elaboration", "both_valid"]
# A judge of one ambiguous (older, newer) pair: its verdict, or None when it could not decide.
Adjudicator = Callable[["SlotFact", "SlotFact"], "Verdict | None"]

# The predicates the rules fill and the LLM extractor is asked to use; a pair of them is never
# a "similar predicate" (owns:dog and owns:cat embed close but are two slots).
CANONICAL = frozenset(
    {"lives_in", "works_at", "job_title", "relationship", "plans", "pet", "diet", "car", "studies"}
)
CANONICAL_PREFIXES = ("owns:", "favourite:")


# Predicates a subject holds several values of at once: never superseded, only restated.
# A second pet is another pet, not a replaced one.
MULTI_VALUED = frozenset({"plans", "pet"})


def is_canonical(predicate: str) -> bool:
    return predicate in CANONICAL or predicate.startswith(CANONICAL_PREFIXES)


@dataclass(slots=True)
class SlotFact:
    """One slotted fact as resolution sees it."""

    id: str
    slot: Slot
    at: float  # when it became true: valid_from, else mentioned_at (epoch seconds)
    document_id: str = ""
    text: str = ""
    adjudicated: dict[str, str] = field(default_factory=dict)  # earlier verdicts, by older id


@dataclass(slots=True)
class Decision:
    """What resolution wants one fact's links and validity to be."""

    invalid_at: float | None = None
    superseded_by: str | None = None
    supersedes: str | None = None
    restates: str | None = None
    elaborates: str | None = None
    possibly_superseded_by: str | None = None
    would_supersede: str | None = None  # an untrusted newer value's hint (see the docstring)
    reinforced: int = 0  # earlier facts of the slot that said the same (salience)
    adjudicated: dict[str, str] = field(default_factory=dict)


@dataclass
class Resolution:
    decisions: dict[str, Decision]
    outcomes: Counter = field(default_factory=Counter)  # superseded, restated, elaboration, ...


def _elaborates(a: Slot, b: Slot) -> bool:
    if a.count is not None or b.count is not None:
        return False
    wa, wb = set(norm_text(a.object).split()), set(norm_text(b.object).split())
    return bool(wa and wb) and wa != wb and (wa <= wb or wb <= wa)


def _order(f: SlotFact) -> tuple:
    return (f.at, f.slot.order, f.id)


def resolve(
    facts: Sequence[SlotFact],
    *,
    adjudicate: Adjudicator | None = None,
    similar_predicates: Callable[[list[str]], set[tuple[str, str]]] | None = None,
    trusted: Callable[[Slot], bool] = slot_may_supersede,
) -> Resolution:
    """Decide every fact's validity and links (see the module docstring). ``similar_predicates``
    returns the pairs of a subject's predicates that embed close (the likely-update tier);
    ``trusted`` whether a fact's slot and extractor may invalidate another (the trust table)."""
    out = Resolution({f.id: Decision() for f in facts})
    groups: dict[str, list[SlotFact]] = defaultdict(list)
    for f in facts:
        groups[f.slot.key].append(f)

    def ambiguous(old: SlotFact, new: SlotFact) -> None:
        d_old, d_new = out.decisions[old.id], out.decisions[new.id]
        verdict = new.adjudicated.get(old.id)
        if verdict is None and adjudicate is not None:
            verdict = adjudicate(old, new)
            out.outcomes["adjudicated"] += 1
        if verdict is not None:
            d_new.adjudicated[old.id] = verdict
        if verdict == "supersedes":
            supersede(old, new)
        elif verdict == "elaboration":
            d_new.elaborates = old.id
            out.outcomes["elaboration"] += 1
        elif verdict == "both_valid":
            out.outcomes["both_valid"] += 1
        else:
            d_old.possibly_superseded_by = new.id
            out.outcomes["ambiguous"] += 1

    def supersede(old: SlotFact, new: SlotFact) -> None:
        if not trusted(new.slot):
            out.decisions[new.id].would_supersede = old.id
            out.outcomes["untrusted"] += 1
            return
        d_old = out.decisions[old.id]
        d_old.invalid_at, d_old.superseded_by = new.at, new.id
        out.decisions[new.id].supersedes = old.id
        out.outcomes["superseded"] += 1

    for group in groups.values():
        group.sort(key=_order)
        valid: list[SlotFact] = []
        for new in group:
            for old in list(valid):
                if new.slot.predicate in MULTI_VALUED and old.slot.value != new.slot.value:
                    continue  # another plan, not a changed one
                if old.slot.value == new.slot.value:
                    d_new = out.decisions[new.id]
                    d_new.restates = old.id
                    d_new.reinforced = max(d_new.reinforced, out.decisions[old.id].reinforced + 1)
                    out.outcomes["restated"] += 1
                elif _elaborates(old.slot, new.slot):
                    out.decisions[new.id].elaborates = old.id
                    out.outcomes["elaboration"] += 1
                elif old.at == new.at and old.document_id != new.document_id:
                    ambiguous(old, new)
                    if out.decisions[old.id].invalid_at is not None:
                        valid.remove(old)
                else:
                    supersede(old, new)
                    if out.decisions[old.id].invalid_at is not None:
                        valid.remove(old)
            valid.append(new)

    if similar_predicates is not None:
        _likely_updates(groups, out, similar_predicates, ambiguous)
    return out


def _likely_updates(groups, out: Resolution, similar_predicates, ambiguous) -> None:
    """Same subject, predicates that embed close, at least one of them not canonical: the
    latest valid facts of the two are a likely update of one another."""
    by_subject: dict[str, dict[str, SlotFact]] = defaultdict(dict)
    for group in groups.values():
        alive = [f for f in group if out.decisions[f.id].invalid_at is None]
        if alive:
            latest = max(alive, key=_order)
            by_subject[norm_text(latest.slot.subject)][latest.slot.predicate] = latest
    for predicates in by_subject.values():
        names = sorted(predicates)
        if len(names) < 2 or all(is_canonical(p) for p in names):
            continue
        for a, b in sorted(similar_predicates(names)):
            if is_canonical(a) and is_canonical(b):
                continue
            fa, fb = predicates[a], predicates[b]
            if fa.slot.value == fb.slot.value:
                continue
            old, new = sorted((fa, fb), key=_order)
            ambiguous(old, new)
