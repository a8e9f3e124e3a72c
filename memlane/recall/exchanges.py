"""Who said what, and the exchange a reply belongs to: the ordering rules recall applies after
its model, on the memories' turn ids, speakers and forms.

* A question answered in one of the next turns: "r u driving up or getting the coach" /
  "coach". The question holds the words a memory question repeats, the reply holds the answer;
  the two read as one exchange, ranked where its better member is, the reply first.
* The one the question names as having said it ("What did you suggest?": the assistant) first,
  and among their memories what they put forward before what they turned down ("not the blue
  one") or mostly asked ("Do you have shoes yet?").
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from memlane.query.sayer import offers, rejects, sayer
from memlane.query.words import is_assistant
from memlane.recall.traits import said_text, speaker_of, traits_of

# How far after a question its reply may come: in a group chat another question or a remark
# often comes between ("Pia what time do we set up" / "has anyone seen the van keys" / "11").
# No measurement picked 3 over another value.
REPLY_WITHIN = 3
# A reply short enough that its own words cannot match the question it answers ("coach", "the
# blue one, obviously"): a longer one is ranked by its own words, and lifting it to its
# question's place put an assistant's answer to a follow-up question above its recommendation
# (2 of the assistant set's 14 "what did you suggest" questions). No measurement picked 8 over
# another value.
SHORT_REPLY = 8
# A turn counts as asking from half its sentences questions asked outright ("Great start. Do
# you have shoes yet?"; memlane/recall/traits.py asking_share), or for a reply, half its
# sentences ending in "?" (question_share). No measurement picked 0.5 over another value.
ASKS = 0.5


def said_by(speaker: str, who: str) -> bool:
    """Whether ``speaker`` is the one :func:`memlane.query.sayer.sayer` names: the assistant,
    the user (any speaker but the assistant) or a person by (first) name."""
    if who == "assistant":
        return is_assistant(speaker)
    if who == "user":
        return bool(speaker) and not is_assistant(speaker)
    low = speaker.casefold()
    return low == who.casefold() or low.split()[:1] == [who.casefold()]


def neighbour(fields: Mapping[str, Any], step: int) -> str:
    """The id of the turn ``step`` places from the memory's first source turn in its session
    ("D3:4" -> "D3:3" for -1), "" when its turn id has no "<session>:<n>" form."""
    turns = fields.get("source_turns") or ()
    if not turns:
        return ""
    session, sep, n = str(turns[0]).rpartition(":")
    return f"{session}:{int(n) + step}" if sep and n.isdigit() else ""


def replies_first(ids: list[str], fields: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``ids`` with each turn that only asks (every sentence asked outright: ``asking_share`` of
    memlane/recall/traits.py) preceded by its short reply where the reply is among them: one of
    the next turns, by another speaker, not itself asking (:func:`_reply`). The pair takes the
    better place of the two; everything else keeps its order.

    Only a turn that asks and states nothing gives way: "which hostel for tuesday" has no answer
    of its own, while "Bouldering is a great start. Do you have shoes yet?" and "I'm moving on
    the 5th, can you help me plan?" keep their place (they state something). Measured on BEAM,
    where users ask in long one-sentence questions that carry the facts asked about later,
    counting every turn whose sentences all end in "?" moved 3 answers from first place."""
    by_turn = turns_of(ids, fields)
    out: list[str] = []
    placed: set[str] = set()
    for c in ids:
        if c in placed:
            continue
        f = fields.get(c) or {}
        reply = _reply(f, fields, by_turn)
        if reply is not None and reply not in placed:
            out.append(reply)
            placed.add(reply)
        out.append(c)
        placed.add(c)
    return out


def turns_of(ids: Iterable[str], fields: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each source turn id of ``ids``' memories -> the first memory holding it."""
    by_turn: dict[str, str] = {}
    for c in ids:
        for turn in fields.get(c, {}).get("source_turns") or ():
            by_turn.setdefault(str(turn), c)
    return by_turn


def asked_of(
    reply: Mapping[str, Any], fields: Mapping[str, Mapping[str, Any]], by_turn: Mapping[str, str]
) -> str | None:
    """The candidate a short reply answers (:data:`SHORT_REPLY` words at most): the nearest of
    the :data:`REPLY_WITHIN` turns before it among the candidates said by another speaker
    that asks (half its sentences questions), the one that names the replier first, or None.
    The cross-encoder reads the two as one text: "coach" alone answers nothing."""
    if _words(reply) > SHORT_REPLY:
        return None
    speaker = traits_of(reply).speaker
    name = speaker.casefold().split()[:1]
    asking: list[tuple[str, Any]] = []
    for step in range(1, REPLY_WITHIN + 1):
        c = by_turn.get(neighbour(reply, -step))
        if c is None:
            continue
        said = traits_of(fields.get(c) or {})
        if said.speaker != speaker and said.question >= ASKS:
            asking.append((c, said))
    # the one addressed to the replier by name ("Pia what time do we set up"), else the nearest
    named = [c for c, said in asking if name and re.search(rf"\b{re.escape(name[0])}\b", said.folded)]
    first = named or [c for c, _ in asking]
    return first[0] if first else None


def _reply(
    asked: Mapping[str, Any], fields: Mapping[str, Mapping[str, Any]], by_turn: Mapping[str, str]
) -> str | None:
    """The candidate that answers ``asked`` when it only asks: the first of the next
    :data:`REPLY_WITHIN` turns among the candidates said by another speaker and not itself
    asking, where it is short (:data:`SHORT_REPLY` words at most), or None."""
    question = traits_of(asked)
    if question.asking < 1.0:
        return None
    for step in range(1, REPLY_WITHIN + 1):
        c = by_turn.get(neighbour(asked, step))
        if c is None:
            continue
        said = traits_of(fields.get(c) or {})
        if said.speaker != question.speaker and said.question < ASKS:
            return c if _words(fields.get(c) or {}) <= SHORT_REPLY else None
    return None


def _asks_without_offering(fields: Mapping[str, Any]) -> bool:
    """Half its sentences or more ask outright, and it does not put anything forward: "How
    about the coach?" suggests."""
    return traits_of(fields).asking >= ASKS and not offers(said_text(fields))


def _words(fields: Mapping[str, Any]) -> int:
    return len(said_text(fields).split())


def sayer_first(ids: list[str], fields: Mapping[str, Mapping[str, Any]], question: str) -> list[str]:
    """``ids`` with the memories of the one the question names as having said it first ("What
    book did you recommend?": the assistant's; "What did Sam suggest?": Sam's), each group in
    its own order, except that their turns that turn an option down ("not the blue one"), then
    those that mostly ask outright, come after those that state: neither says what was
    suggested, unless the question itself suggests ("How about the coach?"). A question names
    a sayer only with a verb or noun of saying ("suggest", "recommendation"). Unchanged when
    the question names no one or none of them is theirs.

    A rule, not a feature alone: the learned ranker reads the same signal (``sayer_match``),
    but trained without the assistant-heavy answer set it had few such questions, and the
    assistant's turns were mostly traps in the rest. Leave-one-source-out at mid (rows of
    d0f350b, docs/results.md): that set's ``assistant_said`` questions 0/14 first -> 14/14,
    no other set's P@1 changed (LoCoMo 0.446, the team's 0.557, the friends' 0.417)."""
    who = sayer(question)
    if who is None:
        return list(ids)
    theirs = [c for c in ids if said_by(speaker_of(fields.get(c) or {}), who)]
    if not theirs or len(theirs) == len(ids):
        return list(ids)
    asking = {c for c in theirs if _asks_without_offering(fields.get(c) or {})}
    turned_down = {c for c in theirs if c not in asking and rejects(said_text(fields.get(c) or {}))}
    later = asking | turned_down
    theirs = (
        [c for c in theirs if c not in later]
        + [c for c in theirs if c in turned_down]
        + [c for c in theirs if c in asking]
    )
    mine = set(theirs)
    return theirs + [c for c in ids if c not in mine]
