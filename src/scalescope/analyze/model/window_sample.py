"""The full-row windows of ``--record summary`` as a sample of the run (issue 50).

The what-if replays only the steps written in full (probe/windows.py: the first ones and a
few every 100), but every step's phases and summaries are recorded. Two figures of the
windows alone misjudge the run:

- which ranks are slower than their peers beyond the steps' spread (peers.py): the first
  window holds 8 measured steps, too few to tell a rank late at every other step from
  noise. The test takes the summarised steps' own time too (``RunSample.own_ns``).
- a fix's gain where the cost comes at some steps only (an evaluation every 5 steps, a
  checkpoint every 6): the windows hold their own share of those steps (2 of 8 where the
  run holds 4 of 20), and a bootstrap over 8 steps finds the mean gain unknown. One rank's
  fix and the work taken out are carried to the run by what the summaries measure at every
  step (run_gain.py); the other fixes take the windows' steps in two strata, the steps with
  work beside training and the others, each weighed by its share of the run's measured
  steps and resampled within it (``Strata``).

A run recorded in full has no summarised step: ``run_sample`` is None and nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scalescope.analyze.columns.grouping import group_by
from scalescope.analyze.model.run_sample import RunSample
from scalescope.analyze.model.step_grid import StepGrid
from scalescope.analyze.model.unit_fuse import merges
from scalescope.analyze.ranks.clocks import ClockAlignment
from scalescope.analyze.ranks.summary_waits import summarised_steps, summary_waits
from scalescope.analyze.steps.step_slots import (
    StepSlots,
    measured_slots,
    with_sync_waits,
)
from scalescope.analyze.steps.summary_sync import summary_sync
from scalescope.events import EventTable, Kind, Run
from scalescope.events.schema import EXTRA_PHASES


@dataclass(frozen=True)
class Strata:
    """The windows' measured rows in two strata: with work beside training, and without."""

    work: np.ndarray
    """bool per measured row of the windows."""
    share: float
    """The run's share of measured steps with that work (windows and summaries)."""

    def weights(self) -> np.ndarray:
        """Per row: its weight in the run's mean (they sum to 1)."""
        n_work = int(self.work.sum())
        return np.where(
            self.work, self.share / n_work, (1.0 - self.share) / (len(self.work) - n_work)
        )


def work_ns(events: EventTable, steps: np.ndarray) -> dict[str, np.ndarray]:
    """Per kind of work beside training, per step of ``steps`` (sorted): its rows' time on
    the rank that spent the most on it."""
    phases = events.of_kind(Kind.PHASE)
    out = {}
    for kind in EXTRA_PHASES:
        rows = phases.select(phases.where("name", kind) & np.isin(phases.step, steps))
        per_rank = group_by(rows.step, rows.rank)
        most = np.zeros(len(steps))
        np.maximum.at(most, np.searchsorted(steps, per_rank.key(0)), per_rank.sum(rows.dur_ns))
        out[kind] = most
    return out


def unit_calls_ns(events: EventTable, steps: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Per step of ``steps`` (sorted): the time in FSDP units' calls (SUMMARY rows of the
    all-gathers and reduce-scatters ``comm:fused`` merges, unit_fuse.py ``merges``), the
    least over ``ranks`` (sorted); 0 where a rank has none (a job without units)."""
    rows = events.of_kind(Kind.SUMMARY)
    tags = np.unique(rows.tag)
    ours = tags[[merges(rows.symbols[int(t)]) for t in tags]] if len(tags) else tags
    keep = np.isin(rows.tag, ours) & np.isin(rows.step, steps) & np.isin(rows.rank, ranks)
    out = np.zeros((len(steps), len(ranks)))
    np.add.at(
        out, (np.searchsorted(steps, rows.step[keep]), np.searchsorted(ranks, rows.rank[keep])),
        rows.dur_ns[keep].astype(float),
    )  # fmt: skip
    return out.min(axis=1) if len(ranks) else np.zeros(len(steps))


def work_steps(events: EventTable) -> np.ndarray:
    """The steps at which some rank recorded evaluation or a checkpoint."""
    phases = events.of_kind(Kind.PHASE)
    extra = np.zeros(len(phases), dtype=bool)
    for kind in EXTRA_PHASES:
        extra |= phases.where("name", kind)
    return np.unique(phases.step[extra]).astype(np.int64)


def _by_step(slots: StepSlots, ranks: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-slot ``values`` as (steps, ``ranks``), and the steps: those where every one of
    ``ranks`` has a slot (the peer test pairs every rank in a step)."""
    steps = np.unique(slots.step)
    out = np.full((len(steps), len(ranks)), np.nan)
    at_rank = np.searchsorted(ranks, slots.rank)
    ok = at_rank < len(ranks)
    ok[ok] &= ranks[at_rank[ok]] == slots.rank[ok]
    out[np.searchsorted(steps, slots.step[ok]), at_rank[ok]] = values[ok]
    whole = ~np.isnan(out).any(axis=1)
    return out[whole], steps[whole]


def run_sample(
    run: Run, grid: StepGrid, warmup_steps: int, clocks: tuple[ClockAlignment, ...]
) -> RunSample | None:
    """The summaries' figures of the measured steps; None for a run recorded in full."""
    if not grid.summarised:
        return None
    events = run.events
    slots = measured_slots(events, warmup_steps)
    est = summary_waits(events, clocks, 0, every_step=True)  # its waits need no tie tolerance
    slots = with_sync_waits(events, slots, summary_sync(events, slots, est))
    own, steps = _by_step(slots, grid.ranks, slots.whole_own_ns())
    dur, _ = _by_step(slots, grid.ranks, slots.dur_ns)
    summarised = np.isin(steps, summarised_steps(events))
    work = work_steps(events)
    return RunSample(
        own_ns=own[summarised],
        steps=steps[summarised],
        every_own_ns=own,
        every_steps=steps,
        every_step_ns=dur,
        work_ns=work_ns(events, steps),
        work_steps=work,
        summarised_steps=int(summarised.sum()),
        summarised_work=int(np.isin(steps[summarised], work).sum()),
        unit_calls_ns=unit_calls_ns(events, steps, grid.ranks),
    )


def with_run_sample(
    grid: StepGrid, run: Run, warmup_steps: int, clocks: tuple[ClockAlignment, ...]
) -> StepGrid:
    """``grid`` carrying ``run_sample``'s figures (unchanged for a run recorded in full)."""
    sample = run_sample(run, grid, warmup_steps, clocks)
    return grid if sample is None else replace(grid, sample=sample)


def window_strata(grid: StepGrid, rows: np.ndarray) -> Strata | None:
    """The windows' measured ``rows`` in strata weighed by the run (module doc); None where
    the windows stand for the run as they are: no summarised step, the run in one stratum,
    or the windows holding fewer than 2 steps of a stratum (nothing of it to replay, or no
    spread of it to resample: one rank's fix and work beside training are costed over the
    run instead, run_gain.py)."""
    sample = grid.sample
    if sample is None:
        return None
    work = np.isin(grid.steps[rows], sample.work_steps)
    n_work = int(work.sum()) + sample.summarised_work
    n_run = len(work) + sample.summarised_steps
    if n_work in (0, n_run) or min(int(work.sum()), int((~work).sum())) < 2:
        return None  # a stratum of one window step has no spread to resample
    return Strata(work, n_work / n_run)
