"""A fix's gain known to a range: the 95 % percentile bootstrap interval of the gain over the
measured steps (issue 49). The gain is a mean of steps, so its uncertainty is that of a mean:
the steps resampled with replacement, the gain computed again on each resample. The steps'
10th-90th percentile is their spread, not how well the mean is known.

Paired where the fix is replayed on the steps it is counted against (each step's gain is its
replay as measured less its replay with the fix: the steps' common jitter cancels); unpaired
where a mid-run cause's fix is judged by the steps before its onset (the two sets resampled
apart). The seed is fixed, so that a report is the same each time it is written.

A cost every k steps (an evaluation, a checkpoint) comes as often in every window of k steps:
resampling single steps would draw it 0 to 2k times in n steps, a spread the run never had.
Where the paired gains' large steps recur at a period (``period_of``), whole blocks of that
many steps are resampled (a circular block bootstrap), each holding the cost once.
"""

from __future__ import annotations

import math

import numpy as np

RESAMPLES = 1000
SEED = 49
LEVEL = 0.95
MODEL_ERROR = 0.12
"""The replay's own error, as a share of the gain, that a re-run's interval adds either side:
the conformal 90 % quantile of the widening the unpaired intervals needed to hold the gains
measured by re-runs over the fault matrix's whole run (seed 49, 46 fault cases; 28 held
without it). Out of that sample, on the 12 fault runs recorded a session earlier, it held
11. The held-out seeds (``run.py --held-out``) check it."""
MAX_BLOCKS = 500
"""A resample is at most this many blocks: a long run's steps are resampled in blocks of
``ceil(n / 500)`` (a multiple of a cost's period), so that its interval costs the same as a
500-step run's (steps a few apart are alike anyway: a slow phase lasts)."""


def block_length(n: int, period: int = 1) -> int:
    """The steps a block holds: ``period``, or the least multiple of it that leaves at most
    ``MAX_BLOCKS`` blocks."""
    period = max(period, 1)
    return period * max(1, math.ceil(math.ceil(n / MAX_BLOCKS) / period))


def resampled_means(
    values: np.ndarray, rng: np.random.Generator, resamples: int, length: int = 1
) -> np.ndarray:
    """The means of ``resamples`` resamples of ``values`` (n of them, with replacement):
    ``ceil(n / length)`` circular blocks of ``length`` steps each, the last cut so that a
    resample has n steps (``length`` 1: single steps). Each block's sum is read from the
    cumulative sums, so a resample costs its blocks, not its steps."""
    n = values.size
    blocks = math.ceil(n / length)
    last = n - (blocks - 1) * length
    ring = np.concatenate([[0.0], np.cumsum(np.concatenate([values, values[: length - 1]]))])
    whole, cut = ring[length : length + n] - ring[:n], ring[last : last + n] - ring[:n]
    starts = rng.integers(0, n, size=(resamples, blocks))
    return (whole[starts[:, :-1]].sum(axis=1) + cut[starts[:, -1]]) / n


def period_of(gains: np.ndarray) -> int:
    """The period at which the large per-step gains recur: the greatest common divisor of
    the gaps between the steps above the median by 3 robust deviations and by a tenth of the
    largest excess, when at least 3 such steps are at least 2 apart (a cost every k steps);
    else 1. A checkpoint every 6 steps whose saves took 30 to 150 ms has each one in: half-way
    to the largest kept only 2 of 4, and the steps were resampled one by one, the interval
    1-27 ms for a 12 ms cost. A period is one while the run holds 3 blocks of it (the last
    one cut): a stall every 10 steps in 26 is 3 stalls, and single steps drew none in 4 % of
    resamples, the interval down to 0 for a 17 ms/step cost. Where a smaller step among
    them breaks the spacing, the period is that of the steps half-way to the largest or
    above, when 3 or more: a 15 ms spike the step after a 152 ms stall (seed 4903's
    ddp-periodic-stall) left the stalls' 10 steps a gcd of 1."""
    n = gains.size
    if n < 6:
        return 1
    mid = float(np.median(gains))
    spread = 1.4826 * float(np.median(np.abs(gains - mid)))
    big = np.flatnonzero(gains > mid + max(3 * spread, (float(gains.max()) - mid) / 10))
    if big.size < 3 or gains.max() <= mid:
        return 1
    period = _gcd_of_gaps(big)
    largest = np.flatnonzero(gains >= mid + (float(gains.max()) - mid) / 2)
    if period < 2 and largest.size >= 3:
        period = _gcd_of_gaps(largest)
    return period if period >= 2 and math.ceil(n / period) >= 3 else 1


def _gcd_of_gaps(at: np.ndarray) -> int:
    return math.gcd(*(int(g) for g in np.diff(at)))


def gain_interval(
    measured_ms: np.ndarray, fixed_ms: np.ndarray, paired: bool, period: int | None = None,
    resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL,
) -> tuple[float, float]:  # fmt: skip
    """The ``level`` percentile bootstrap interval of ``mean(measured) - mean(fixed)`` (ms).
    ``paired``: the two are the same steps, resampled together (their per-step differences,
    in blocks of ``period``: found from them when not given); else each set is resampled on
    its own. (0, 0) when either set has no step."""
    measured_ms, fixed_ms = np.asarray(measured_ms, float), np.asarray(fixed_ms, float)
    if measured_ms.size == 0 or fixed_ms.size == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    if paired:
        gains = measured_ms - fixed_ms
        length = block_length(gains.size, period_of(gains) if period is None else period)
        means = resampled_means(gains, rng, resamples, length)
    else:
        a, b = measured_ms, fixed_ms
        means = resampled_means(a, rng, resamples, block_length(a.size)) - resampled_means(
            b, rng, resamples, block_length(b.size)
        )
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(means, (tail, 100.0 - tail))
    return float(low), float(high)


def rerun_interval(
    measured_ms: np.ndarray, fixed_ms: np.ndarray, gain_ms: float, period: int = 1,
    resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL,
) -> tuple[float, float]:  # fmt: skip
    """The gain a re-run without the cause would measure against this run, at ``level``: the
    steps as measured and as fixed resampled apart (a re-run's steps are a fresh sample, its
    jitter its own; the paired interval cancels it), in blocks of ``period`` steps (a cost
    every k steps), widened by ``MODEL_ERROR`` of the gain either side. (0, 0) when either
    set has no step."""
    measured_ms, fixed_ms = np.asarray(measured_ms, float), np.asarray(fixed_ms, float)
    if measured_ms.size == 0 or fixed_ms.size == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    a = resampled_means(measured_ms, rng, resamples, block_length(measured_ms.size, period))
    b = resampled_means(fixed_ms, rng, resamples, block_length(fixed_ms.size, period))
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(a - b, (tail, 100.0 - tail))
    margin = MODEL_ERROR * abs(gain_ms)
    return float(low) - margin, float(high) + margin


def _stratified_means(
    values: np.ndarray, work: np.ndarray, share: float, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """Resampled means of ``values``, each stratum (``work``, the rest) resampled on its own,
    their means weighed ``share`` and ``1 - share``."""
    inside = resampled_means(values[work], rng, resamples)
    outside = resampled_means(values[~work], rng, resamples)
    return share * inside + (1.0 - share) * outside


def stratified_intervals(
    measured_ms: np.ndarray, fixed_ms: np.ndarray, work: np.ndarray, share: float,
    gain_ms: float, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL,
) -> tuple[float, float, float, float]:  # fmt: skip
    """``gain_interval`` (paired) and ``rerun_interval`` of windows that sample a run in two
    strata (model/window_sample.py): the steps resampled within their stratum, each
    stratum's mean weighed by its ``share`` of the run. Both strata must hold a step."""
    measured_ms, fixed_ms = np.asarray(measured_ms, float), np.asarray(fixed_ms, float)
    tail = 100.0 * (1.0 - level) / 2.0
    rng = np.random.default_rng(seed)
    paired = _stratified_means(measured_ms - fixed_ms, work, share, rng, resamples)
    low, high = np.percentile(paired, (tail, 100.0 - tail))
    rng = np.random.default_rng(seed)
    apart = _stratified_means(measured_ms, work, share, rng, resamples) - _stratified_means(
        fixed_ms, work, share, rng, resamples
    )
    rerun_low, rerun_high = np.percentile(apart, (tail, 100.0 - tail))
    margin = MODEL_ERROR * abs(gain_ms)
    return float(low), float(high), float(rerun_low) - margin, float(rerun_high) + margin
