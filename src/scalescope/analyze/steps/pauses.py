"""Pauses: steps that took many typical steps on every rank, and completed.

A rank that writes a checkpoint (or evaluates) every N steps holds the others in their next
collective for as long as it writes. The run does not hang, but its steps then last ten or a
hundred typical steps, and the hang watch, whose default threshold is 10 typical steps (at
least 30 s), would call a long enough pause a hang. This names the pauses, the rank that
paused (the one that waited least in the step's collectives: the others waited for it) and
their period, so the report can say which ``--hang-after`` keeps the watch quiet.

A long step is a pause only when the job stopped on purpose: the rank that paused spent most
of it evaluating or saving a checkpoint (its ``eval`` and ``checkpoint`` phases), or no rank
waited in a collective for most of it (every rank paused itself). One rank's stall outside
those phases while the others wait for it (a garbage collection, a page fault storm) is a
straggler's step, and stays in the analysis.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import distinct
from scalescope.analyze.ranks.summary_waits import summarised_steps
from scalescope.events import EventTable, Kind
from scalescope.events.schema import EXTRA_PHASES

PAUSE_FACTOR = 10.0
"""A step is a pause when every rank took this many median steps for it ..."""
MIN_PAUSE_S = 1.0
"""... and at least this long."""
OWN_SHARE = 0.5
"""The share of a pause step the pausing rank spends evaluating or saving, or below which
every rank's longest wait stays, for the step to be the job's pause (not one rank's stall)."""


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
    (``steps`` sorted). A step recorded as summaries (``--record summary``) has its calls'
    time per group, op and size class instead: the longest of those sums."""
    rows = events.of_kind(Kind.COLLECTIVE)
    summarised = summarised_steps(events)
    if len(summarised):
        summaries = events.of_kind(Kind.SUMMARY)
        summaries = summaries.select(np.isin(summaries.step, summarised))
        rows = EventTable.concat([rows, summaries])
    mine = np.isin(rows.step, steps) & (rows.dur_ns > 0) & (rows.rank < world)
    out = np.zeros((len(steps), world), dtype=np.int64)
    at = np.searchsorted(steps, rows.step[mine])
    np.maximum.at(out, (at, rows.rank[mine].astype(np.int64)), rows.dur_ns[mine])
    return out


def _paused_work(events: EventTable, steps: list[int], world: int) -> np.ndarray:
    """[pause, rank]: the rank's time in evaluation and checkpoint phases in that step (ns)."""
    rows = events.of_kind(Kind.PHASE)
    ids = [rows.symbols.id_of(p) for p in EXTRA_PHASES if p in rows.symbols]
    mine = np.isin(rows.name, ids) & np.isin(rows.step, steps) & (rows.rank < world)
    mine &= rows.dur_ns > 0
    out = np.zeros((len(steps), world), dtype=np.int64)
    at = np.searchsorted(steps, rows.step[mine])
    np.add.at(out, (at, rows.rank[mine].astype(np.int64)), rows.dur_ns[mine])
    return out


def _is_pause(step_ns: float, waits: np.ndarray, work_ns: float) -> bool:
    """The job's pause: the pausing rank evaluated or saved for most of the step, or no rank
    waited for another for most of it; else one rank's stall the others waited for."""
    return work_ns >= OWN_SHARE * step_ns or waits.max() < OWN_SHARE * step_ns


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
    world = int(everyone.max()) + 1
    waits = _longest_waits(events, long_steps, world)
    work = _paused_work(events, long_steps, world)
    pauses = []
    for i, step in enumerate(long_steps):
        rank = int(everyone[np.argmin(waits[i, everyone])])
        step_ns = float(durs[(steps == step) & (ranks == rank)].max())
        if _is_pause(step_ns, waits[i, everyone], float(work[i, rank])):
            pauses.append(Pause(step, rank, step_ns / 1e9))
    if not pauses:
        return None
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
