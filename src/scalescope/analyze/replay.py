"""The replay of a ``StepGrid``: the steps one after another on every rank at once, a
collective starting when its group's last member arrives and completing a transfer later.
Replaying the measured durations gives back the measured steps (a sanity check only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.step_grid import StepGrid

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
    members = [[grid.group[:, k] == g for g in np.unique(grid.group[:, k])] for k in range(n_k)]
    # per collective: the earlier ones on the same group, which a rank queues behind
    queued = [[(j, grid.group[:, j] == grid.group[:, k]) for j in range(k)] for k in range(n_k)]
    for s in range(n_s):
        cursor, waited = start.copy(), np.zeros(n_r)
        done = np.empty((n_r, n_k))
        for k in range(n_k):
            issue = cursor + grid.work_ns[s, :, k]
            arrival = issue.copy()
            for j, same in queued[k]:
                arrival = np.where(same, np.maximum(arrival, done[:, j]), arrival)
            last = np.empty(n_r)
            for m in members[k]:
                last[m] = arrival[m].max()
            done[:, k] = last + grid.transfer_ns[s, :, k]
            if times is not None:
                times.issue_ns[s, :, k] = issue
            cursor = np.where(grid.blocking[s, :, k], done[:, k], issue)
            waited += np.where(grid.blocking[s, :, k], done[:, k] - issue, 0.0)
        ready = cursor + grid.prejoin_ns[s]
        latest = done.max(axis=1)
        joined = np.where(grid.joins[s], np.maximum(ready, latest), cursor)
        waited += np.where(grid.joins[s], joined - ready, 0.0)
        end = joined + grid.post_ns[s]
        durations[s], waits[s] = end - start, waited
        if times is not None:
            times.start_ns[s], times.end_ns[s], times.done_ns[s] = start, end, done
        follows = s + 1 < n_s and grid.steps[s + 1] == grid.steps[s] + 1
        start = end + grid.gap_ns[s] if follows else np.full(n_r, (end + grid.gap_ns[s]).max())
    return Replayed(durations, waits, times)


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
