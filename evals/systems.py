"""The systems an eval run compares, named by a spec (the one place specs are parsed):

* ``memlane``: full recall, as configured (with the temporal tree: the eval consolidates every
  bank before its questions);
* ``flat``: the same recall with the tree stage off (``planner="off"``): memory units only,
  the ablation the tree is measured against;
* ``nodecomp``: the same recall with multi-hop decomposition off (``decompose="off"``): the
  question's own channels only, the ablation decomposition is measured against;
* ``bm25``, ``dense``: the single-channel **baselines**, ranked straight from the store (plain
  BM25 over the same analysed text, plain cosine with the bank's own stored vectors; no fusion,
  graph, temporal channel or boosts);
* ``dense-minilm``, ``dense-bge``: dense-only baselines with a named embedder (MiniLM,
  bge-small-en-v1.5), whatever the bank was retained with: the eval embeds the bank's unit texts
  itself (:mod:`evals.dense_baseline`);
* an **ablation**: a ``+``-joined subset of recall's channels (``semantic``, ``lexical``,
  ``graph``, ``temporal``), e.g. ``lexical+semantic``: recall with only those channels, everything
  else as for ``memlane``. Its name is written with the channels in alphabetical order, so
  ``semantic+lexical`` and ``lexical+semantic`` are one system.

``memlane`` is always run (it is what the others are compared against) and comes first.
"""

from __future__ import annotations

from typing import Iterable

from memlane.recall.pipeline import CHANNELS  # recall's channels: one list, recall's own

MEMLANE = "memlane"
FLAT = "flat"
NODECOMP = "nodecomp"
# The dense baselines with a named embedder, by system name: the embedder's models.embedder value.
DENSE_EMBEDDERS = {"dense-minilm": "minilm", "dense-bge": "bge-small"}
BASELINES = ("bm25", "dense", *DENSE_EMBEDDERS)
# MiniLM's dense baseline runs by default beside BM25 and the bank's own vectors (bge-small, the
# default embedder of new banks: "dense-bge" would embed every unit again for the same ranking).
DEFAULT_SYSTEMS = (MEMLANE, FLAT, "bm25", "dense", "dense-minilm")
ALLOWED = f"{MEMLANE}, {FLAT}, {NODECOMP}, {', '.join(BASELINES)}, or channels joined by '+' ({', '.join(CHANNELS)})"


def _canonical(spec: str) -> str:
    name = spec.strip().lower()
    if name in DEFAULT_SYSTEMS or name == NODECOMP or name in BASELINES:
        return name
    channels = [c.strip() for c in name.split("+")]
    bad = [c for c in channels if c not in CHANNELS]
    if not name or bad:
        raise ValueError(f"unknown system {spec.strip()!r}: expected {ALLOWED}")
    return "+".join(sorted(set(channels)))


def parse_systems(specs: str | Iterable[str] | None = None) -> list[str]:
    """The systems a run compares, from specs like ``"memlane,bm25,lexical+semantic"`` (a string
    or several, each comma-separated; None: the default ``memlane, flat, bm25, dense, dense-minilm``).

    Names are lower-cased and de-duplicated (first occurrence kept); ``memlane`` is added first
    when missing. Raises ValueError naming the bad spec and the allowed ones."""
    if specs is None:
        return list(DEFAULT_SYSTEMS)
    if isinstance(specs, str):
        specs = [specs]
    out: list[str] = []
    for group in specs:
        for piece in group.split(","):
            if not piece.strip():
                continue
            name = _canonical(piece)
            if name not in out:
                out.append(name)
    if MEMLANE in out:
        out.remove(MEMLANE)
    return [MEMLANE, *out]


def channels_of(system: str) -> list[str] | None:
    """The recall channels of an ablation system (None for ``memlane``, the baselines and any
    other name)."""
    if system in (MEMLANE, FLAT, NODECOMP) or system in BASELINES:
        return None
    channels = system.split("+")
    return channels if all(c in CHANNELS for c in channels) else None


def baselines_of(systems: Iterable[str]) -> list[str]:
    """The single-channel baselines among ``systems``, in their order."""
    return [s for s in systems if s in BASELINES]
