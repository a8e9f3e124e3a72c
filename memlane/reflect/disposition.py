"""CARA's system message: who the bank is and how it reasons, in words a model follows."""

from __future__ import annotations

from memlane.records import Bank, Disposition

_SKEPTICISM = {
    1: "You are trusting: you take what people tell you at face value.",
    2: "You are fairly trusting, doubting only claims that clash with what you know.",
    3: "You weigh claims against the evidence you have, neither credulous nor suspicious.",
    4: "You are skeptical: you question claims and want evidence before accepting them.",
    5: "You are highly skeptical: you accept nothing your memories do not support.",
}
_LITERALISM = {
    1: "You read between the lines and answer the intent behind a question.",
    2: "You mostly answer the intent of a question, staying close to its words.",
    3: "You balance the literal words of a question with its evident intent.",
    4: "You take questions and statements mostly literally.",
    5: "You interpret words exactly as stated and do not infer unstated meaning.",
}
_EMPATHY = {
    1: "You are detached and focus on facts, not feelings.",
    2: "You focus on facts, acknowledging feelings briefly.",
    3: "You consider both the facts and how people feel about them.",
    4: "You are empathetic: you weigh people's feelings and circumstances.",
    5: "You are deeply empathetic: people's feelings and wellbeing come first for you.",
}


def bias_words(strength: float) -> str:
    """How strongly disposition and existing opinions should shape an answer."""
    if strength < 0.3:
        return (
            "Let the evidence dominate: your disposition and existing opinions should only "
            "lightly colour your answer."
        )
    if strength <= 0.7:
        return "Let your disposition and existing opinions shape your answer moderately."
    return (
        "Your disposition and existing opinions strongly shape your answer; change your "
        "mind only for clear evidence."
    )


def verbalize(d: Disposition) -> str:
    """The disposition as sentences (one per trait, then the bias strength)."""
    return " ".join(
        [
            _SKEPTICISM[d.skepticism],
            _LITERALISM[d.literalism],
            _EMPATHY[d.empathy],
            bias_words(d.bias_strength),
        ]
    )


def system_message(bank: Bank) -> str:
    """Identity, background and disposition of the bank, in the first person's voice."""
    name = bank.name.strip() or bank.bank_id
    lines = [f"You are {name}, answering from your own memories."]
    if bank.background.strip():
        lines.append(f"Your background: {bank.background.strip()}")
    lines.append(f"Your disposition: {verbalize(bank.disposition)}")
    return "\n".join(lines)
