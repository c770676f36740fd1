"""Gradient communication of backward: the part hidden under backward versus exposed after
it (the comm_wait phase), per rank and measured step on each rank's own clock."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import index_in
from scalescope.analyze.ranks.summary_waits import summarised_steps
from scalescope.analyze.steps.step_slots import StepSlots, overlap_per_slot
from scalescope.events import Run


@dataclass(frozen=True)
class Overlap:
    """Gradient communication of backward: hidden under it versus exposed after it."""

    comm_ms_per_step: float
    """Union of the gradient collectives' intervals per step, per rank, averaged."""
    hidden_ms_per_step: float
    exposed_ms_per_step: float
    """The comm_wait phase."""
    hidden_pct: float
    exposed_transfer_ms_per_step: float | None = None
    """Per step, the least comm_wait over the ranks, averaged over the steps all ranks
    measured: the rank that arrives last waits only for the bytes, so this is exposed
    transfer without the waiting for late ranks that the others' comm_wait also holds."""


def comm_overlap(run: Run, slots: StepSlots) -> Overlap | None:
    """Per-rank means over measured steps, averaged over the ranks with measured steps; the
    calls' figures on a run recorded as summaries over its windows recorded in full."""
    per_slot = overlap_per_slot(run.events, slots)
    if per_slot is None:
        return None
    comm, hidden = per_slot
    has_steps = slots.steps_per_rank() > 0

    def mean_ms(per: np.ndarray) -> float:
        return float(slots.per_rank_mean(per)[has_steps].mean()) / 1e6

    in_full = _full_slots(run, slots)
    if in_full is None:
        comm_ms, hidden_ms = mean_ms(comm), mean_ms(hidden)
    else:  # the gradients' calls are rows in the windows only (--record summary)
        comm_ms, hidden_ms = _mean_over(slots, in_full, comm), _mean_over(slots, in_full, hidden)
    least = slots.least_over_ranks(slots.phase_ns["comm_wait"])
    return Overlap(
        comm_ms_per_step=comm_ms,
        hidden_ms_per_step=hidden_ms,
        exposed_ms_per_step=mean_ms(slots.phase_ns["comm_wait"]),
        hidden_pct=100.0 * hidden_ms / comm_ms if comm_ms > 0 else 0.0,
        exposed_transfer_ms_per_step=float(least.mean()) / 1e6 if len(least) else None,
    )


def _full_slots(run: Run, slots: StepSlots) -> np.ndarray | None:
    """Per slot, whether its step holds every call's row; None on a run recorded in full."""
    summarised = summarised_steps(run.events)
    return ~np.isin(slots.step, summarised) if len(summarised) else None


def _mean_over(slots: StepSlots, kept: np.ndarray, per_slot: np.ndarray) -> float:
    """Per-rank means (ms) over the ``kept`` slots, averaged over the ranks that have one."""
    idx = index_in(slots.ranks, slots.rank[kept])
    total = np.bincount(idx, weights=per_slot[kept], minlength=len(slots.ranks))
    count = np.bincount(idx, minlength=len(slots.ranks))
    has = count > 0
    return float((total[has] / count[has]).mean()) / 1e6 if has.any() else 0.0
