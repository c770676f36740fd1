"""The what-if gain's bootstrap interval (analyze/model/bootstrap.py) against a plain loop,
its coverage on synthetic normal steps, and on a what-if's fixes."""

from __future__ import annotations

import time

import numpy as np
import pytest

from scalescope.analyze.model.bootstrap import (
    MODEL_ERROR,
    block_length,
    gain_interval,
    period_of,
    rerun_interval,
    resampled_means,
)


def _reference(measured: np.ndarray, fixed: np.ndarray, paired: bool, seed: int = 49,
               resamples: int = 1000) -> tuple[float, float]:  # fmt: skip
    """The percentile bootstrap one resample at a time, in plain Python (paired: circular
    blocks of the gains' period, one step where they have none)."""
    rng = np.random.default_rng(seed)
    n_m, n_f = len(measured), len(fixed)
    if paired:
        diffs = [m - f for m, f in zip(measured, fixed, strict=True)]
        period = period_of(np.array(diffs))
        blocks = -(-n_m // period)
        means = []
        for _ in range(resamples):
            starts = rng.integers(0, n_m, size=blocks)
            picks = [(int(b) + j) % n_m for b in starts for j in range(period)][:n_m]
            means.append(sum(diffs[i] for i in picks) / n_m)
    else:
        a = [sum(measured[i] for i in rng.integers(0, n_m, size=n_m)) / n_m
             for _ in range(resamples)]  # fmt: skip
        b = [sum(fixed[i] for i in rng.integers(0, n_f, size=n_f)) / n_f
             for _ in range(resamples)]  # fmt: skip
        means = [x - y for x, y in zip(a, b, strict=True)]
    means.sort()
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def test_paired_interval_is_the_plain_loops() -> None:
    rng = np.random.default_rng(1)
    measured = 40 + rng.normal(0, 3, 26)
    fixed = measured - 10 - rng.normal(0, 1, 26)
    low, high = gain_interval(measured, fixed, paired=True)
    ref = _reference(measured, fixed, paired=True)
    assert np.allclose((low, high), ref)
    assert low < float(np.mean(measured - fixed)) < high


def test_a_cost_every_k_steps_is_resampled_in_blocks_of_k() -> None:
    """An evaluation every 5 steps (of varying length): its period is found, each resample
    holds it once a block, and the interval is the plain loop's and narrower than single
    steps' (which draw it 0 to 8 times in 20 steps)."""
    rng = np.random.default_rng(3)
    fixed = 30 + rng.normal(0, 1, 20)
    measured = fixed + rng.normal(0, 0.5, 20)
    measured[1::5] += (140, 100, 20, 80)
    gains = measured - fixed
    assert period_of(gains) == 5
    low, high = gain_interval(measured, fixed, paired=True)
    assert np.allclose((low, high), _reference(measured, fixed, paired=True))
    rng_single = np.random.default_rng(49)
    single = np.percentile(resampled_means(gains, rng_single, 1000), (2.5, 97.5))
    assert high - low < 0.7 * (single[1] - single[0])
    assert low <= gains.mean() <= high


def test_a_checkpoint_of_uneven_saves_every_6_steps_has_its_period() -> None:
    """The fault matrix's gpt-rank0-checkpoint: saves of 106, 149, 30 and 33 ms."""
    gains = np.zeros(26)
    gains[2::6] = (106.5, 149.4, 29.6, 32.9)
    assert period_of(gains) == 6


def test_a_stall_every_10_steps_with_a_spike_beside_one_has_its_period() -> None:
    """Seed 4903's ddp-periodic-stall: 152 ms at steps 9, 19 and 29 of 4-29, 15 ms at 20;
    26 steps hold 3 blocks of 10, the last one cut."""
    gains = np.zeros(26)
    gains[[5, 15, 25]] = (150.1, 152.3, 150.8)
    gains[16] = 15.3
    assert period_of(gains) == 10
    gains[16] = 0.0
    assert period_of(gains) == 10


def test_noise_and_a_steady_gain_have_no_period() -> None:
    assert period_of(np.full(20, 3.0)) == 1
    assert period_of(np.array([0, 9, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 9, 0, 0, 0], float)) == 1
    assert period_of(np.array([0, 9, 0, 0, 9, 0, 0, 9, 0, 0, 9, 0], float)) == 3


def test_unpaired_interval_is_the_plain_loops() -> None:
    rng = np.random.default_rng(2)
    measured, fixed = 70 + rng.normal(0, 4, 15), 40 + rng.normal(0, 2, 10)
    assert np.allclose(gain_interval(measured, fixed, paired=False),
                       _reference(measured, fixed, paired=False))  # fmt: skip


def test_a_reruns_interval_is_the_unpaired_one_widened_by_the_model_error() -> None:
    """The steps resampled apart (the plain loop's unpaired interval), and MODEL_ERROR of
    the gain either side: wider than the paired interval, whose common jitter cancels."""
    rng = np.random.default_rng(5)
    fixed = 40 + rng.normal(0, 3, 24)
    measured = fixed + 10 + rng.normal(0, 0.3, 24)
    gain = float(measured.mean() - fixed.mean())
    low, high = rerun_interval(measured, fixed, gain)
    ref = _reference(measured, fixed, paired=False)
    assert low == pytest.approx(ref[0] - MODEL_ERROR * gain)
    assert high == pytest.approx(ref[1] + MODEL_ERROR * gain)
    paired = gain_interval(measured, fixed, paired=True)
    assert low < paired[0] < gain < paired[1] < high
    assert rerun_interval(measured, np.array([]), gain) == (0.0, 0.0)


def test_block_sums_are_the_resampled_steps_means() -> None:
    """The means read from block sums are those of the steps the blocks hold (circular,
    the last block cut to n steps), one resample at a time."""
    values = np.random.default_rng(4).normal(10, 3, 23)
    for length in (1, 4, 5):
        got = resampled_means(values, np.random.default_rng(5), 50, length)
        rng, blocks = np.random.default_rng(5), -(-23 // length)
        for mean in got:
            starts = rng.integers(0, 23, size=blocks)
            picks = [(int(b) + j) % 23 for b in starts for j in range(length)][:23]
            assert mean == pytest.approx(values[picks].mean())


def test_a_long_run_is_resampled_in_at_most_500_blocks_quickly() -> None:
    assert block_length(300) == 1 and block_length(300, 5) == 5
    assert block_length(10_000) == 20 and block_length(10_000, 3) == 21
    rng = np.random.default_rng(6)
    measured = 40 + rng.normal(0, 3, 10_000)
    fixed = measured - 10 + rng.normal(0, 1, 10_000)
    started = time.perf_counter()
    low, high = gain_interval(measured, fixed, paired=True)
    assert time.perf_counter() - started < 0.5
    assert low < 10.0 < high and high - low < 0.2


def test_covers_the_true_gain_about_95_percent() -> None:
    """On normal steps with a known mean gain of 5 ms, the interval holds it in about 95 %
    of draws (a percentile bootstrap of 25 steps runs a little narrow)."""
    rng = np.random.default_rng(7)
    held = 0
    trials = 300
    for trial in range(trials):
        measured = 50 + rng.normal(0, 4, 25)
        fixed = measured - 5 + rng.normal(0, 2, 25)
        low, high = gain_interval(measured, fixed, paired=True, resamples=400, seed=trial)
        held += low <= 5.0 <= high
    assert 0.88 <= held / trials <= 0.99


def test_reproducible_and_degenerate() -> None:
    a, b = np.array([3.0, 5.0, 4.0]), np.array([1.0, 2.0, 1.5])
    assert gain_interval(a, b, paired=True) == gain_interval(a, b, paired=True)
    assert gain_interval(np.array([2.0]), np.array([1.0]), paired=True) == (1.0, 1.0)
    assert gain_interval(np.array([]), b, paired=False) == (0.0, 0.0)
