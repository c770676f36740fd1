"""Pauses: steps that took many typical steps on every rank, and completed.

A rank that writes a checkpoint (or evaluates) every N steps holds the others in their next
collective for as long as it writes. The run does not hang, but its steps then last ten or a
hundred typical steps, and the hang watch, whose default threshold is 10 typical steps (at
least 30 s), would call a long enough pause a hang. This names the pauses, the rank that
paused (the one that waited least in the step's collectives: the others waited for it) and
their period, so the report can say which ``--hang-after`` keeps the watch quiet.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import distinct
from scalescope.events import EventTable, Kind

PAUSE_FACTOR = 10.0
"""A step is a pause when every rank took this many median steps for it ..."""
MIN_PAUSE_S = 1.0
"""... and at least this long."""


@dataclass(frozen=True)
class Pause:
    step: int
    rank: int
    """The rank that paused: the one that waited least in the step's collectives."""
    seconds: float
    """The step's duration on that rank."""


@dataclass(frozen=True)
class PauseAnalysis:
    pauses: tuple[Pause, ...]
    median_step_s: float
    every_steps: int | None
    """The steps between pauses when it is always the same, else None."""
    ranks: tuple[int, ...]
    """The ranks that paused, most pauses first."""
    longest_s: float
    total_s: float
    share_pct: float
    """The pauses' share of the run's step time (rank 0's steps)."""


def _step_table(events: EventTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = events.of_kind(Kind.STEP)
    return rows.rank.astype(np.int64), rows.step.astype(np.int64), rows.dur_ns.astype(np.int64)


def _longest_waits(events: EventTable, steps: list[int], world: int) -> np.ndarray:
    """[pause, rank]: the rank's longest collective in that step (ns), in one pass
    (``steps`` sorted)."""
    rows = events.of_kind(Kind.COLLECTIVE)
    mine = np.isin(rows.step, steps) & (rows.dur_ns > 0) & (rows.rank < world)
    out = np.zeros((len(steps), world), dtype=np.int64)
    at = np.searchsorted(steps, rows.step[mine])
    np.maximum.at(out, (at, rows.rank[mine].astype(np.int64)), rows.dur_ns[mine])
    return out


def _period(steps: list[int]) -> int | None:
    gaps = set(np.diff(sorted(steps)).tolist())
    return gaps.pop() if len(gaps) == 1 else None


def analyze_pauses(events: EventTable, warmup_steps: int = 1) -> PauseAnalysis | None:
    """The run's pauses after its warm-up (at least the first step, whose setup is long by
    nature); None when it had none (or no steps)."""
    ranks, steps, durs = _step_table(events)
    measured = steps >= max(warmup_steps, 1)
    ranks, steps, durs = ranks[measured], steps[measured], durs[measured]
    if durs.size == 0:
        return None
    median = float(np.median(durs)) / 1e9
    floor_ns = max(PAUSE_FACTOR * median, MIN_PAUSE_S) * 1e9
    everyone = distinct(ranks)
    long_steps = []
    for step in distinct(steps[durs >= floor_ns]).tolist():
        here = steps == step
        if distinct(ranks[here]).size == everyone.size and durs[here].min() >= floor_ns:
            long_steps.append(step)
    if not long_steps:
        return None
    waits = _longest_waits(events, long_steps, int(everyone.max()) + 1)
    pauses = []
    for i, step in enumerate(long_steps):
        rank = int(everyone[np.argmin(waits[i, everyone])])
        seconds = float(durs[(steps == step) & (ranks == rank)].max()) / 1e9
        pauses.append(Pause(step, rank, seconds))
    total = sum(p.seconds for p in pauses)
    first_rank = float(durs[ranks == everyone[0]].sum()) / 1e9
    counts = Counter(p.rank for p in pauses)
    return PauseAnalysis(
        pauses=tuple(pauses),
        median_step_s=median,
        every_steps=_period([p.step for p in pauses]) if len(pauses) > 1 else None,
        ranks=tuple(r for r, _ in counts.most_common()),
        longest_s=max(p.seconds for p in pauses),
        total_s=total,
        share_pct=100.0 * total / first_rank if first_rank > 0 else 0.0,
    )
