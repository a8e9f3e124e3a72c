"""The slot extractors the statement eval measures (``memlane eval statements --extractors``),
each as an :data:`evals.statements.Extractor`: statements in, predicted (slot, value) facts out.

* ``rules``: memlane/facts/patterns.py ``find_facts``;
* ``classifier``: the learned extractor (memlane/facts/learned.py) with the shipped weights of
  one embedder, on the vector of ``"Speaker: text"`` as retain embeds a turn;
* ``llm``: memlane/facts/llm_slots.py against the consolidation role's model server, one
  statement at a time (a row per statement is appended to ``log`` as it is answered, so a run
  that is stopped keeps what it did).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Sequence

from evals.statements import Extractor, Predicted, Statement
from memlane.facts.families import labelled
from memlane.facts.slots import Slot

EXTRACTORS = ("rules", "classifier", "llm")


def _predicted(slots: Sequence[Slot]) -> list[Predicted]:
    return [Predicted(*labelled(s)) for s in slots]


def rules_extractor(statements: Sequence[Statement]) -> list[list[Predicted]]:
    from memlane.facts.patterns import find_facts

    return [_predicted(find_facts(s.text, s.speaker)) for s in statements]


def classifier_extractor(settings, embedder_name: str) -> Extractor:
    """The learned extractor of ``embedder_name``'s shipped weights; ValueError when there
    are none."""
    from memlane.facts.learned import LearnedExtractor, SpacyEntities
    from memlane.facts.slot_weights import SlotWeights, weights_path
    from memlane.models.embedder import build_embedder

    clf = SlotWeights.for_embedder(embedder_name)
    if clf is None:
        raise ValueError(
            f"no slot classifier weights for embedder {embedder_name!r} ({weights_path(embedder_name)})"
        )

    def run(statements: Sequence[Statement]) -> list[list[Predicted]]:
        embedder = build_embedder(settings, embedder_name)
        vectors = embedder.embed([f"{s.speaker}: {s.text}" for s in statements])
        extractor = LearnedExtractor(clf, SpacyEntities(settings.models.spacy_model))
        facts = extractor.extract([s.text for s in statements], [s.speaker for s in statements], vectors)
        return [_predicted(f) for f in facts]

    return run


def llm_extractor(
    llm, model: str, log: Path | None = None, progress: Callable[[int, int], None] | None = None
) -> Extractor:
    """The focused slot prompt on ``llm`` (one call per statement)."""
    from memlane.facts.llm_slots import LLMSlotExtractor

    extractor = LLMSlotExtractor(llm, model)

    def run(statements: Sequence[Statement]) -> list[list[Predicted]]:
        out = []
        fh = open(log, "a", encoding="utf-8") if log is not None else None
        try:
            for n, s in enumerate(statements, start=1):
                t0 = time.perf_counter()
                preds = _predicted(extractor.extract(s.text, s.speaker, before=s.before))
                out.append(preds)
                if fh is not None:
                    row = {
                        "id": s.id,
                        "predicted": [(p.slot, p.value) for p in preds],
                        "seconds": round(time.perf_counter() - t0, 2),
                    }
                    fh.write(json.dumps(row) + "\n")
                    fh.flush()
                if progress:
                    progress(n, len(statements))
        finally:
            if fh is not None:
                fh.close()
        return out

    return run


LLM_MISSING = (
    "--extractors llm needs a model server: set MEMLANE_LLM__BASE_URL and MEMLANE_LLM__MODEL "
    "(or MEMLANE_LLM__CONSOLIDATION__...), e.g. from memlane llm serve-local"
)


def build_extractors(
    names: Sequence[str], settings, embedder: str, *, llm_log: Path | None = None, progress=None
) -> dict[str, Extractor]:
    """The named extractors, keyed as the report names them (``classifier:<embedder>``,
    ``llm:<model>``). ValueError naming an unknown extractor, missing weights or a missing
    model server."""
    unknown = [n for n in names if n not in EXTRACTORS]
    if unknown or not names:
        raise ValueError(
            f"--extractors takes {', '.join(EXTRACTORS)} (comma-separated), not {','.join(unknown) or '(none)'}"
        )
    out: dict[str, Extractor] = {}
    for name in names:
        if name == "rules":
            out["rules"] = rules_extractor
        elif name == "classifier":
            out[f"classifier:{embedder}"] = classifier_extractor(settings, embedder)
        else:
            from memlane.llm import build_llm
            from memlane.llm.config import role_config

            llm = build_llm(settings, "consolidation")
            if llm is None:
                raise ValueError(LLM_MISSING)
            model = role_config(settings, "consolidation").model  # type: ignore[union-attr]
            out[f"llm:{model}"] = llm_extractor(llm, model, llm_log, progress)
    return out
