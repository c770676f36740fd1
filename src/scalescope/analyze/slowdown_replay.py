"""The slowdown detector replayed over a recorded run, offline: the reads a watcher polling
every ``poll_s`` would have made of the ranks' running totals, rebuilt from the event table
(each rank's steps, phases and collectives summed up to each step's end, on rank 0's clock).

For a run recorded without the watch, or with another threshold, and to test the detector
on real streams: its alerts name the same steps and ranks the live watch's would, to within
a read.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from scalescope.analyze.clocks import align_clocks, aligned_start_ns
from scalescope.analyze.slowdown import (
    FIELDS,
    Alert,
    DetectorConfig,
    SlowdownDetector,
    TotalsRead,
)
from scalescope.events import Kind, Run
from scalescope.events.live_state import TOTAL_PHASES

POLL_S = 0.5
"""The hang watch's poll (launch/hang_watch.py POLL_S)."""
_COL = {name: i for i, name in enumerate(FIELDS)}


def step_totals(run: Run) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Per rank (ranks in order): each step's end (ns, aligned) and the running totals after
    it (steps x FIELDS)."""
    events = run.events
    clocks = align_clocks(run)
    ranks = np.array(events.ranks(), dtype=np.int64)
    steps = events.of_kind(Kind.STEP)
    ends_all = aligned_start_ns(steps, clocks) + steps.dur_ns
    phases = events.of_kind(Kind.PHASE)
    colls = events.of_kind(Kind.COLLECTIVE)
    names = {p: phases.symbols.id_of(p) if p in phases.symbols else -1 for p in TOTAL_PHASES}
    ends, totals = [], []
    for rank in ranks.tolist():
        mine = steps.rank == rank
        order = np.argsort(steps.step[mine], kind="stable")
        numbers = steps.step[mine][order]
        values = np.zeros((len(numbers), len(FIELDS)))
        values[:, _COL["steps"]] = 1
        values[:, _COL["step_ns"]] = steps.dur_ns[mine][order]
        values[:, _COL["samples"]] = steps.count[mine][order]
        values[:, _COL["collective_ns"]] = _per_step(colls, rank, numbers)
        for phase, sid in names.items():
            rows = phases.select((phases.rank == rank) & (phases.name == sid))
            values[:, _COL[phase]] = _per_step(rows, rank, numbers)
        ends.append(ends_all[mine][order])
        totals.append(np.cumsum(values, axis=0))
    return ranks, ends, totals


def _per_step(rows, rank: int, numbers: np.ndarray) -> np.ndarray:
    """The durations of ``rows`` of ``rank`` summed per step of ``numbers`` (incomplete rows,
    dur -1, left out)."""
    mine = (rows.rank == rank) & (rows.dur_ns >= 0)
    if not mine.any() or not len(numbers):
        return np.zeros(len(numbers))
    at = np.searchsorted(numbers, rows.step[mine])
    inside = (at < len(numbers)) & (numbers[np.minimum(at, len(numbers) - 1)] == rows.step[mine])
    out = np.zeros(len(numbers))
    np.add.at(out, at[inside], rows.dur_ns[mine][inside])
    return out


def recorded_reads(run: Run, poll_s: float = POLL_S) -> Iterator[TotalsRead]:
    """The reads a watcher polling every ``poll_s`` would have made (``at_s`` from the first
    step's end, on rank 0's clock)."""
    ranks, ends, totals = step_totals(run)
    if not ranks.size or not any(len(e) for e in ends):
        return
    first = min(int(e[0]) for e in ends if len(e))
    last = max(int(e[-1]) for e in ends if len(e))
    for at in np.arange(first, last + poll_s * 1e9, poll_s * 1e9):
        values = np.zeros((len(ranks), len(FIELDS)))
        for i, (end, cum) in enumerate(zip(ends, totals, strict=True)):
            n = int(np.searchsorted(end, at, side="right"))
            if n:
                values[i] = cum[n - 1]
        yield TotalsRead((at - first) / 1e9, ranks, values)


def replay_run(
    run: Run, config: DetectorConfig | None = None, poll_s: float = POLL_S
) -> list[Alert]:
    """The alerts the watch would have raised over the run (``detected_at``: seconds after
    the first step's end)."""
    hosts = {r: m.hostname for r, m in run.ranks.items() if m.hostname}
    detector = SlowdownDetector(config, hosts)
    return [a for read in recorded_reads(run, poll_s) for a in detector.observe_read(read)]
