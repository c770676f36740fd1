"""Work beside training taken whole: an evaluation (or a checkpoint) from its first recorded
row to its last, in each step of each rank that did it.

The probe records an evaluation as its forwards and the batches fetched for them
(probe/phases.py); the host work between them (the loss, ``.item()``, the loop) is part of
the evaluation too. Summing its rows alone left that out: 13 % of the evaluation of
tests/e2e/scripts/gpt_train.py (its rows 38-44 ms, its span and the script's own clock 44-51
ms), so the what-if's ``phase:eval`` promised that much too little. Both the rank-only work
finding (extra_work.py) and the what-if's phase parts (model/phase_parts.py) take the work
as these intervals: its span, less the other phases recorded inside it (a training forward
between two evaluation batches is training).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Intervals:
    """Signed intervals per (rank, step): the work is the sum of ``sign * (end - start)``."""

    rank: np.ndarray
    step: np.ndarray
    start: np.ndarray
    end: np.ndarray
    sign: np.ndarray


def whole_work(
    rank: np.ndarray, step: np.ndarray, start: np.ndarray, end: np.ndarray, mine: np.ndarray
) -> Intervals:
    """The rows ``mine`` (of every phase row's ``rank``, ``step``, ``start``, ``end``, one
    clock per rank) taken whole: per (rank, step), the span from the first such row's start
    to the last one's end (sign +1), and each other row clipped to that span (sign -1)."""
    start, end = np.asarray(start, np.float64), np.asarray(end, np.float64)
    key = rank.astype(np.int64) * (1 << 32) + (step.astype(np.int64) & 0xFFFFFFFF)
    mine_at = np.flatnonzero(mine)
    keys, first_row, inverse = np.unique(key[mine_at], return_index=True, return_inverse=True)
    first = np.full(len(keys), np.inf)
    last = np.full(len(keys), -np.inf)
    np.minimum.at(first, inverse, start[mine_at])
    np.maximum.at(last, inverse, end[mine_at])
    other = np.flatnonzero(~np.asarray(mine, bool))
    at = np.minimum(np.searchsorted(keys, key[other]), max(len(keys) - 1, 0))
    hit = keys[at] == key[other] if len(keys) else np.zeros(len(other), bool)
    lo = np.maximum(start[other], first[at]) if len(keys) else start[other]
    hi = np.minimum(end[other], last[at]) if len(keys) else end[other]
    inside = hit & (hi > lo)
    rep, other = mine_at[first_row], other[inside]
    return Intervals(
        rank=np.concatenate([rank[rep], rank[other]]),
        step=np.concatenate([step[rep], step[other]]),
        start=np.concatenate([first, lo[inside]]),
        end=np.concatenate([last, hi[inside]]),
        sign=np.concatenate([np.ones(len(rep)), -np.ones(len(other))]),
    )
