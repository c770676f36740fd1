"""A rank's fix, or work beside training taken out, costed over the whole run where it was
recorded as summaries (issue 50).

The what-if replays the full-row windows only (probe/windows.py), but some figures are known
at every measured step: each rank's own time (its phases less its waits in blocking
collectives, estimated from the summaries, ``RunSample.every_own_ns``: at the windows' steps
too, so that the windows and the others are measured alike) and the time of each kind of work
beside training (``RunSample.work_ns``). What the replay's gain follows is one of them: a
rank's excess over its median peer (in a synchronous job the others wait for it), the
evaluation's or the checkpoint's time. So the windows' replayed gain is carried to the run as
a ratio estimator: the gain per ms of that figure in the windows, times its mean over the
run's steps. The replay still prices each ms (what the others lose of it); the summaries say
how many there were. Merging FSDP's units (``comm:fused``) takes away the time in the many
small calls but the one merged call's, and the calls' host cost: its gain follows the time in
the units' calls (the least over the ranks: a straggler's lateness that all of them wait in
is no call's own). On gpt-rank0-eval the windows hold 2 evaluations in 8 steps, the run 4
in 20, and the windows alone put the gain at 34 ms with a range down to 0 (the replay of the
whole run: 18.7); carried, 20.8.

Where the rank's excess began after the last window (a level shift of the run's series,
``fixes.level_shift``), no window holds a step of it: as the replay judges a cause that began
mid-run (``fixes.fix_ranks``), the steps before the onset are the run without it, and the
gain is the mean step since the onset less theirs, here from every step's STEP rows
(``RunGain.since_step``). A cost of 0 for a rank the summaries show slow since step 60,
because the windows end at step 12, would say nothing of the run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.model.bootstrap import (
    LEVEL,
    MODEL_ERROR,
    RESAMPLES,
    SEED,
    block_length,
    gain_interval,
    period_of,
    rerun_interval,
    resampled_means,
)
from scalescope.analyze.model.fixes import before_onset, level_shift
from scalescope.analyze.model.peers import median_peer
from scalescope.analyze.model.step_grid import StepGrid

PER_MS_MOST = 1.0 + MODEL_ERROR
"""What fixing a rank buys per ms of its excess over its median peer, at most: the others wait
for that excess, not longer (1 ms per ms, within the replay's own error). Where the windows'
gain per ms is above it beyond the ratio's own spread, the excess does not hold the rank's
cost, and carrying the gain by that excess would multiply the run's noise; the windows' own
replay stands instead. Held-out seed 4911's FSDP2 straggler, asleep 38 ms a step at the
start of backward, had its peer's wait placed in a 4 ms forward (the root unshard's calls'
mean arrival) and mostly lost (StepSlots.whole_own_ns keeps it now): its excess read 1-14 ms
against a 39 ms replayed gain, and the gain carried at 6 to 9 ms per ms came to 44-64 ms
over its 3 pairs, 64 of a 60 ms step, where the re-runs measured 32-40."""


@dataclass(frozen=True)
class RunGain:
    gain_ms: float
    low_ms: float
    high_ms: float
    rerun_low_ms: float
    rerun_high_ms: float
    since_step: int | None = None
    """The step its excess began at, after every window; None otherwise."""
    note: str = ""


def excess_ms(total: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, ranks) of own time -> rank ``i``'s excess over its median peer and that
    peer's own time, step by step (ms)."""
    peer = total[np.arange(len(total)), median_peer(total)[:, i]]
    return (total[:, i] - peer) / 1e6, peer / 1e6


def rank_gain(
    grid: StepGrid, rows: np.ndarray, i: int, measured_ms: np.ndarray, fixed_ms: np.ndarray
) -> RunGain | None:
    """Rank ``i`` (a column of ``grid``) at its peers' pace over the run (module doc), from
    the windows' ``rows`` replayed as measured and fixed (ms, in the rows' order); None for
    a run recorded in full, or where the windows hold no excess of it to carry."""
    sample = grid.sample
    if sample is None or len(sample.steps) == 0:
        return None
    excess, peer = excess_ms(sample.every_own_ns, i)
    steps = sample.every_steps
    windows = np.isin(steps, grid.steps[rows])
    floor = 0.05 * float(np.median(grid.step_ns[rows])) / 1e6
    shift = level_shift(excess, peer, floor)
    if shift is not None and not windows[shift:].any():
        step_ms = np.median(sample.every_step_ns, axis=1) / 1e6
        return _since_onset(step_ms, shift, int(steps[shift]))
    return carried(grid, rows, excess, measured_ms, fixed_ms, most=PER_MS_MOST)


def work_gain(
    grid: StepGrid, rows: np.ndarray, kind: str, measured_ms: np.ndarray, fixed_ms: np.ndarray
) -> RunGain | None:
    """Work beside training (``kind``: eval, checkpoint) taken out, over the run: the
    windows' gain per ms of that work (on the rank that spends the most on it, step by
    step) times the run's; None for a run recorded in full or windows without it."""
    sample = grid.sample
    if sample is None or kind not in sample.work_ns:
        return None
    return carried(grid, rows, sample.work_ns[kind] / 1e6, measured_ms, fixed_ms)


def fused_gain(
    grid: StepGrid, rows: np.ndarray, measured_ms: np.ndarray, fixed_ms: np.ndarray
) -> RunGain | None:
    """FSDP's units merged (``comm:fused``), over the run: the windows' gain per ms of time
    in the units' calls (``RunSample.unit_calls_ns``) times the run's; None for a run
    recorded in full or windows without such calls."""
    sample = grid.sample
    if sample is None or sample.unit_calls_ns is None:
        return None
    return carried(grid, rows, sample.unit_calls_ns / 1e6, measured_ms, fixed_ms)


def carried(
    grid: StepGrid, rows: np.ndarray, run_x: np.ndarray, measured_ms: np.ndarray,
    fixed_ms: np.ndarray, most: float | None = None,
) -> RunGain | None:  # fmt: skip
    """The windows' replayed gain carried to the run by ``run_x`` (ms per row of
    ``RunSample.every_steps``, measured alike at every step); None where the windows hold
    none of it, or where their gain per ms of it is above ``most`` beyond its spread."""
    sample = grid.sample
    if sample is None:
        return None
    steps = sample.every_steps
    replayed = np.isin(grid.steps[rows], steps)
    x = run_x[np.searchsorted(steps, grid.steps[rows][replayed])]
    if x.sum() <= 0:
        return None
    measured, fixed = (np.asarray(a, float)[replayed] for a in (measured_ms, fixed_ms))
    step_ms = np.median(sample.every_step_ns, axis=1) / 1e6
    return _ratio(measured, fixed, x, run_x, step_ms, most)


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    tail = 100.0 * (1.0 - LEVEL) / 2.0
    low, high = np.nanpercentile(values, (tail, 100.0 - tail))
    return float(low), float(high)


def _ratio(
    measured: np.ndarray, fixed: np.ndarray, x: np.ndarray, run_x: np.ndarray,
    run_step_ms: np.ndarray, most: float | None = None,
) -> RunGain | None:  # fmt: skip
    """The ratio estimator: the windows' gain per ms of excess ``x`` times the run's mean
    excess ``run_x``; its interval the ratio's uncertainty given the windows' excess (each
    step's residual off the ratio, ``gain - ratio * x``, resampled and summed over the
    excess) and the run's excess resampled apart; a re-run's interval (``rerun_interval``)
    over the run's steps (``run_step_ms``, the STEP rows) as measured and less the ratio
    times their excess, in blocks of the excess's period. The windows' steps alone held one
    of ddp-periodic-stall's three stalls: their re-run interval, moved to the run's gain,
    was -5 to 58 ms for a 17.6 ms gain.

    The residuals, not the steps: a stall at 1 of 8 windows' steps is left out of a third of
    step resamples, whose ratio is then the noise's gain over the noise's excess (a ratio of
    two near-zero sums, of either sign): ddp-periodic-stall's interval reached below 0 for a
    152 ms stall every 10 steps. How much excess there is in the run is the run's resample.
    None where the ratio is above ``most`` beyond its spread (the lower end of its interval).
    """
    gains = measured - fixed
    ratio = gains.sum() / x.sum()
    gain = float(ratio * run_x.mean())
    rng = np.random.default_rng(SEED)
    residual = gains - ratio * x
    pick = rng.integers(0, len(x), size=(RESAMPLES, len(x)))
    ratios = ratio + residual[pick].sum(axis=1) / x.sum()
    if most is not None and _percentiles(ratios)[0] > most:
        return None
    blocks = block_length(len(run_x), period_of(run_x))  # a cost every k steps: k a block
    low, high = _percentiles(ratios * resampled_means(run_x, rng, RESAMPLES, blocks))
    rerun = rerun_interval(run_step_ms, run_step_ms - ratio * run_x, gain, period_of(run_x))
    return RunGain(gain, low, high, *rerun)


def _since_onset(step_ms: np.ndarray, shift: int, since: int) -> RunGain:
    """The mean step since the onset (row ``shift`` of the run's steps ``step_ms``, at step
    ``since``) against the steps before it (``before_onset``, as the replay's onset judges
    a fix), with the unpaired intervals of the replay's."""
    after, before = step_ms[shift:], step_ms[before_onset(shift)]
    gain = float(after.mean() - before.mean())
    low, high = gain_interval(after, before, paired=False)
    rerun = rerun_interval(after, before, gain)
    note = (
        f"began at step {since}, after the full-row windows: the steps since against "
        "the steps before, from the summaries"
    )
    return RunGain(gain, low, high, *rerun, since, note)
