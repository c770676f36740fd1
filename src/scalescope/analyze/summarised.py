"""The cross-rank figures of ``--record summary``'s summarised-only steps, from the estimate
of ``ranks/summary_waits.py``, in the shapes ``cross_rank.py`` adds to its own: waits in
blocking collectives (each cell's calls at their mean arrival, in the phase that holds it),
and each rank's wait and lateness totals over the measured steps.

A run recorded in full has no summary: every function here returns None, and the figures of
``cross_rank.py`` are the matching's alone, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import index_in
from scalescope.analyze.ranks.summary_waits import SummaryWaits
from scalescope.analyze.steps.step_slots import StepSlots
from scalescope.analyze.steps.summary_sync import measured_rows, summary_sync

__all__ = ["RankSums", "rank_sums", "summary_sync"]


@dataclass(frozen=True)
class RankSums:
    """Per rank of ``StepSlots.ranks``, over the measured summarised-only steps."""

    wait_ns: np.ndarray
    clear: np.ndarray
    """Calls that had a clearly-last rank."""
    late_count: np.ndarray
    """Calls it was clearly last at."""
    late_ns: np.ndarray


def rank_sums(slots: StepSlots, est: SummaryWaits | None) -> RankSums | None:
    """Each rank's estimated waits and lateness over the measured summarised steps."""
    if est is None:
        return None
    rows, _slot = measured_rows(est, slots)
    at = index_in(slots.ranks, est.rank[rows])
    n = len(slots.ranks)

    def per_rank(values: np.ndarray) -> np.ndarray:
        return np.bincount(at, weights=values[rows].astype(np.float64), minlength=n)

    return RankSums(
        per_rank(est.wait_ns), per_rank(est.clear), per_rank(est.late_calls), per_rank(est.late_ns)
    )
