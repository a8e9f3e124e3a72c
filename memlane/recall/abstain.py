"""Abstention: does the recalled evidence support an answer to the query? (issue 13 part 6)

The one home of the rule. Recall still returns every memory it found; only
:attr:`~memlane.records.RecallResult.abstain` (with ``abstain_reason`` and the signals in
``abstain_signals``) says that the evidence does not support an answer, and reflect then says
that the bank does not know instead of answering.

Signals (cheap: word sets over the best ``abstain_depth`` candidates, one lexical probe per
name in the query; about 1 ms a recall):

* **unknown entity**: the names in the query (its analysis's name words, memlane/query/:
  capitalised words that are not the first word of the question, nor a month, day, question
  or stop word) that the bank's lexical index does not hold at all. By default recall abstains when *no* name of the query is known (nothing in the
  bank can be about it); ``"any"`` (abstain when one name is unknown) is not the default: on
  LoCoMo it fired on 24 of 1540 answerable questions (titles and places said only in shared
  images, misspellings such as "Deboran") for 10 of 446 adversarial ones.
* **wrong subject**: the query names a person and its content words are matched by the best
  memories, but only by memories whose subject is someone else. A memory's subject is the
  speaker it was retained from (``metadata.speaker``), else the names its text mentions.
  ``coverage`` is the fraction of the query's content words (names, stop and vague words left
  out, crude suffix stemming: memlane/query/words.py says why not Snowball) a memory holds;
  ``support_any`` the best coverage among the top
  memories, ``support_named`` the best among those whose subject (or text) is a queried name,
  ``gap = support_any - support_named``. LoCoMo's adversarial questions (category 5) are mostly
  of this kind: "What did Caroline realise after her charity race?" when the race was Melanie's.
* **weak evidence**: the best dense similarity of the query to any memory (``top_cosine``)
  below a floor. The default reranker is the RRF-rank fallback, whose scores carry no
  calibration, so the floor is on the semantic channel's cosine (which also adds the chunk prior).

The optional **LLM gate** (``facts.abstain = "llm"``) asks the reflect role's model whether the
memories answer the question; a transport error or a malformed reply falls back to the rules'
decision (recorded as ``gate: "fallback"`` in the signals).

Calibration (``python -m evals.abstention locomo10.json --data-dir DIR``, or ``--from-signals``
on the rows it wrote; LoCoMo banks built by ``memlane eval locomo`` with the rules extractor,
MiniLM embedder, no cross-encoder, Nov 2026). The thresholds were swept on the calibration
half (conv-26, 41, 43, 47, 49: 1020 questions) for the highest category-5 abstain rate with
categories 1-4 at most 3.5 %, then reported on the held-out half (conv-30, 42, 44, 48, 50:
966) and on all 1986. The 1.5-point margin under the 5 % target is there because the held-out
half runs 1-2 points higher: calibrated at <= 5 % (gap 0.30, named_max 0.67) the held-out
categories 1-4 abstain 7.2 %, at <= 4 % (gap 0.20, named_max 0.4) 5.1 % (that margin was set
after seeing those two held-out figures).

* shipped since Nov 25 2026: ``abstain_gap=0.15``, ``abstain_named_max=0.34``, derived on the
  calibration half alone by ``python -m evals.abstention_calibrate --cosine 0`` (a sha256 rule
  splits the questions, the margin under 5 % is set by cross-fold inside that half) from the
  signals of this code: held-out half (954 questions) category 5 28.3 %, categories 1-4 3.8 %,
  precision 65.9 %; all 1986: 31.2 % / 4.4 % / 67.1 %. That held-out half had been read before
  (a run on the previous commit's signals, docs/results.md).
* before (the <= 3.5 % point): ``abstain_gap=0.25``, ``abstain_named_max=0.4``, depth 10,
  unknown names "all", cosine floor 0.0. Category 5 abstains 30.2 % (calibration) / 25.7 %
  (held-out) / 28.0 % (all); categories 1-4 3.0 % / 4.1 % / 3.6 % (precision of ``abstain``
  for category 5 against 1-4: 74.5 % / 64.0 % / 69.4 %).
* re-measured end to end with this code (recall reading its own top 10, not the returned
  memories the sweep above re-read): the shipped point abstains on 29.6 % of category 5 and
  4.0 % of 1-4 on all ten, 28.0 % and 4.4 % on the held-out half (category 1 alone 6.9 %
  there); the step's p50 0.63 ms, p95 0.91 ms. A sweep on those rows picks gap 0.30,
  named_max 0.4 and a cosine floor of 0.6 (held-out 25.7 % / 4.3 %): not adopted, for want
  of time to check it (Nov 24 2026).
* the issue's target (>= 60 % of category 5 at <= 5 % of 1-4) is NOT reached: most
  adversarial questions are about a detail both speakers talked around, or one no word of the
  question pins to the other speaker, which word overlap cannot see.
* the dense-similarity floor separates nothing on LoCoMo: the best cosine of category-5
  questions is distributed like that of 1-4 (5th percentile 0.675 against 0.64-0.73); a floor
  of 0.7 abstains on 7.2 % of category 5 and 5.2 % of 1-4. It stays at 0.0.
* unknown names: "all" fired on 1 of 1540 answerable questions and on none of category 5
  (LoCoMo's questions name its two speakers); "any" on 24 answerable and 10 adversarial.
* cost: the step's p50 0.71 ms, p95 4.8 ms per recall (recall's p50 is about 100 ms).
* LongMemEval (longmemeval_s_dev60.json, ``--lme``): the one ``_abs`` question does not
  abstain (0/1: "What did I bake for my uncle's birthday party?" names no one, and its best
  memories are not far off); 1 of 59 answerable questions abstains (an unknown name: no
  memory says "Miami"). Step p50 1.6 ms.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

from pydantic import BaseModel

from memlane.interfaces import LLM, Hit, SearchBackend, UnitFilter
from memlane.query.analysis import QueryAnalysis, as_analysis
from memlane.query.words import content_stems
from memlane.records import RecallResult
from memlane.settings import FactsSettings


def subjects(fields: Mapping[str, Any]) -> set[str]:
    """Who a memory is about when retain knew: the speaker it was retained from
    (``metadata.speaker``), lower-cased; empty otherwise. (Not a "Name: " prefix of the text:
    an extracted fact such as "Note: ..." would name a subject that is none.)"""
    meta = fields.get("metadata") or {}
    speaker = meta.get("speaker") if isinstance(meta, Mapping) else None
    return {str(speaker).lower()} if speaker else set()


def about(fields: Mapping[str, Any], text: str, names: Sequence[str], persons: set[str]) -> bool:
    """Whether a memory is about one of the queried names: when some queried name is a
    speaker (``persons``), by the memory's speaker (a turn that only mentions the name,
    "Melanie: thanks, Caroline! I ran a charity race", is Melanie's); else by a mention. Measured on LoCoMo (depth 10, calibration half,
    cat 1-4 <= 5 %): speaker-first 34.9 % of category 5, counting mentions too 28.4 %
    (both at depth 10)."""
    who = subjects(fields)
    if persons and who:
        return bool(who & persons)
    return any(re.search(rf"\b{re.escape(n)}\b", text) for n in names)


def signals(
    query: QueryAnalysis | str,
    top: Sequence[Mapping[str, Any]],
    top_cosine: float | None,
    known: Callable[[str], bool],
) -> dict[str, Any]:
    """The abstention signals of one recall (see the module docstring).

    ``query``: the query's analysis (or its text); ``top``: the fields (``text``, ``metadata``)
    of the best candidates in recall's final order; ``top_cosine``: the semantic channel's best
    score (None without that channel); ``known``: whether the bank holds a name at all (a
    lexical probe)."""
    q = as_analysis(query)
    names = q.name_words
    unknown = [n for n in names if not known(n)]
    lowered = {n.lower() for n in names}
    words = q.content
    # Only names that are subjects of the top memories (speakers) make a wrong-subject
    # question; other names (a cat, an airline, a place) count as support by mention. Without
    # this, a bank whose speakers are "user" and "assistant" (LongMemEval) abstained on 13 of
    # 59 answerable questions ("How long have I had my cat, Luna?").
    speakers = set().union(*(subjects(f) for f in top)) if top else set()
    persons = lowered & speakers
    support_any = support_named = 0.0
    for f in top:
        text = f.get("text") or ""
        if not words:
            break
        cov = len(words & content_stems(text, q.name_stems)) / len(words)
        support_any = max(support_any, cov)
        if lowered and about(f, text, names, persons):
            support_named = max(support_named, cov)
    return {
        "names": names,
        "unknown_entities": unknown,
        "content_words": len(words),
        "support_any": round(support_any, 4),
        "support_named": round(support_named, 4) if lowered else None,
        "gap": round(support_any - support_named, 4) if lowered else 0.0,
        "top_cosine": None if top_cosine is None else round(float(top_cosine), 4),
    }


def decide(sig: Mapping[str, Any], facts: FactsSettings) -> tuple[bool, str | None]:
    """The rules' verdict on ``sig`` under the settings ``facts``: ``(abstain, reason)``."""
    unknown = sig["unknown_entities"]
    rule = facts.abstain_unknown_entities
    if unknown and (rule == "any" or (rule == "all" and len(unknown) == len(sig["names"]))):
        return True, "no memory mentions " + ", ".join(unknown)
    named = sig.get("support_named")
    if named is not None and sig["gap"] >= facts.abstain_gap and named <= facts.abstain_named_max:
        who = ", ".join(sig["names"])
        return True, (
            f"the memories that match the question are about someone other than {who} "
            f"(best match {sig['support_any']:.2f}, about {who} {named:.2f})"
        )
    cos = sig.get("top_cosine")
    if cos is not None and cos < facts.abstain_min_cosine:
        return True, f"no memory is close to the question (best similarity {cos:.2f})"
    return False, None


class GateReply(BaseModel):
    """The LLM gate's reply."""

    answerable: bool
    reason: str = ""


GATE_INSTRUCTIONS = (
    "You check whether a question can be answered from the memories given. Answer only from "
    "them. If they do not say what the question asks (including when they say it about a "
    "different person, thing or time than the question names), the question is not answerable. "
    'Reply with a JSON object: {"answerable": true|false, "reason": "<one short sentence>"}.'
)


def gate(llm: LLM, query: str, texts: Sequence[str]) -> GateReply:
    """Ask ``llm`` whether ``texts`` answer ``query``. Raises on transport errors and on a reply
    that stays malformed after one repair round (callers fall back to the rules)."""
    from memlane.llm.structured import complete_json

    memories = "\n".join(f"- {t}" for t in texts) or "(no memories)"
    messages = [
        {"role": "system", "content": GATE_INSTRUCTIONS},
        {"role": "user", "content": f"Question: {query}\n\nMemories:\n{memories}"},
    ]
    return complete_json(llm, messages, GateReply, max_tokens=200)


class Abstention:
    """The abstention step of recall: the rules over :func:`signals`, and the LLM gate when
    ``facts.abstain`` is ``"llm"``. ``gate_llm`` returns the gate's model (the reflect role's;
    None when none is configured), called on the first gated recall."""

    def __init__(self, facts: FactsSettings, gate_llm: Callable[[], LLM | None]) -> None:
        self.facts = facts
        self.gate_llm = gate_llm

    def apply(
        self,
        search: SearchBackend,
        bank_id: str,
        query: QueryAnalysis,
        result: RecallResult,
        top: Sequence[Mapping[str, Any]],
        hits: Mapping[str, Sequence[Hit]],
        flt: UnitFilter,
    ) -> None:
        """Set ``result.abstain``, ``abstain_reason`` and ``abstain_signals`` for one recall:
        ``top`` are the candidates' fields in recall's final order, ``hits`` the channel lists,
        ``search`` and ``flt`` what the names are probed in."""
        facts = self.facts
        top = list(top[: facts.abstain_depth])
        semantic = hits.get("semantic") or []
        top_cosine = max((h.score for h in semantic), default=None) if "semantic" in hits else None

        def known(name: str) -> bool:
            # without a lexical search (a cold bank on Milvus 2.3) a name counts as known: no
            # abstention for a name it cannot check
            return not search.has_lexical or bool(search.search_lexical(bank_id, name, 1, flt, ()))

        sig = signals(query, top, top_cosine, known)
        abstain, reason = decide(sig, facts)
        if facts.abstain == "llm":
            llm = self.gate_llm()
            if llm is None:
                sig["gate"] = "unconfigured"
            else:
                try:
                    reply = gate(llm, query.text, [f.get("text") or "" for f in top])
                except Exception as exc:  # noqa: BLE001 - any gate failure: the rules decide
                    sig["gate"] = "fallback"
                    sig["gate_error"] = str(exc)[:200]
                else:
                    sig["gate"] = "llm"
                    abstain = not reply.answerable
                    reason = (
                        (reply.reason or "the model found no answer in the memories") if abstain else None
                    )
        result.abstain, result.abstain_reason, result.abstain_signals = abstain, reason, sig


__all__ = ["Abstention", "GateReply", "decide", "gate", "signals"]
