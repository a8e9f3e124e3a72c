"""Where a write's time goes: named stages timed into the report of the call that runs them.

A retain passes through layers that know nothing of its report (the bank writer, the lease,
the derived state). Each wraps its work in ``with stage("lease"):``; the call at the top opens
``with recording() as timings:`` and reads the seconds per stage from ``timings`` when it ends
(``RetainReport.timings_s``, read by ``benchmarks/retain_profile.py``). Outside a recording a
stage costs one context-variable lookup. The variable is per thread and per asyncio task, so
two concurrent calls never mix their figures; work handed to another thread records nothing
unless that thread is given the dictionary (the retainer's overlapped extraction does so).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_timings: ContextVar[dict[str, float] | None] = ContextVar("memlane_stage_timings", default=None)


@contextmanager
def recording() -> Iterator[dict[str, float]]:
    """Record the stages run inside the block into the dictionary it yields (seconds per
    stage name, summed over repeats). A nested recording records into the outer one's dict."""
    outer = _timings.get()
    if outer is not None:
        yield outer
        return
    timings: dict[str, float] = {}
    token = _timings.set(timings)
    try:
        yield timings
    finally:
        _timings.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the block as stage ``name`` of the current recording (nothing when none)."""
    timings = _timings.get()
    if timings is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        add(timings, name, time.perf_counter() - t0)


def add(timings: dict[str, float], name: str, seconds: float) -> None:
    """Add ``seconds`` to stage ``name`` of ``timings``."""
    timings[name] = timings.get(name, 0.0) + seconds


def current() -> dict[str, float] | None:
    """The current recording's dictionary (to hand to a worker thread), or None."""
    return _timings.get()
