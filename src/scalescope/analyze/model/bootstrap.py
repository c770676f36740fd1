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
MAX_DRAWS = 4_000_000
"""Indices drawn at once: a long run's resamples are drawn in blocks under this bound."""


def resampled_means(
    values: np.ndarray, rng: np.random.Generator, resamples: int, period: int = 1
) -> np.ndarray:
    """The means of ``resamples`` resamples of ``values`` (n of them, with replacement):
    ``ceil(n / period)`` circular blocks of ``period`` steps each, cut to n (``period`` 1:
    single steps), drawn a batch of resamples at a time (the same draws as one at a time)."""
    n = values.size
    blocks = math.ceil(n / period)
    out = np.empty(resamples)
    batch = max(1, MAX_DRAWS // max(blocks * period, 1))
    for start in range(0, resamples, batch):
        stop = min(start + batch, resamples)
        starts = rng.integers(0, n, size=(stop - start, blocks))
        picks = (starts[:, :, None] + np.arange(period)).reshape(stop - start, -1)[:, :n] % n
        out[start:stop] = values[picks].mean(axis=1)
    return out


def period_of(gains: np.ndarray) -> int:
    """The period at which the largest per-step gains recur: the greatest common divisor of
    the gaps between the steps above half-way from the median to the largest gain, when at
    least 3 such steps are at least 2 apart (a cost every k steps); else 1."""
    n = gains.size
    if n < 6:
        return 1
    mid = float(np.median(gains))
    big = np.flatnonzero(gains > mid + (float(gains.max()) - mid) / 2)
    if big.size < 3 or gains.max() <= mid:
        return 1
    period = math.gcd(*(int(g) for g in np.diff(big)))
    return period if 2 <= period <= n // 3 else 1


def gain_interval(
    measured_ms: np.ndarray, fixed_ms: np.ndarray, paired: bool,
    resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL,
) -> tuple[float, float]:  # fmt: skip
    """The ``level`` percentile bootstrap interval of ``mean(measured) - mean(fixed)`` (ms).
    ``paired``: the two are the same steps, resampled together (their per-step differences);
    else each set is resampled on its own. (0, 0) when either set has no step."""
    measured_ms, fixed_ms = np.asarray(measured_ms, float), np.asarray(fixed_ms, float)
    if measured_ms.size == 0 or fixed_ms.size == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    if paired:
        gains = measured_ms - fixed_ms
        means = resampled_means(gains, rng, resamples, period_of(gains))
    else:
        means = resampled_means(measured_ms, rng, resamples) - resampled_means(
            fixed_ms, rng, resamples
        )
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(means, (tail, 100.0 - tail))
    return float(low), float(high)
