"""Each fix's change to the model (step_grid.py): ranks at the pace of the others, or as in
the steps before their extra work began mid-run; own time and transfers scaled; a phase taken
out; a delay planted (the tests' known cause)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scalescope.analyze.model.pacing import at_peers_pace
from scalescope.analyze.model.step_grid import StepGrid

ONSET_MIN_STEPS = 3
"""Steps on each side of a cause that began mid-run, at least."""
ONSET_HOLD_SHARE = 0.8
"""The share of the steps after an onset whose excess stays above the floor, at least."""


def rank_index(grid: StepGrid, ranks: list[int]) -> np.ndarray:
    missing = sorted(set(ranks) - set(grid.ranks.tolist()))
    if missing:
        known = describe_ranks(grid.ranks)
        raise ValueError(f"rank {', '.join(map(str, missing))} is not in the model (ranks {known})")
    return np.searchsorted(grid.ranks, ranks)


def onset(grid: StepGrid, idx: np.ndarray) -> int | None:
    """The row from which the ranks ``idx`` do clearly more own work than the others, when
    they did not before it (a cause that began mid-run); None otherwise. The split of their
    excess into two levels is an onset only when the new level holds (``_holds``) and the
    steps before it are a run without it: not slower on the other ranks too (a warm-up)."""
    own = grid.own_ns()
    others = np.ones(len(grid.ranks), dtype=bool)
    others[idx] = False
    if not others.any():
        return None
    peers = np.median(own[:, others], axis=1)
    excess = own[:, idx].mean(axis=1) - peers
    return level_shift(excess, peers, 0.05 * float(np.median(grid.step_ns)))


def level_shift(excess: np.ndarray, peers: np.ndarray, floor: float) -> int | None:
    """``onset`` of a series: the step (index) where ``excess`` (the ranks' own time above
    their peers', step by step) shifts to a level that holds, above ``floor``, when the
    peers' own time (``peers``) was no higher before it (a warm-up); None otherwise."""
    if len(excess) < 2 * ONSET_MIN_STEPS:
        return None
    splits = range(ONSET_MIN_STEPS, len(excess) - ONSET_MIN_STEPS + 1)
    x = min(splits, key=lambda i: _spread(excess[:i]) + _spread(excess[i:]))
    warm_up = np.median(peers[:x]) > np.median(peers[x:]) + floor
    return x if _holds(excess[:x], excess[x:], floor) and not warm_up else None


def _holds(before: np.ndarray, after: np.ndarray, floor: float) -> bool:
    """A level shift that holds: most steps after it above ``floor`` and their median far
    above the median before; and the steps before below on average too (under the floor or
    a quarter of the new level), so that work every k steps, which the steps before share,
    is never taken for an onset with them as the run without it."""
    level = float(np.median(after))
    return (
        level > floor
        and float(np.mean(after > floor)) >= ONSET_HOLD_SHARE
        and float(np.median(before)) < 0.25 * level
        and float(np.mean(before)) < max(floor, 0.25 * level)
    )


def _spread(a: np.ndarray) -> float:
    """Absolute deviations from the median, summed: the split of a series into the two
    parts that spread least is where it changed level (robust to one-off slow steps)."""
    return float(np.abs(a - np.median(a)).sum())


def before_onset(x: int) -> slice:
    """The rows a cause that began at row ``x`` is judged by: the steps before it, less
    their first quarter (a run's first steps carry its start-up: first iterations, the
    allocator growing)."""
    return slice(x // 4, x)


def fix_ranks(
    grid: StepGrid, idx: np.ndarray, rows: np.ndarray | None = None
) -> tuple[StepGrid, str, slice | None]:
    """The ranks ``idx`` fixed. Where their extra work began mid-run, the steps before it
    are the run without it: the rows to replay instead (what the others lost since, caches
    cold after waiting, cores shared differently, goes with the cause). Otherwise those
    ranks work at the pace of the others, step by step (``at_peers_pace``: their late
    completions of collectives too, told over ``rows``, the measured steps)."""
    x = onset(grid, idx)
    if x is None:
        return at_peers_pace(grid, idx, rows), "at the pace of the other ranks", None
    rows = before_onset(x)
    first, last = int(grid.steps[rows.start]), int(grid.steps[x - 1])
    return grid, f"began at step {int(grid.steps[x])}: as in steps {first}-{last}", rows


def scaled(
    grid: StepGrid, compute: float = 1.0, comm: float = 1.0, only: np.ndarray | None = None
) -> StepGrid:
    """Own time divided by ``compute``, transfers by ``comm`` (``inf``: no transfer time);
    with ``only`` ((ranks, collectives) of bool), only those collectives' transfers."""
    if compute <= 0 or comm <= 0:
        raise ValueError("speed-ups must be positive")
    transfer = grid.transfer_ns / comm
    if only is not None:
        transfer = np.where(only, transfer, grid.transfer_ns)
    return replace(
        grid, work_ns=grid.work_ns / compute, prejoin_ns=grid.prejoin_ns / compute,
        post_ns=grid.post_ns / compute, transfer_ns=transfer,
    )  # fmt: skip


def with_delay(grid: StepGrid, rank: int, delay_ns: float, at: int = 0) -> StepGrid:
    """``rank`` slower by ``delay_ns`` per step, in its own time before collective ``at``
    (``at`` = the number of collectives: after the join)."""
    i = int(rank_index(grid, [rank])[0])
    if at >= grid.shape[2]:
        post = grid.post_ns.copy()
        post[:, i] += delay_ns
        return replace(grid, post_ns=post)
    work = grid.work_ns.copy()
    work[:, i, at] += delay_ns
    return replace(grid, work_ns=work)


def without_phase(grid: StepGrid, name: str) -> StepGrid:
    """Every rank's own time less the phase ``name`` (input waits gone, no evaluation)."""
    parts = grid.phase_ns[name]
    k = grid.shape[2]
    return replace(
        grid,
        work_ns=np.maximum(grid.work_ns - parts[:, :, :k], 0.0),
        prejoin_ns=np.maximum(grid.prejoin_ns - parts[:, :, k], 0.0),
        post_ns=np.maximum(grid.post_ns - parts[:, :, k + 1], 0.0),
    )


def describe_ranks(ranks: np.ndarray) -> str:
    return f"{int(ranks[0])}-{int(ranks[-1])}" if len(ranks) > 1 else str(int(ranks[0]))
