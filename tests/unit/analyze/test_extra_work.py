"""Lateness step by step: a rank slower at every step against one late every K steps; the
period of evenly spaced steps; the grouped median against numpy's."""

from __future__ import annotations

import numpy as np

from scalescope.analyze.extra_work import lateness_pattern, median_by, period_of
from scalescope.analyze.step_slots import StepSlots, step_key
from scalescope.events import PHASES

STEP_MS = 100.0


def slots_of(own_ms: dict[int, np.ndarray]) -> StepSlots:
    """Ranks whose steps last ``own_ms`` each, all of it in forward (their own time)."""
    ranks = np.repeat(list(own_ms), [len(v) for v in own_ms.values()])
    steps = np.concatenate([np.arange(len(v)) for v in own_ms.values()])
    forward = np.concatenate(list(own_ms.values())) * 1e6
    keys = step_key(ranks, steps)
    phase_ns = {p: np.zeros(len(keys)) for p in PHASES}
    phase_ns["forward"] = forward
    return StepSlots(
        keys=keys, rank=ranks, dur_ns=forward.copy(), samples=np.ones(len(keys), dtype=np.int64),
        phase_ns=phase_ns, ranks=np.array(sorted(own_ms)),
    )  # fmt: skip


def noisy(n: int, seed: int) -> np.ndarray:
    return STEP_MS + np.random.default_rng(seed).normal(0, 1.0, n)


def test_a_rank_late_every_4_steps_comes_in_bursts_with_its_period() -> None:
    late = noisy(20, 1)
    late[[4, 8, 12, 16]] += 60
    pattern = lateness_pattern(slots_of({0: noisy(20, 0), 1: late, 2: noisy(20, 2)}), 1)
    assert pattern is not None and pattern.periodic
    assert pattern.late_steps == (4, 8, 12, 16) and pattern.period == 4
    assert abs(pattern.ms_per_occurrence - 60) < 4 and abs(pattern.median_excess_ms) < 2


def test_a_rank_slower_at_every_step_has_its_median_shifted_not_bursts() -> None:
    pattern = lateness_pattern(slots_of({0: noisy(20, 0), 1: noisy(20, 1) + 15}), 1)
    assert pattern is not None and not pattern.periodic and pattern.late_steps == ()
    assert abs(pattern.median_excess_ms - 15) < 2


def test_period_only_for_evenly_spaced_steps() -> None:
    assert period_of((5, 10, 15)) == 5 and period_of((20, 40)) == 20
    assert period_of((5, 10, 16)) is None and period_of((7,)) is None and period_of(()) is None


def test_median_by_matches_numpy_per_group() -> None:
    rng = np.random.default_rng(3)
    keys, values = rng.integers(0, 7, 500), rng.normal(size=500)
    uniq, medians = median_by(keys, values)
    assert uniq.tolist() == sorted(set(keys.tolist()))
    want = [np.median(values[keys == k]) for k in uniq]
    np.testing.assert_allclose(medians, want)
