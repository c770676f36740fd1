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
    """Each rank's estimated waits and lateness over the measured summarised steps. A step's
    waits are at most the step, and a rank's lateness at most the longest of those waits in
    its step: the calls of a cell arrive at their mean, so each of a step's gradient buckets
    waited for the late rank as long as the first did, where the matching of full rows has
    the later ones arrive as the one before them completes (4 buckets behind a 70 ms sleep:
    95 ms/step, in 77 ms steps). An async call's wait may overlap the rank's own work (as in
    the matching's figures), so the bound is the step, not its idle time."""
    if est is None:
        return None
    rows, slot = measured_rows(est, slots)
    at = index_in(slots.ranks, est.rank[rows])
    n = len(slots.ranks)

    def per_rank(values: np.ndarray) -> np.ndarray:
        return np.bincount(at, weights=values[rows].astype(np.float64), minlength=n)

    def per_slot(values: np.ndarray) -> np.ndarray:
        weights = values[rows].astype(np.float64)
        return np.bincount(slot, weights=weights, minlength=len(slots.keys))

    waited = np.minimum(per_slot(est.wait_ns), slots.dur_ns)
    numbers, step_of = np.unique(slots.step, return_inverse=True)
    longest = np.zeros(len(numbers))
    np.maximum.at(longest, step_of, waited)
    late = np.minimum(per_slot(est.late_ns), longest[step_of])  # no longer than a peer waited
    return RankSums(
        slots.per_rank_sum(waited), per_rank(est.clear), per_rank(est.late_calls),
        slots.per_rank_sum(late),
    )  # fmt: skip
