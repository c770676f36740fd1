"""Where each rank's time went, for any workload: in collectives, waiting for data, the rest.

Training loops have steps; analytics loops (PCA, K-Means) need none. The window of a rank is
therefore its measured steps when it has any, else the span of everything it recorded.
Collective time is the union of the rank's collective intervals in the window (issue to
completion), so overlapping calls count once; with DDP part of it runs under backward.
"""

from __future__ import annotations

import numpy as np

from scalescope.analyze.columns.slot_index import measured_steps
from scalescope.analyze.ranks.summary_waits import summarised_steps
from scalescope.events import EventTable, Kind
from scalescope.events.suite import RankSplit


def union_ns(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total length covered by the intervals [start, end)."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order].astype(np.float64), ends[order].astype(np.float64)
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return float((reach[last] - s[first]).sum())


def _clipped(rows: EventTable, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    done = rows.dur_ns >= 0
    starts = np.clip(rows.start_ns[done], lo, hi)
    ends = np.clip(rows.start_ns[done] + rows.dur_ns[done], lo, hi)
    return starts, ends


def _window(mine: EventTable, steps: EventTable) -> tuple[int, int, int]:
    """(start, end) ns of the rank's window and its measured step count."""
    if len(steps):
        return int(steps.start_ns.min()), int((steps.start_ns + steps.dur_ns).max()), len(steps)
    done = mine.dur_ns >= 0
    if not done.any():
        return 0, 0, 0
    starts, durs = mine.start_ns[done], mine.dur_ns[done]
    return int(starts.min()), int((starts + durs).max()), 0


def _summarised_ns(mine: EventTable, steps: EventTable, summarised: np.ndarray) -> float:
    """A rank's time in collectives of its measured steps recorded as summaries (``--record
    summary``): their calls' time summed (calls of one step overlap little but DDP's
    buckets, whose union the windows measure)."""
    if len(summarised) == 0:
        return 0.0
    rows = mine.of_kind(Kind.SUMMARY)
    inside = np.isin(rows.step, summarised) & np.isin(rows.step, steps.step)
    return float(rows.dur_ns[inside].sum())


def rank_splits(events: EventTable, warmup_steps: int) -> tuple[RankSplit, ...]:
    """One RankSplit per rank that recorded events, in rank order."""
    measured = measured_steps(events, warmup_steps).rows
    summarised = summarised_steps(events)
    splits = []
    for rank in events.ranks():
        mine = events.select(events.rank == rank)
        steps = measured.select(measured.rank == rank)
        lo, hi, num_steps = _window(mine, steps)
        colls = mine.of_kind(Kind.COLLECTIVE)
        data = mine.of_kind(Kind.PHASE)
        data = data.select(data.where("name", "data"))
        c_start, c_end = _clipped(colls, lo, hi)
        d_start, d_end = _clipped(data, lo, hi)
        splits.append(
            RankSplit(
                rank=rank,
                steps=num_steps,
                window_s=(hi - lo) / 1e9,
                collective_s=(union_ns(c_start, c_end) + _summarised_ns(mine, steps, summarised))
                / 1e9,
                data_s=float((d_end - d_start).sum()) / 1e9,
            )
        )
    return tuple(splits)
