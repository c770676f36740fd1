"""The waits of blocking collectives of ``--record summary``'s summarised-only steps, from the
estimate of ``ranks/summary_waits.py``, as ``step_slots.SyncWaits``: each cell's calls at
their mean arrival, in the phase that holds it. Here, below the what-if's room, so that the
what-if reads the summarised steps' own time as the cross-rank analysis does."""

from __future__ import annotations

import numpy as np

from scalescope.analyze.ranks.summary_waits import SummaryWaits
from scalescope.analyze.steps.step_slots import StepSlots, SyncWaits, phase_at
from scalescope.events import EventTable


def measured_rows(est: SummaryWaits, slots: StepSlots) -> tuple[np.ndarray, np.ndarray]:
    """The estimate's entries that lie in measured steps, and their slots."""
    slot = slots.slot_of(est.rank, est.step)
    rows = np.flatnonzero(slot >= 0)
    return rows, slot[rows]


def summary_sync(events: EventTable, slots: StepSlots, est: SummaryWaits | None):
    """The waits of blocking collectives (all but gradient buckets) of measured summarised
    steps, as ``step_slots.SyncWaits``; None without a summary."""
    if est is None:
        return None
    rows, slot = measured_rows(est, slots)
    keep = est.tag[rows] != events.symbols.id_of("gradients")
    rows, slot = rows[keep], slot[keep]
    rank, start = est.rank[rows], est.local_arrival_ns[rows].astype(np.int64)
    return SyncWaits(slot, rank, start, phase_at(events, rank, start), est.wait_ns[rows])
