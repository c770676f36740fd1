"""One time base for all ranks: each rank's offset to rank 0's clock, and its uncertainty.

Every rank records on its own ``time.perf_counter_ns()`` clock. The probe measures each
rank's offset to rank 0 by a ping-pong exchange when the process group starts and again
before it is destroyed (``probe/clock.py``, stored as ``RankMeta.clock``). Without those
samples (an older run, a non-gloo backend, an ingested trace) the wall clock is the
fallback: every rank noted ``time.time_ns() - time.perf_counter_ns()`` at start, so the
difference of two ranks' notes maps one perf clock onto the other, as well as the hosts'
wall clocks agree (NTP: often a millisecond or worse across nodes; exact on one host).

A constant offset is applied (the start measurement); the end measurement is only used to
report the drift, which bounds how far the offset may be off late in the run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.events import EventTable, Run
from scalescope.events.run import ClockSync, RankMeta

REFERENCE_RANK = 0


@dataclass(frozen=True)
class ClockAlignment:
    """How one rank's event times are put on the common (rank 0's) clock."""

    rank: int
    offset_ns: int
    """Added to the rank's ``start_ns`` values."""
    uncertainty_ns: int | None
    """± bound of the offset; None when unknown (wall-clock fallback)."""
    drift_ns: int | None
    """End offset minus start offset; None without an end measurement."""
    method: str
    """ping-pong (probe's exchange with rank 0), wall-clock (each rank's time.time_ns),
    reference (rank 0 itself), or none (no meta file of this rank or of rank 0: offset 0,
    the rank's times are used as they are)."""


def _sample(meta: RankMeta | None, when: str) -> ClockSync | None:
    if meta is None:
        return None
    return next((s for s in meta.clock if s.when == when), None)


def _align_rank(rank: int, meta: RankMeta | None, ref: RankMeta | None) -> ClockAlignment:
    if rank == REFERENCE_RANK:
        return ClockAlignment(rank, 0, 0, 0, "reference")
    start = _sample(meta, "start")
    if start is not None:
        end = _sample(meta, "end")
        drift = end.offset_ns - start.offset_ns if end is not None else None
        return ClockAlignment(rank, start.offset_ns, start.uncertainty_ns, drift, "ping-pong")
    if meta is not None and ref is not None:
        offset = meta.wall_minus_perf_ns - ref.wall_minus_perf_ns
        return ClockAlignment(rank, offset, None, None, "wall-clock")
    return ClockAlignment(rank, 0, None, None, "none")


def align_clocks(run: Run) -> tuple[ClockAlignment, ...]:
    """The alignment of every rank that recorded events (else every rank with a meta file),
    by rank; rank 0 is the reference even when it recorded nothing."""
    ranks = run.events.ranks() or sorted(run.ranks)
    ref = run.ranks.get(REFERENCE_RANK)
    return tuple(_align_rank(r, run.ranks.get(r), ref) for r in ranks)


def of_ranks(clocks: tuple[ClockAlignment, ...], ranks: list[int]) -> tuple[ClockAlignment, ...]:
    """The alignments of ``ranks``: what ``align_clocks`` gives for a run of their rows alone."""
    wanted = set(ranks)
    return tuple(c for c in clocks if c.rank in wanted)


def clock_offsets(clocks: tuple[ClockAlignment, ...]) -> dict[int, int]:
    """{rank: offset_ns}: what a timeline adds to each rank's ``start_ns``."""
    return {c.rank: c.offset_ns for c in clocks}


def aligned_start_ns(events: EventTable, clocks: tuple[ClockAlignment, ...]) -> np.ndarray:
    """``start_ns`` of every row on the common clock (int64); ranks without an alignment
    keep their own times."""
    if len(events) == 0:
        return np.zeros(0, dtype=np.int64)
    size = max(int(events.rank.max()), *(c.rank for c in clocks), 0) + 1
    offsets = np.zeros(size, dtype=np.int64)
    for c in clocks:
        offsets[c.rank] = c.offset_ns
    return events.start_ns.astype(np.int64) + offsets[events.rank]


def tie_tolerance_ns(clocks: tuple[ClockAlignment, ...], floor_ns: int) -> int:
    """Arrivals closer than this cannot be ordered: the floor, or twice the largest offset
    uncertainty (two ranks' errors add up) when that is larger."""
    known = [c.uncertainty_ns for c in clocks if c.uncertainty_ns is not None]
    return max(floor_ns, 2 * max(known, default=0))
