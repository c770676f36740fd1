"""The replay of a ``StepGrid``: the steps one after another on every rank at once, a
collective starting when its group's last member arrives and completing a transfer later.
Replaying the measured durations gives back the measured steps (a sanity check only)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from scalescope.analyze.model.batches import held_at
from scalescope.analyze.model.step_grid import (
    StepGrid,
    aligned,
    instance_runs,
    instances,
    previous_on_group,
)

PERCENTILES = (10.0, 90.0)
"""The spread of a prediction: these percentiles of its steps."""


class ReplayRefused(ValueError):
    """No order of the collectives completes a step: the model cannot replay the run at all
    (a fix's model that cannot be replayed refuses that fix alone)."""


@dataclass(frozen=True)
class Replayed:
    step_ns: np.ndarray
    """(steps, ranks): each rank's step duration in the replay."""
    wait_ns: np.ndarray
    """(steps, ranks): time each rank waited for others or for transfers to end."""
    times: ReplayTimes | None = None
    """When asked for: when each rank issued and saw complete each collective."""


@dataclass(frozen=True)
class ReplayTimes:
    """The replay's clock (ns from the first step's start) of each step and collective."""

    start_ns: np.ndarray
    """(steps, ranks)"""
    end_ns: np.ndarray
    issue_ns: np.ndarray
    """(steps, ranks, collectives)"""
    done_ns: np.ndarray


@dataclass(frozen=True)
class Prediction:
    label: str
    step_ms: float
    """The median over steps of the median over ranks."""
    mean_ms: float
    """The mean over steps of the median over ranks: what throughput sees (work every k
    steps, an evaluation, moves it and not the median). Gains are counted on it."""
    low_ms: float
    high_ms: float
    """The 10th and 90th percentiles of the steps: the step-to-step spread."""
    wait_ms_per_rank: tuple[float, ...]


def replay(grid: StepGrid, keep_times: bool = False) -> Replayed:
    """Every step after the other on every rank at once; steps that do not follow each other
    (a left-out step between) start together. ``keep_times``: also when each collective was
    issued and completed (for a timeline)."""
    n_s, n_r, n_k = grid.shape
    start = np.zeros(n_r)
    durations, waits = np.empty((n_s, n_r)), np.empty((n_s, n_r))
    times = (
        ReplayTimes(np.empty((n_s, n_r)), np.empty((n_s, n_r)), np.empty(grid.shape),
                    np.empty(grid.shape))
        if keep_times else None
    )  # fmt: skip
    inst = instances(grid.group)
    prev = previous_on_group(grid.group)  # the collective a rank queues behind
    held = held_at(grid.waits_with, n_k)  # a batch's ops waited for at its last
    if aligned(inst):
        members = [[inst[:, k] == i for i in np.unique(inst[:, k])] for k in range(n_k)]
        play = partial(_collectives_in_place, grid, members=members, prev=prev, held=held)
    else:
        play = partial(_collectives_in_any_place, grid, inst=inst, prev=prev, held=held)
    for s in range(n_s):
        cursor, waited, issue, done = play(s, start)
        ready = cursor + grid.prejoin_ns[s]
        latest = done.max(axis=1)
        joined = np.where(grid.joins[s], np.maximum(ready, latest), cursor)
        waited += np.where(grid.joins[s], joined - ready, 0.0)
        end = joined + grid.post_ns[s]
        durations[s], waits[s] = end - start, waited
        if times is not None:
            times.start_ns[s], times.end_ns[s] = start, end
            times.issue_ns[s], times.done_ns[s] = issue, done
        follows = s + 1 < n_s and grid.steps[s + 1] == grid.steps[s] + 1
        start = end + grid.gap_ns[s] if follows else np.full(n_r, (end + grid.gap_ns[s]).max())
    return Replayed(durations, waits, times)


Played = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Per rank: where its compute stands after its last collective, the time it waited in
blocking collectives; per (rank, collective): issue and completion."""


def _queued(issue: np.ndarray, done: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Each rank's arrival at a collective issued at ``issue``: when the one it queues
    behind (``prev``, -1: none) completed, if later (NaN while that one has not)."""
    rows = np.flatnonzero(prev >= 0)
    arrival = issue.copy()
    arrival[rows] = np.maximum(issue[rows], done[rows, prev[rows]])
    return arrival


def _held(done: np.ndarray, held: list[tuple[int, np.ndarray]], n_r: int) -> np.ndarray:
    """Per rank, the latest completion of the ops it waits for at this place besides its
    own (-inf: none; NaN: one has not completed yet)."""
    out = np.full(n_r, -np.inf)
    for j, ranks in held:
        out = np.where(ranks, np.maximum(out, done[:, j]), out)
    return out


def _collectives_in_place(grid: StepGrid, s: int, start, members, prev, held) -> Played:
    """Step ``s``'s collectives in order, each at the same place of its members' steps
    (``members``: per place, the ranks of each instance there; ``held``: per place, the
    earlier ops of a batch waited for there)."""
    n_r, n_k = grid.group.shape
    cursor, waited = start.copy(), np.zeros(n_r)
    issue, done = np.empty((n_r, n_k)), np.empty((n_r, n_k))
    for k in range(n_k):
        issue[:, k] = cursor + grid.work_ns[s, :, k]
        arrival = _queued(issue[:, k], done, prev[:, k])
        for m in members[k]:
            done[m, k] = arrival[m].max()
        done[:, k] += grid.transfer_ns[s, :, k]
        blocking = grid.blocking[s, :, k]
        resume = np.maximum(done[:, k], _held(done, held[k], n_r))
        cursor = np.where(blocking, resume, issue[:, k])
        waited += cursor - issue[:, k]
    return cursor, waited, issue, done


class _Completions:
    """Instances completing as their members arrive: per instance, the members yet to arrive
    and the latest arrival so far (a look at the newcomers only, not at every instance)."""

    def __init__(self, inst: np.ndarray) -> None:
        self.inst = inst.ravel()
        self.order, self.starts = instance_runs(inst)
        self.size = np.diff(np.r_[self.starts, len(self.inst)])
        self.missing = self.size.copy()
        self.last = np.full(len(self.size), -np.inf)

    def arrive(self, flat: np.ndarray, arrival: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Elements ``flat`` (indices into the raveled grid) arrived at ``arrival``: the
        elements of the instances this completed, and their instance's last arrival."""
        ids = self.inst[flat]
        np.maximum.at(self.last, ids, arrival)
        np.subtract.at(self.missing, ids, 1)
        full = np.unique(ids[self.missing[ids] == 0])
        lens = self.size[full]
        begin = np.repeat(self.starts[full] - np.r_[0, np.cumsum(lens)[:-1]], lens)
        return self.order[begin + np.arange(lens.sum())], np.repeat(self.last[full], lens)


def _collectives_in_any_place(grid: StepGrid, s: int, start, inst, prev, held) -> Played:
    """Step ``s``'s collectives where an instance may sit at different places of its members'
    steps (a send and its receive): sweeps over the places until every rank is past its
    last collective; a rank goes past a blocking one once all its instance has arrived."""
    n_r, n_k = grid.group.shape
    work, transfer, blocking = grid.work_ns[s], grid.transfer_ns[s], grid.blocking[s]
    cursor, waited, at = start.copy(), np.zeros(n_r), np.zeros(n_r, dtype=np.int64)
    issue, arrival, done = (np.full((n_r, n_k), np.nan) for _ in range(3))
    completions = _Completions(inst)
    while True:
        moved, pending = at.copy(), int(np.isnan(done).sum())
        for k in range(n_k):
            here = at == k
            if not here.any():
                continue
            issue[here, k] = cursor[here] + work[here, k]
            arrived = _queued(issue[:, k], done, prev[:, k])
            fresh = np.flatnonzero(here & np.isnan(arrival[:, k]) & ~np.isnan(arrived))
            arrival[here, k] = arrived[here]
            if len(fresh):  # else no instance can have completed since the last look
                flat, last = completions.arrive(fresh * n_k + k, arrival[fresh, k])
                rows, cols = np.divmod(flat, n_k)
                done[rows, cols] = last + transfer[rows, cols]
            resume = np.maximum(done[:, k], _held(done, held[k], n_r))
            go = here & ~np.isnan(arrival[:, k]) & (~blocking[:, k] | ~np.isnan(resume))
            cursor[go] = np.where(blocking[go, k], resume[go], issue[go, k])
            waited[go] += cursor[go] - issue[go, k]
            at[go] = k + 1
        left = int(np.isnan(done).sum())
        if (at == n_k).all() and left == 0:
            return cursor, waited, issue, done
        if (at == moved).all() and left == pending:
            raise ReplayRefused(f"step {int(grid.steps[s])}: its collectives wait on each other")


def predict(grid: StepGrid, label: str, rows: np.ndarray | slice | None = None) -> Prediction:
    """The replay summed up over ``rows`` of the grid (default: all): the step is the
    median over ranks, then over steps."""
    return predict_steps(grid, label, rows)[0]


def predict_steps(
    grid: StepGrid, label: str, rows: np.ndarray | slice | None = None
) -> tuple[Prediction, np.ndarray]:
    """``predict``, and its steps (ms, the median over ranks of each of ``rows``): what a
    gain's bootstrap interval resamples (bootstrap.py)."""
    played = replay(grid)
    rows = slice(None) if rows is None else rows
    per_step = np.median(played.step_ns[rows], axis=1) / 1e6
    low, high = np.percentile(per_step, PERCENTILES)
    prediction = Prediction(
        label=label,
        step_ms=float(np.median(per_step)),
        mean_ms=float(np.mean(per_step)),
        low_ms=float(low),
        high_ms=float(high),
        wait_ms_per_rank=tuple(float(w) for w in played.wait_ns[rows].mean(axis=0) / 1e6),
    )
    return prediction, per_step
