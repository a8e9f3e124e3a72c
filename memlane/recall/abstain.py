"""Abstention: does the recalled evidence support an answer to the query? (issue 13 part 6)

The one home of the rule. Recall still returns every memory it found; only
:attr:`~memlane.model.RecallResult.abstain` (with ``abstain_reason`` and the signals in
``abstain_signals``) says that the evidence does not support an answer, and reflect then says
that the bank does not know instead of answering.

Signals (cheap: word sets over the best ``abstain_depth`` candidates, one lexical probe per
name in the query; about 1 ms a recall):

* **unknown entity**: a name in the query (a capitalised word that is not the first word of
  the question, nor a month, day or question word) that the bank's lexical index does not hold
  at all. Nothing in the bank can be about it.
* **wrong subject**: the query names a person and its content words are matched by the best
  memories, but only by memories whose subject is someone else. A memory's subject is the
  speaker it was retained from (``metadata.speaker``), else the names its text mentions.
  ``coverage`` is the fraction of the query's content words (names and stop words left out,
  crude suffix stemming) a memory holds; ``support_any`` the best coverage among the top
  memories, ``support_named`` the best among those whose subject (or text) is a queried name,
  ``gap = support_any - support_named``. LoCoMo's adversarial questions (category 5) are mostly
  of this kind: "What did Caroline realise after her charity race?" when the race was Melanie's.
* **weak evidence**: the best dense similarity of the query to any memory (``top_cosine``)
  below a floor. The default reranker is the RRF-rank fallback, whose scores carry no
  calibration, so the floor is on the semantic channel's cosine (which also adds the chunk prior).

The optional **LLM gate** (``facts.abstain = "llm"``) asks the reflect role's model whether the
memories answer the question; a transport error or a malformed reply falls back to the rules'
decision (recorded as ``gate: "fallback"`` in the signals).

Calibration (LoCoMo, locomo10.json, the banks of ``memlane backfill``/``memlane eval locomo``
with the rules extractor, MiniLM embedder, no cross-encoder; ``python -m evals.abstention``):
see the constants in :class:`memlane.settings.FactsSettings` and the figures there. The
thresholds were chosen on the even-numbered conversations (conv-26, 41, 43, 47, 49) and
reported on the odd ones and on all ten.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, Callable, Mapping, Sequence

from pydantic import BaseModel

# Capitalised words that are never names of anything a bank holds.
_NOT_NAMES = frozenset(
    """
    i i'm i've i'd i'll what when where who whom whose which why how did do does is are was were
    has have had can could would should will may might shall the a an in on at of for to and or
    but if according after before during since until while with about from by as that this these
    those there then than any some all each every both no not yes please tell describe explain
    name list give january february march april may june july august september october
    november december monday tuesday wednesday thursday friday saturday sunday mr mrs ms dr
    """.split()
)
_STOP = _NOT_NAMES | frozenset(
    """
    be been being it its it's they them their his her hers him he she we us our you your my me
    mine one ones thing things get got go went gone make made take took do done say said so very
    also just like into up out over more most much many other such own same too s t ever still
    kind type sort way time times year years day days week weeks month months first last recent
    recently new old favorite favourite ago now yet
    """.split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
_CAP = re.compile(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)?)(?:'s|s')?\b")
_SPEAKER = re.compile(r"^\s*([^:\n]{1,40}):\s")


def stem(word: str) -> str:
    """Crude suffix stripping: enough to match "painted"/"painting"/"paints" to "paint"."""
    w = word.lower().strip("'-")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def content_words(text: str, drop: frozenset[str] | set[str] = frozenset()) -> set[str]:
    """Stemmed content words of ``text``: stop words and ``drop`` (stemmed names) left out."""
    out = set()
    for m in _WORD.finditer(text):
        w = m.group(0).lower()
        if w in _STOP or len(w) < 3:
            continue
        s = stem(w)
        if s not in drop:
            out.add(s)
    return out


def query_names(query: str) -> list[str]:
    """Names in the query: capitalised words other than question words, months and days; the
    first word only when possessive ("Caroline's ..."), since any first word is capitalised."""
    names: list[str] = []
    for m in _CAP.finditer(query):
        name = m.group(1)
        at_start = not query[: m.start()].strip(" \"'(")
        if name.lower() in _NOT_NAMES:
            continue
        if at_start and not m.group(0).endswith(("'s", "s'")):
            continue
        if name not in names:
            names.append(name)
    return names


def subjects(fields: Mapping[str, Any]) -> set[str]:
    """Who a memory is about: the speaker it was retained from (``metadata.speaker``), else the
    "Speaker: " prefix of its text; lower-cased."""
    meta = fields.get("metadata") or {}
    speaker = meta.get("speaker") if isinstance(meta, Mapping) else None
    if not speaker:
        m = _SPEAKER.match(fields.get("text") or "")
        speaker = m.group(1) if m else None
    return {speaker.lower()} if speaker else set()


def signals(
    query: str,
    top: Sequence[Mapping[str, Any]],
    top_cosine: float | None,
    known: Callable[[str], bool],
) -> dict[str, Any]:
    """The abstention signals of one recall (see the module docstring).

    ``top``: the fields (``text``, ``metadata``) of the best candidates in recall's final order;
    ``top_cosine``: the semantic channel's best score (None without that channel); ``known``:
    whether the bank holds a name at all (a lexical probe)."""
    names = query_names(query)
    unknown = [n for n in names if not known(n)]
    lowered = {n.lower() for n in names}
    drop = {stem(n) for n in names}
    words = content_words(query, drop)
    support_any = support_named = 0.0
    for f in top:
        text = f.get("text") or ""
        if not words:
            break
        cov = len(words & content_words(text, drop)) / len(words)
        support_any = max(support_any, cov)
        if lowered and (subjects(f) & lowered or any(re.search(rf"\b{re.escape(n)}\b", text) for n in names)):
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


def decide(sig: Mapping[str, Any], facts) -> tuple[bool, str | None]:
    """The rules' verdict on ``sig`` under the settings ``facts`` (a FactsSettings):
    ``(abstain, reason)``."""
    if facts.abstain_unknown_entities and sig["unknown_entities"]:
        return True, "no memory mentions " + ", ".join(sig["unknown_entities"])
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


def gate(llm, query: str, texts: Sequence[str]) -> GateReply:
    """Ask ``llm`` whether ``texts`` answer ``query``. Raises on transport errors and on a reply
    that stays malformed after one repair round (callers fall back to the rules)."""
    from memlane.llm.structured import complete_json

    memories = "\n".join(f"- {t}" for t in texts) or "(no memories)"
    messages = [
        {"role": "system", "content": GATE_INSTRUCTIONS},
        {"role": "user", "content": f"Question: {query}\n\nMemories:\n{memories}"},
    ]
    return complete_json(llm, messages, GateReply, max_tokens=200)


_GATES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _gate_llm(recaller) -> Any:
    """The reflect role's LLM, built once per Recaller (None when none is configured)."""
    if recaller not in _GATES:
        from memlane.llm import build_llm

        _GATES[recaller] = build_llm(recaller.settings, "reflect")
    return _GATES[recaller]


def apply(recaller, bank_id: str, req, result, top: Sequence[Mapping[str, Any]], hits, flt) -> None:
    """Set ``result.abstain``, ``abstain_reason`` and ``abstain_signals`` for one recall:
    what :meth:`memlane.recall.pipeline.Recaller.recall` calls when ``facts.abstain`` is on."""
    facts = recaller.settings.facts
    top = list(top[: facts.abstain_depth])
    semantic = hits.get("semantic") or []
    top_cosine = max((h.score for h in semantic), default=None) if "semantic" in hits else None
    search = recaller.search

    def known(name: str) -> bool:
        return bool(search.search_lexical(bank_id, name, 1, flt, ()))

    sig = signals(req.query, top, top_cosine, known)
    abstain, reason = decide(sig, facts)
    if facts.abstain == "llm":
        llm = _gate_llm(recaller)
        if llm is None:
            sig["gate"] = "unconfigured"
        else:
            try:
                reply = gate(llm, req.query, [f.get("text") or "" for f in top])
            except Exception as exc:  # noqa: BLE001 - any gate failure: the rules decide
                sig["gate"] = "fallback"
                sig["gate_error"] = str(exc)[:200]
            else:
                sig["gate"] = "llm"
                abstain = not reply.answerable
                reason = (reply.reason or "the model found no answer in the memories") if abstain else None
    result.abstain, result.abstain_reason, result.abstain_signals = abstain, reason, sig


__all__ = ["GateReply", "apply", "content_words", "decide", "gate", "query_names", "signals", "stem"]
