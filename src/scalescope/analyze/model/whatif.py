"""What fixing a cause would buy: the measured steps replayed (replay.py) with some of the
durations of the model (step_grid.py) replaced. A rank at the pace of the ranks doing the same
work (the median of the others, step by step), or, where its extra time began mid-run, the
steps before it; a phase taken out; faster compute, faster communication; several at once.
The causes by name and the ones tried: causes.py; what each fix changes in the model: fixes.py.
A cause the model refuses (a link with no group of its shape elsewhere, a node no rank ran on)
is one line of ``WhatIf.refused``; the other fixes stay.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scalescope.analyze.model.bootstrap import (
    gain_interval,
    period_of,
    rerun_interval,
    stratified_intervals,
)
from scalescope.analyze.model.causes import apply_fix, candidate_causes, phases_named
from scalescope.analyze.model.link_fix import ideal_with_links
from scalescope.analyze.model.pacing import at_own_median, slow_ranks
from scalescope.analyze.model.replay import (
    Prediction,
    ReplayTimes,
    predict,
    predict_steps,
    replay,
)
from scalescope.analyze.model.run_gain import RunGain, fused_gain, rank_gain, work_gain
from scalescope.analyze.model.step_grid import StepGrid, build_grid
from scalescope.analyze.model.unit_fuse import FUSED
from scalescope.analyze.model.window_sample import Strata, window_strata, with_run_sample
from scalescope.analyze.ranks.clocks import ClockAlignment, align_clocks
from scalescope.events import Run


@dataclass(frozen=True)
class Fix:
    cause: str
    """``rank:N``, ``compute:x1.5``, ``comm:x2``, ``comm:hidden``, ``comm:hidden@dim:tp``, or
    several joined by ``+``."""
    prediction: Prediction
    gain_ms: float
    """The mean replayed step as measured minus the mean step with the cause fixed (both
    since ``since_step`` when the cause began mid-run)."""
    gain_pct: float
    samples_per_s: float | None
    """Training samples per second after the fix (None when steps count no samples)."""
    note: str = ""
    since_step: int | None = None
    """The step its cause began at, where it began mid-run: the gain is per step since."""
    gain_low_ms: float | None = None
    gain_high_ms: float | None = None
    """The gain's 95 % bootstrap interval over the steps (bootstrap.py): how well the mean
    gain is known, the verdict's range of its cost. None where no steps were resampled."""
    rerun_low_ms: float | None = None
    rerun_high_ms: float | None = None
    """What a re-run without the cause would measure against this run, 95 %
    (``bootstrap.rerun_interval``: the steps resampled apart, the replay's own error added):
    the range the fault matrix holds the measured gain to."""


@dataclass(frozen=True)
class WhatIf:
    measured_step_ms: float
    replayed: Prediction
    """The measured durations replayed: within a few % of ``measured_step_ms`` when the
    model fits the run; the fixes' gains are counted from it."""
    fixes: tuple[Fix, ...]
    steps: int
    ranks: int
    collectives_per_step: int
    left_out: tuple[str, ...] = ()
    ideal: Prediction | None = None
    """The step with every slow rank, node and link fixed at once (``ideal``, pacing.py)."""
    refused: tuple[tuple[str, str], ...] = ()
    """(cause, why in one line) for each cause the model could not replay."""
    steady: Prediction | None = None
    """The steps replayed with each rank's own time at its own median (``at_own_median``):
    the run without jitter."""
    jitter_ms: float | None = None
    """The replay as measured minus ``steady`` (mean steps): what the ranks' step-to-step
    spread costs, the slowest of several noisy ranks setting each step's pace. No fix of a
    rank's buys it back, and no rank is credited with it."""
    beyond_spread: tuple[str, ...] = ()
    """``rank:N`` and ``node:HOST`` of the ranks and nodes slower than their peers beyond the
    steps' spread (``slow_ranks``): the only ranks and nodes that are causes."""
    windows: tuple[int, ...] = ()
    """The steps replayed, where the run recorded the others as summaries (``--record
    summary``: only its full-row windows can be replayed); () for a run recorded in full."""
    kept: tuple[int, ...] = ()
    """Those of ``windows`` whose full rows the flight recorders kept (``events/window-*``,
    a slowdown's or a flush request's), not the regular windows."""

    @property
    def slowdown(self) -> float | None:
        """S = the replay as measured / the ideal step (mean steps)."""
        if self.ideal is None or self.ideal.mean_ms <= 0:
            return None
        return self.replayed.mean_ms / self.ideal.mean_ms

    @property
    def best(self) -> Fix | None:
        """The fix with the largest gain; None without fixes."""
        return max(self.fixes, key=lambda f: f.gain_ms, default=None)


def hosts_of(run: Run) -> dict[int, str]:
    return {r: m.hostname for r, m in run.ranks.items()}


def measured_rows(grid: StepGrid, warmup_steps: int) -> tuple[np.ndarray, list[str]]:
    """The rows past the warm-up (every row when none is), and a note when none was."""
    rows = grid.steps >= warmup_steps
    if rows.any():
        return rows, []
    return np.ones_like(rows), ["no step after the warm-up: every step counted"]


def what_if(
    run: Run, warmup_steps: int = 1, causes: list[str] | None = None, last: int | None = None,
    extra: tuple[str, ...] = (), clocks: tuple[ClockAlignment, ...] | None = None,
) -> WhatIf | None:  # fmt: skip
    """The measured steps (``step >= warmup_steps``; every step when none is) replayed as
    measured and with each cause fixed (default: ``candidate_causes`` and ``extra``, largest
    gain first). The replay runs over every recorded step, so a cause that began in the
    warm-up is seen beginning. None when the run gives no model (``build_grid``). ``last``:
    replay only the last that many steps (the report's bound on a long run's cost);
    ``clocks``: the run's alignment when the caller has it."""
    grid, left = replay_grid(run, warmup_steps, causes, last, clocks)
    if grid is None:
        return None
    return with_kept(what_if_of(grid, left, hosts_of(run), warmup_steps, causes, extra), run)


def replay_grid(
    run: Run, warmup_steps: int, causes: list[str] | None = None, last: int | None = None,
    clocks: tuple[ClockAlignment, ...] | None = None,
) -> tuple[StepGrid | None, list[str]]:  # fmt: skip
    """The model ``what_if`` replays (``build_grid``, and what the summaries say of the
    steps recorded as summaries, window_sample.py), and what building it left out: the one
    model every surface replays, so that ``scalescope whatif`` says what the report says."""
    clocks = clocks if clocks is not None else align_clocks(run)
    grid, left = build_grid(run, last=last, phases=phases_named(causes), clocks=clocks)
    if grid is None:
        return None, left
    return with_run_sample(grid, run, warmup_steps, clocks), left


def with_kept(result: WhatIf, run: Run) -> WhatIf:
    """``result`` naming those of its windows whose full rows the flight recorders kept."""
    kept = set(run.kept_steps)
    return replace(result, kept=tuple(s for s in result.windows if s in kept))


def what_if_of(
    grid: StepGrid, left: list[str], hosts: dict[int, str], warmup_steps: int,
    causes: list[str] | None = None, extra: tuple[str, ...] = (),
) -> WhatIf:  # fmt: skip
    """``what_if`` on a grid already built (``left``: what building it left out). A cause
    the model refuses is one entry of ``refused``; ReplayRefused when not even the steps as
    measured can be replayed."""
    rows, none_measured = measured_rows(grid, warmup_steps)
    base, base_steps = predict_steps(grid, "as measured", rows)
    samples = float(np.median(grid.samples[rows].sum(axis=1)))
    chosen = causes is None
    if causes is None:
        found = candidate_causes(grid, hosts, rows=rows)
        causes = found + [c for c in dict.fromkeys(extra) if c not in found]
    fixes, refused = [], []
    strata = window_strata(grid, rows)
    for cause in causes:
        try:
            fixed, note, before = apply_fix(grid, cause, hosts, rows)
            after, after_steps = predict_steps(fixed, cause, rows if before is None else before)
        except ValueError as exc:
            refused.append((cause, str(exc)))
            continue
        since, measured, measured_steps = _since(grid, rows, before, (base, base_steps))
        rate = samples / after.mean_ms * 1e3 if samples > 0 and after.mean_ms > 0 else None
        gain, pct, note, since, bounds = _gain(
            grid, rows, cause, (measured, measured_steps), (after, after_steps), before is None,
            strata, note, since,
        )  # fmt: skip
        fixes.append(Fix(cause, after, gain, pct, rate, note, since, *bounds))
    if chosen:
        fixes.sort(key=lambda f: -f.gain_ms)
    ideal_step = predict(ideal_with_links(grid, hosts, rows), "ideal", rows)
    slow, slow_nodes = slow_ranks(grid, hosts, rows)
    steady = predict(at_own_median(grid, rows, keep=slow), "steady", rows)
    beyond = (*(f"node:{h}" for h in slow_nodes), *(f"rank:{int(r)}" for r in grid.ranks[slow]))
    windows = tuple(int(s) for s in grid.steps[rows]) if grid.summarised else ()
    return WhatIf(
        measured_step_ms=float(np.median(np.median(grid.step_ns[rows], axis=1))) / 1e6,
        replayed=base, fixes=tuple(fixes), steps=int(rows.sum()), ranks=grid.shape[1],
        collectives_per_step=grid.shape[2], left_out=(*left, *none_measured),
        ideal=ideal_step, refused=tuple(refused), steady=steady,
        jitter_ms=base.mean_ms - steady.mean_ms, beyond_spread=beyond,
        windows=windows,
    )  # fmt: skip


def _gain(
    grid: StepGrid, rows: np.ndarray, cause: str, measured: tuple[Prediction, np.ndarray],
    after: tuple[Prediction, np.ndarray], paired: bool, strata: Strata | None, note: str,
    since: int | None,
) -> tuple[float, float, str, int | None, tuple[float, ...]]:  # fmt: skip
    """A fix's gain (ms, % of the step as measured), note, onset and intervals (the gain's,
    a re-run's): where the run was recorded as summaries, one rank's fix costed over the
    run (run_gain.py) and the others' steps weighed by it (window_sample.py); else the
    replayed steps' mean and their bootstrap."""
    (base, measured_ms), (fixed, fixed_ms) = measured, after
    whole = _over_the_run(grid, rows, cause, measured_ms, fixed_ms) if paired else None
    if whole is not None:
        pct = 100.0 * whole.gain_ms / base.mean_ms if base.mean_ms > 0 else 0.0
        bounds = (whole.low_ms, whole.high_ms, whole.rerun_low_ms, whole.rerun_high_ms)
        return whole.gain_ms, pct, whole.note or note, whole.since_step, bounds
    if paired and strata is not None:
        gain, pct, *weighed = _weighed(measured_ms, fixed_ms, strata)
        return gain, pct, note, since, tuple(weighed)
    gain = base.mean_ms - fixed.mean_ms
    pct = 100.0 * gain / base.mean_ms if base.mean_ms > 0 else 0.0
    period = period_of(np.asarray(measured_ms) - np.asarray(fixed_ms)) if paired else 1
    low, high = gain_interval(measured_ms, fixed_ms, paired, period)
    rerun = rerun_interval(measured_ms, fixed_ms, gain, period)
    return gain, pct, note, since, (low, high, *rerun)


def _over_the_run(
    grid: StepGrid, rows: np.ndarray, cause: str, measured_ms: np.ndarray, fixed_ms: np.ndarray
) -> RunGain | None:
    """One rank's fix, work beside training taken out, or FSDP's units merged, costed over
    the run where it was recorded as summaries (run_gain.py); None for any other cause or a
    run recorded in full."""
    kind, _, value = cause.partition(":")
    if cause == FUSED:
        return fused_gain(grid, rows, measured_ms, fixed_ms)
    if grid.sample is not None and kind == "phase" and value in grid.sample.work_ns:
        return work_gain(grid, rows, value, measured_ms, fixed_ms)
    if grid.sample is None or kind != "rank" or not value.isdigit():
        return None
    i = int(np.searchsorted(grid.ranks, int(value)))
    if i >= len(grid.ranks) or grid.ranks[i] != int(value):
        return None
    return rank_gain(grid, rows, i, measured_ms, fixed_ms)


def _weighed(measured_ms: np.ndarray, fixed_ms: np.ndarray, strata: Strata) -> tuple[float, ...]:
    """A fix's gain (ms and % of the step as measured) over windows that sample the run in
    strata (window_sample.py): each step weighed by its stratum's share of the run; then its
    bootstrap and re-run intervals, resampled within the strata."""
    weights = strata.weights()
    measured = float(weights @ np.asarray(measured_ms, float))
    gain = measured - float(weights @ np.asarray(fixed_ms, float))
    pct = 100.0 * gain / measured if measured > 0 else 0.0
    bounds = stratified_intervals(measured_ms, fixed_ms, strata.work, strata.share, gain)
    return gain, pct, *bounds


def _since(
    grid: StepGrid, rows: np.ndarray, before: slice | None, base: tuple[Prediction, np.ndarray]
) -> tuple[int | None, Prediction, np.ndarray]:
    """For a cause that began mid-run (``before``: the rows it is judged by), its first step
    and the measured steps since it replayed (and their steps, ms): what the fix is counted
    against, so that the steps before it, which it did not slow, do not dilute its cost.
    Else None and ``base``."""
    if before is None:
        return None, *base
    since = rows & (np.arange(grid.shape[0]) >= before.stop)
    if not since.any():
        return None, *base
    return int(grid.steps[before.stop]), *predict_steps(grid, "as measured", since)


def every_cause_replayed(result: WhatIf | None) -> WhatIf | None:
    """``result``; ValueError with the first refused cause's reason (one line) when the
    model refused one: a cause a user named (``scalescope whatif --fix``,
    ``Recording.what_if``) is theirs to correct, not a line to pass over."""
    if result is not None and result.refused:
        raise ValueError(result.refused[0][1])
    return result


TIMELINE_STEPS = 5
TIMELINE_RANKS = 16


@dataclass(frozen=True)
class WhatIfTimeline:
    """A few steps replayed as measured and with ``cause`` fixed, for a Chrome trace."""

    cause: str
    note: str
    ranks: tuple[int, ...]
    steps: tuple[int, ...]
    """The step numbers shown, as measured (the fixed replay's rows may be earlier steps:
    ``note`` says so when the cause began mid-run)."""
    ops: tuple[str, ...]
    measured: ReplayTimes
    fixed: ReplayTimes


def _window(times: ReplayTimes, rows: np.ndarray, ranks: np.ndarray) -> ReplayTimes:
    """``times`` of ``rows`` x ``ranks``, from 0 at the first row's earliest start."""
    t0 = times.start_ns[rows[0]].min()
    pick = np.ix_(rows, ranks)
    return ReplayTimes(
        times.start_ns[pick] - t0, times.end_ns[pick] - t0,
        times.issue_ns[rows][:, ranks] - t0, times.done_ns[rows][:, ranks] - t0,
    )  # fmt: skip


def replay_timeline(
    grid: StepGrid, hosts: dict[int, str], warmup_steps: int, cause: str,
    steps: int = TIMELINE_STEPS,
) -> WhatIfTimeline:  # fmt: skip
    """The last ``steps`` measured steps of ``grid`` replayed as measured, and the same
    number replayed with ``cause`` fixed (from the steps it is judged by), on up to 16 ranks."""
    rows = measured_rows(grid, warmup_steps)[0]
    fixed, note, before = apply_fix(grid, cause, hosts, rows)
    measured = np.flatnonzero(rows)
    fixed_rows = measured if before is None else np.arange(grid.shape[0])[before]
    ranks = np.arange(min(len(grid.ranks), TIMELINE_RANKS))
    a = _window(replay(grid, keep_times=True).times, measured[-steps:], ranks)
    b = _window(replay(fixed, keep_times=True).times, fixed_rows[-steps:], ranks)
    return WhatIfTimeline(
        cause=cause, note=note, ranks=tuple(int(r) for r in grid.ranks[ranks]),
        steps=tuple(int(s) for s in grid.steps[measured[-steps:]]), ops=grid.ops,
        measured=a, fixed=b,
    )  # fmt: skip
