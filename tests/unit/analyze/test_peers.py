"""Noise apart from cause (analyze/model/peers.py): a rank is slower than its peers only
beyond their step-to-step spread, Holm-corrected across ranks, by at least 2 % of the step."""

from __future__ import annotations

import numpy as np
import pytest

from scalescope.analyze.model.peers import holm, p_above_zero, slower_than_peers, t_upper

STEP = 100e6


def _noisy(steps: int, ranks: int, seed: int, sd: float = 5e6) -> np.ndarray:
    return STEP + np.random.default_rng(seed).normal(0.0, sd, (steps, ranks))


def test_no_fault_names_no_rank_over_many_draws():
    named = sum(slower_than_peers(_noisy(30, 8, seed), STEP).slower.any() for seed in range(200))
    assert named <= 4


def test_one_slow_rank_is_named_alone():
    total = _noisy(20, 8, 1)
    total[:, 5] += 10e6
    test = slower_than_peers(total, STEP)
    assert test.slower.tolist() == [i == 5 for i in range(8)]
    assert test.excess_ns[5] == pytest.approx(10e6, rel=0.5)
    assert test.p[5] < 1e-4


def test_jitter_only_the_slowest_in_each_step_is_no_cause():
    total = np.full((12, 4), STEP)
    total[np.arange(12), np.arange(12) % 4] += 40e6
    assert not slower_than_peers(total, STEP).slower.any()


def test_two_ranks_the_slower_in_every_step_of_five_is_a_cause():
    other = np.array([900.0, 950.0, 880.0, 910.0, 930.0]) * 1e6
    total = np.stack([other, other + np.array([930.0, 891.0, 962.0, 853.0, 951.0]) * 1e6], 1)
    assert slower_than_peers(total, 1800e6).slower.tolist() == [False, True]


def test_two_ranks_trading_places_is_noise():
    """The recorded balanced run's differences: rank 0 ahead in 4 of 5 steps, once far behind."""
    diff = np.array([84.2, 60.9, 358.7, -277.9, 70.2]) * 1e6
    total = np.stack([1200e6 + diff, np.full(5, 1200e6)], 1)
    test = slower_than_peers(total, 1260e6)
    assert not test.slower.any()
    assert test.p[0] > 0.1


def test_a_consistent_excess_below_the_minimum_effect_is_no_cause():
    total = np.full((50, 4), STEP) + np.random.default_rng(3).normal(0, 0.1e6, (50, 4))
    total[:, 2] += 1e6
    test = slower_than_peers(total, STEP)
    assert test.p[2] < 1e-6
    assert not test.slower.any()


def test_one_stall_does_not_make_a_rank_slow():
    total = _noisy(30, 4, 7, sd=1e6)
    total[10, 1] += 500e6
    assert not slower_than_peers(total, STEP).slower.any()


def test_too_few_steps_or_ranks_name_none():
    assert not slower_than_peers(np.array([[1.0, 9.0]]), 5.0).slower.any()
    assert slower_than_peers(np.ones((5, 1)), 1.0).slower.tolist() == [False]
    with pytest.raises(ValueError, match="steps, ranks"):
        slower_than_peers(np.ones(5), 1.0)


def test_t_upper_against_tables():
    assert t_upper(2.0, 10) == pytest.approx(0.03669, abs=1e-5)
    assert t_upper(1.0, 1) == pytest.approx(0.25)
    assert t_upper(3.365, 5) == pytest.approx(0.01, abs=1e-4)
    assert t_upper(-1.0, 1) == pytest.approx(0.75)
    assert t_upper(2.326, 100000) == pytest.approx(0.01, abs=1e-4)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_upper(1.0, 0)


def test_holm_steps_down_and_stops_at_the_first_kept():
    p = np.array([0.004, 0.0001, 0.03, 0.006])
    assert holm(p, 0.01).tolist() == [False, True, False, False]
    assert holm(np.array([0.001, 0.004]), 0.01).tolist() == [True, True]


def _stalls(at: list[int], steps: int = 26, first: int = 4) -> np.ndarray:
    """Two ranks, 5 % noise; rank 1 stalls 150 ms at the steps ``at`` (numbered from
    ``first``), as the fault matrix's ddp-periodic-stall."""
    total = _noisy(steps, 2, 7, sd=1e6) / 5
    for step in at:
        total[step - first, 1] += 150e6
    return total


def test_a_stall_every_ten_steps_is_a_cause_the_t_test_misses():
    """3 stalls in 26 steps are the differences' spread (t ~1.8): its bursts name it."""
    total, steps = _stalls([9, 19, 29]), np.arange(4, 30)
    test = slower_than_peers(total, STEP / 5, steps=steps)
    assert test.p[1] > 0.01
    assert test.bursts.tolist() == [False, True]
    assert test.slower.tolist() == [False, True]


def test_stalls_at_no_period_are_noise():
    total = _stalls([6, 9, 22])
    test = slower_than_peers(total, STEP / 5, steps=np.arange(4, 30))
    assert not test.bursts.any() and not test.slower.any()


def test_bursts_count_the_rows_step_numbers_not_their_order():
    """The windows' rows, then the summarised steps' (pacing.slow_ranks): the period is read
    from the step numbers."""
    total, steps = _stalls([9, 19, 29]), np.arange(4, 30)
    order = np.r_[np.arange(8), np.arange(8, 26)[::-1]]
    assert slower_than_peers(total[order], STEP / 5, steps=steps[order]).bursts[1]
    assert not slower_than_peers(total[order], STEP / 5).bursts[1]


def test_one_spike_of_the_other_rank_is_no_turn():
    """As in the held-out run: rank 0 stood out once (6 ms) beside rank 1's three stalls."""
    total = _stalls([9, 19, 29])
    total[20 - 4, 0] += 30e6
    test = slower_than_peers(total, STEP / 5, steps=np.arange(4, 30))
    assert test.bursts.tolist() == [False, True]


def test_a_spike_among_the_stalls_leaves_their_period():
    """As in seed 4903's run: rank 1 also stood out at step 20, 15 ms after its stall at 19."""
    total = _stalls([9, 19, 29])
    total[20 - 4, 1] += 15e6
    test = slower_than_peers(total, STEP / 5, steps=np.arange(4, 30))
    assert test.bursts.tolist() == [False, True]


def test_stalls_of_other_sizes_at_no_period_are_noise():
    """Three stalls, one of them small: the two long ones are too few to be a period."""
    total = _stalls([9, 19])
    total[29 - 4, 1] += 40e6
    test = slower_than_peers(total, STEP / 5, steps=np.arange(4, 30))
    assert not test.bursts.any()


def test_p_above_zero_is_the_one_sided_t_test_on_the_mean():
    assert p_above_zero(np.array([1.0, 3.0])) == pytest.approx(t_upper(2.0, 1))
    assert p_above_zero(np.array([-1.0, -3.0])) == pytest.approx(1 - t_upper(2.0, 1))
    assert p_above_zero(np.array([5.0])) == 1.0
