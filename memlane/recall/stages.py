"""Recall as a chain of stages (memlane/recall/pipeline.py builds it): each stage declares the
fields of the :class:`~memlane.recall.state.RecallState` it reads and writes, and the chain is
checked once, when it is built, so a stage can never read what no earlier stage wrote.

Also the interface of the one stage recall's builder plugs in from outside (the temporal tree):
recall imports no stage package, the tree imports recall's parts (packing), so the layering
points one way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np

from memlane.query.analysis import QueryAnalysis
from memlane.recall.state import RecallState, Scores
from memlane.records import RecalledMemory, RecalledNode, RecallRequest

# The fields a new RecallState holds before any stage runs.
GIVEN = ("bank_id", "req", "revision", "search", "embedder")


class Stage(Protocol):
    """One step of recall. ``reads`` and ``writes`` name RecallState fields; ``timing`` is the
    ``RecallResult.timings_ms`` key its time is added to (None: it records its own)."""

    @property
    def name(self) -> str: ...

    @property
    def reads(self) -> tuple[str, ...]: ...

    @property
    def writes(self) -> tuple[str, ...]: ...

    @property
    def timing(self) -> str | None: ...

    def run(self, state: RecallState) -> None: ...


def check_chain(stages: Sequence[Stage]) -> None:
    """ValueError naming the first stage that reads a field no earlier stage writes, or a
    field RecallState does not have."""
    fields = set(RecallState.__dataclass_fields__)
    written = set(GIVEN)
    for stage in stages:
        unknown = sorted((set(stage.reads) | set(stage.writes)) - fields)
        if unknown:
            raise ValueError(f"recall stage {stage.name!r} names fields RecallState lacks: {unknown}")
        unmet = sorted(set(stage.reads) - written)
        if unmet:
            raise ValueError(f"recall stage {stage.name!r} reads {unmet} before any stage writes them")
        written |= set(stage.writes)


class TreeStage(Protocol):
    """The hierarchical stage after flat recall (memlane/tree/recall.py's TreeRecall), given to
    the Recaller by its builder: recall does not import the tree, the tree imports recall's
    packing."""

    def apply(
        self,
        bank_id: str,
        revision: str,
        req: RecallRequest,
        query: QueryAnalysis,
        ranked: list[RecalledMemory],
        scores: Mapping[str, Scores],
        counts: Callable[[Sequence[str]], list[int]],
        query_vector: np.ndarray | Callable[[], np.ndarray],
        interval: tuple[datetime, datetime] | None,
        reference: datetime,
    ) -> tuple[list[RecalledMemory], list[RecalledNode], dict] | None:
        """The units kept, the nodes recalled and the plan's trace; None: the stage did not
        run. ``scores`` holds every ranked unit's scores by id; a gate reads the scale it was
        tuned on from there, never ``RecalledMemory.score``. ``query_vector`` is the query's
        vector by the bank's embedder, or a call that makes it (no dense channel ran)."""
        ...
