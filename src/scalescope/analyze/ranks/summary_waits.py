"""Waiting versus transfer estimated from ``--record summary``'s rows (events/schema.py
``Kind.SUMMARY``), for the steps that have no full rows.

A summary holds, per rank, step and (group, op, size class), the calls' count, their time in
the call and their arrival offsets from the step's start, summed. Matching the calls one by
one (matching.py) needs every call; here each rank's calls of a *cell* (step, group, op, size
class) are taken as arriving together at their mean:

- mean arrival = the rank's step start on the common clock + offset sum / calls;
- the last rank to arrive spends the least time in the call: a rank's wait per call is
  (the cell's last mean arrival − its own), at most its time in the call per call;
- transfer = time in the call − wait;
- the last rank is *clearly* last when it arrived more than the tie tolerance after the
  second-to-last: its lateness is that lead per call.

Sends, receives and the host's waits on them (their peer is set, or their name is
``wait:<op>``) are left out: their partner is one rank, not the group. Steps that hold full
rows (the windows) are left out too: the matching measures them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.grouping import group_by
from scalescope.analyze.ranks.clocks import ClockAlignment, aligned_start_ns
from scalescope.events import EventTable, Kind
from scalescope.events.schema import WAIT_PREFIX


@dataclass(frozen=True)
class SummaryWaits:
    """One entry per (rank, cell) of a summarised-only step: sums over its calls (ns)."""

    rank: np.ndarray
    step: np.ndarray
    tag: np.ndarray
    """Symbol id of the calls' tag (``gradients``, ``unshard:*``...)."""
    calls: np.ndarray
    local_arrival_ns: np.ndarray
    """Mean arrival on the rank's own clock (to find the phase it lies in)."""
    wait_ns: np.ndarray
    transfer_ns: np.ndarray
    clear: np.ndarray
    """Calls of the cell that had a clearly-last rank (this rank's calls, else 0)."""
    late_calls: np.ndarray
    """This rank's calls when it was clearly last, else 0."""
    late_ns: np.ndarray
    """Its lead over the second-to-last, per call, times those calls."""

    def __len__(self) -> int:
        return len(self.rank)


def full_steps(events: EventTable) -> np.ndarray:
    """Packed (rank << 32 | step) keys of the rank-steps that hold COLLECTIVE or WAIT rows."""
    full = (events.kind == int(Kind.COLLECTIVE)) | (events.kind == int(Kind.WAIT))
    return np.unique(_packed(events.rank[full], events.step[full]))


def summarised_steps(events: EventTable) -> np.ndarray:
    """The steps that hold SUMMARY rows and no COLLECTIVE or WAIT row on any rank, sorted."""
    summary = events.step[events.kind == int(Kind.SUMMARY)]
    if len(summary) == 0:
        return np.zeros(0, dtype=np.int64)
    full = (events.kind == int(Kind.COLLECTIVE)) | (events.kind == int(Kind.WAIT))
    return np.setdiff1d(summary, events.step[full]).astype(np.int64)


def _packed(rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    return (rank.astype(np.int64) << 32) | (step.astype(np.int64) & 0xFFFFFFFF)


def summarised(events: EventTable, every_step: bool = False, p2p: bool = False) -> EventTable:
    """The SUMMARY rows of collectives (no send, recv or wait; ``p2p``: sends and receives
    too) in steps without full rows (``every_step``: in the windows' steps too, whose
    summaries are written as well)."""
    rows = events.select(events.kind == int(Kind.SUMMARY))
    if len(rows) == 0:
        return rows
    waits = [i for i, s in enumerate(rows.symbols.strings) if s.startswith(WAIT_PREFIX)]
    keep = ~np.isin(rows.name, waits) if p2p else (rows.peer < 0) & ~np.isin(rows.name, waits)
    if not every_step:
        keep &= ~np.isin(_packed(rows.rank, rows.step), full_steps(events))
    return rows.select(keep)


def _step_starts(events: EventTable, clocks: tuple[ClockAlignment, ...]) -> tuple:
    """Packed keys of the STEP rows, sorted, with their starts (own clock, common clock)."""
    steps = events.select(events.kind == int(Kind.STEP))
    keys = _packed(steps.rank, steps.step)
    order = np.argsort(keys, kind="stable")
    aligned = aligned_start_ns(steps, clocks)
    return keys[order], steps.start_ns[order].astype(np.int64), aligned[order]


def summary_waits(
    events: EventTable, clocks: tuple[ClockAlignment, ...], tie_ns: int, every_step: bool = False
) -> SummaryWaits | None:
    """The estimate of the module doc for every rank of every summarised-only cell shared by
    two ranks or more (``every_step``: the windows' cells too, for a figure measured alike at
    every step); None when the run holds no such summary."""
    rows = summarised(events, every_step)
    if len(rows) == 0:
        return None
    cells = group_by(rows.rank, rows.step, rows.group, rows.name, rows.seq)  # late rows add up
    rank, step = cells.key(0), cells.key(1)
    calls, offset = cells.sum(rows.count), cells.sum(rows.start_ns)
    in_call = cells.sum(rows.dur_ns)
    tag = cells.min(rows.tag)
    keys, own_start, common_start = _step_starts(events, clocks)
    at = np.searchsorted(keys, _packed(rank, step))
    known = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == _packed(rank, step))
    at = at[known]
    mean = offset[known] / np.maximum(calls[known], 1)
    arrival = common_start[at] + mean
    sel = np.flatnonzero(known)
    across = group_by(step[sel], cells.key(2)[sel], cells.key(3)[sel], cells.key(4)[sel])
    shared = across.count()[across.index] >= 2
    last = across.max(arrival)[across.index]
    second = _second_largest(across, arrival)[across.index]
    n = calls[sel]
    wait = np.minimum(n * (last - arrival), in_call[sel])
    lead = last - second
    clear = lead > tie_ns
    is_last = clear & (arrival == last)
    keep = shared
    return SummaryWaits(
        rank=rank[sel][keep],
        step=step[sel][keep],
        tag=tag[sel][keep],
        calls=n[keep],
        local_arrival_ns=(own_start[at] + mean)[keep],
        wait_ns=wait[keep],
        transfer_ns=(in_call[sel] - wait)[keep],
        clear=np.where(clear, n, 0)[keep],
        late_calls=np.where(is_last, n, 0)[keep],
        late_ns=np.where(is_last, n * lead, 0.0)[keep],
    )


def _second_largest(groups, values: np.ndarray) -> np.ndarray:
    """Per group, the largest value once its largest is taken out (-inf for one member)."""
    top = groups.max(values)
    first = np.zeros(len(values), dtype=bool)
    order = np.lexsort((-values, groups.index))
    starts = np.searchsorted(groups.index[order], np.arange(len(groups)))
    first[order[starts]] = True  # one member per group holds its maximum
    rest = np.where(first, -np.inf, values)
    out = groups.max(rest)
    return np.where(groups.count() >= 2, out, top)
