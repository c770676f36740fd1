"""Ranks whose waits in collectives last longer than their steps: their timeline and the
others' do not fit together (``CrossRankAnalysis.inconsistent``; cross_rank.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scalescope.analyze.columns.sorting import index_in
from scalescope.analyze.ranks.matching import Matched
from scalescope.analyze.steps.step_slots import StepSlots


class RankFigures(Protocol):
    """What is read of a rank's figures (cross_rank.RankWaits)."""

    rank: int
    wait_ms_per_step: float


@dataclass(frozen=True)
class WaitBeyondStep:
    """A rank whose waits in collectives, by the aligned clocks, mostly last longer than the
    steps they lie in: impossible in one job (a collective is issued and completed inside
    its step), so its timeline and the others' do not fit together (clocks not aligned,
    ranks of different runs)."""

    rank: int
    share_pct: float
    """Its matched collectives of measured steps that waited more than 1.5 steps, %."""
    wait_ms_per_step: float
    step_ms: float


BEYOND_STEP = 1.5
"""A wait this many times its step: more than an asynchronous collective finishing in the
next step could show."""
BEYOND_SHARE_PCT = 25.0
"""Share of a rank's collectives waiting beyond their step for its timeline to be wrong."""


def waits_beyond_step(
    waits: Sequence[RankFigures], slots: StepSlots, m: Matched | None, inst_ok: np.ndarray
) -> tuple[WaitBeyondStep, ...]:
    """Every rank whose collectives mostly wait longer than their steps last, worst first.

    Per collective, not per step: asynchronous gradient buckets wait at the same time, so
    their summed waits may exceed a step in a real run."""
    if m is None or len(slots.keys) == 0:
        return ()
    rows = np.flatnonzero(inst_ok[m.inst])
    slot = slots.slot_of(m.rank[rows], m.step[rows])
    rows, slot = rows[slot >= 0], slot[slot >= 0]
    beyond = m.wait_ns[rows] > BEYOND_STEP * slots.dur_ns[slot]
    at = index_in(slots.ranks, m.rank[rows])
    total = np.bincount(at, minlength=len(slots.ranks))
    over = np.bincount(at[beyond], minlength=len(slots.ranks))
    share = 100.0 * over / np.maximum(total, 1)
    step_ms = slots.per_rank_mean(slots.dur_ns) / 1e6
    out = [
        WaitBeyondStep(w.rank, float(share[i]), w.wait_ms_per_step, float(step_ms[i]))
        for i, w in enumerate(waits)
        if total[i] and share[i] > BEYOND_SHARE_PCT
    ]
    return tuple(sorted(out, key=lambda w: -w.share_pct))
