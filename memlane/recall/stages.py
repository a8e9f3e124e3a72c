"""The recall stages that recall's builder plugs in, as interfaces: recall imports no stage
package, the stages import recall's parts (packing), so the layering points one way."""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Protocol, Sequence

import numpy as np

from memlane.model import RecalledMemory, RecalledNode, RecallRequest
from memlane.query.analysis import QueryAnalysis


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
        counts: Callable[[Sequence[str]], list[int]],
        query_vector: np.ndarray | None,
        interval: tuple[datetime, datetime] | None,
        reference: datetime,
    ) -> tuple[list[RecalledMemory], list[RecalledNode], dict] | None:
        """The units kept, the nodes recalled and the plan's trace; None: the stage did not run."""
        ...
