"""The replay of a ``StepGrid``: the steps one after another on every rank at once, a
collective starting when its group's last member arrives and completing a transfer later.
Replaying the measured durations gives back the measured steps (a sanity check only)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from scalescope.analyze.step_grid import StepGrid, aligned, instances, last_arrivals

PERCENTILES = (10.0, 90.0)
"""The spread of a prediction: these percentiles of its steps."""


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
    # per collective: the earlier ones on the same group, which a rank queues behind
    queued = [[(j, grid.group[:, j] == grid.group[:, k]) for j in range(k)] for k in range(n_k)]
    if aligned(inst):
        members = [[inst[:, k] == i for i in np.unique(inst[:, k])] for k in range(n_k)]
        play = partial(_collectives_in_place, grid, members=members, queued=queued)
    else:
        play = partial(_collectives_in_any_place, grid, inst=inst, queued=queued)
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


def _collectives_in_place(grid: StepGrid, s: int, start, members, queued) -> Played:
    """Step ``s``'s collectives in order, each at the same place of its members' steps
    (``members``: per place, the ranks of each instance there)."""
    n_r, n_k = grid.group.shape
    cursor, waited = start.copy(), np.zeros(n_r)
    issue, done = np.empty((n_r, n_k)), np.empty((n_r, n_k))
    for k in range(n_k):
        issue[:, k] = cursor + grid.work_ns[s, :, k]
        arrival = issue[:, k].copy()
        for j, same in queued[k]:
            arrival = np.where(same, np.maximum(arrival, done[:, j]), arrival)
        for m in members[k]:
            done[m, k] = arrival[m].max()
        done[:, k] += grid.transfer_ns[s, :, k]
        blocking = grid.blocking[s, :, k]
        cursor = np.where(blocking, done[:, k], issue[:, k])
        waited += np.where(blocking, done[:, k] - issue[:, k], 0.0)
    return cursor, waited, issue, done


def _collectives_in_any_place(grid: StepGrid, s: int, start, inst, queued) -> Played:
    """Step ``s``'s collectives where an instance may sit at different places of its members'
    steps (a send and its receive): sweeps over the places until every rank is past its
    last collective; a rank goes past a blocking one once all its instance has arrived."""
    n_r, n_k = grid.group.shape
    work, transfer, blocking = grid.work_ns[s], grid.transfer_ns[s], grid.blocking[s]
    cursor, waited, at = start.copy(), np.zeros(n_r), np.zeros(n_r, dtype=np.int64)
    issue, arrival, done = (np.full((n_r, n_k), np.nan) for _ in range(3))
    while True:
        moved, pending = at.copy(), int(np.isnan(done).sum())
        for k in range(n_k):
            here = at == k
            issue[here, k] = cursor[here] + work[here, k]
            arrived = issue[:, k].copy()
            for j, same in queued[k]:
                arrived = np.where(same, np.maximum(arrived, done[:, j]), arrived)
            arrival[here, k] = arrived[here]
            complete = np.isnan(done) & ~np.isnan(last := last_arrivals(arrival, inst))
            done[complete] = last[complete] + transfer[complete]
            go = here & ~np.isnan(arrival[:, k]) & (~blocking[:, k] | ~np.isnan(done[:, k]))
            cursor[go] = np.where(blocking[go, k], done[go, k], issue[go, k])
            waited[go] += np.where(blocking[go, k], done[go, k] - issue[go, k], 0.0)
            at[go] = k + 1
        left = int(np.isnan(done).sum())
        if (at == n_k).all() and left == 0:
            return cursor, waited, issue, done
        if (at == moved).all() and left == pending:
            raise ValueError(f"step {int(grid.steps[s])}: its collectives wait on each other")


def predict(grid: StepGrid, label: str, rows: np.ndarray | None = None) -> Prediction:
    """The replay summed up over ``rows`` of the grid (default: all): the step is the
    median over ranks, then over steps."""
    played = replay(grid)
    rows = slice(None) if rows is None else rows
    per_step = np.median(played.step_ns[rows], axis=1) / 1e6
    low, high = np.percentile(per_step, PERCENTILES)
    return Prediction(
        label=label,
        step_ms=float(np.median(per_step)),
        mean_ms=float(np.mean(per_step)),
        low_ms=float(low),
        high_ms=float(high),
        wait_ms_per_rank=tuple(float(w) for w in played.wait_ns[rows].mean(axis=0) / 1e6),
    )
