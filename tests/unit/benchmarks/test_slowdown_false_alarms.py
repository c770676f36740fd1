"""benchmarks/slowdown_false_alarms.py: its Poisson bound against the chi-square table, its
streams' drift, shared noise and periodic work as the generator draws them, and its split of
the hours over the profiles."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from slowdown_false_alarms import PROFILES, poisson_upper, streams  # noqa: E402
from slowdown_streams import COL as C  # noqa: E402
from slowdown_streams import Profile, _steps  # noqa: E402


@pytest.mark.parametrize(("n", "chi2_half"), [(0, 2.9957), (1, 4.7439), (3, 7.7537), (10, 16.9622)])
def test_the_bound_is_half_the_chi_square_quantile(n, chi2_half):
    """chi2(0.95, 2(n+1)) / 2 from the tables: 5.9915, 9.4877, 15.5073, 33.9244."""
    assert poisson_upper(n) == pytest.approx(chi2_half, abs=1e-3)


def test_a_negative_count_is_refused():
    with pytest.raises(ValueError, match="0 or more"):
        poisson_upper(-1)


def test_the_hours_are_split_evenly_in_streams_of_at_most_the_stream_hours():
    parts = streams(120.0, 10.0)
    assert sum(h for _, _, h in parts) == pytest.approx(120.0)
    assert {name for name, _, _ in parts} == set(PROFILES)
    assert max(h for _, _, h in parts) == 10.0 and len(parts) == 2 * len(PROFILES)


def steps(p: Profile, n: int, seed: int = 0) -> np.ndarray:
    return _steps(p, None, 0, n, np.random.default_rng(seed), {})


def test_drift_moves_the_step_by_its_amplitude_over_its_period():
    p = Profile(drift=0.04, drift_h=6.0, eval_every=10**9, checkpoint_every=10**9, noise=0.0,
                job_noise=0.0, spike_every=10**9, warmup_steps=0)  # fmt: skip
    step = steps(p, 30_000)[:, 0, C["step_ns"]]
    peak = int(1.5 * 3.6e6 / (p.step_ms + p.comm_ms))  # a quarter of the 6 h period
    assert step[peak] / step[0] == pytest.approx(1.04, abs=1e-3)


def test_the_shared_factor_remembers_and_is_the_same_on_every_rank():
    p = Profile(job_rho=0.995, noise=0.0, eval_every=10**9, checkpoint_every=10**9,
                spike_every=10**9, warmup_steps=0)  # fmt: skip
    forward = steps(p, 20_000)[:, :, C["forward"]]
    assert np.allclose(forward[:, 0], forward[:, 5])
    logs = np.log(forward[:, 0])
    lag1 = np.corrcoef(logs[:-1], logs[1:])[0, 1]
    assert lag1 > 0.98 and np.std(logs) == pytest.approx(0.03, rel=0.3)


def test_periodic_work_is_rank_0s_and_the_others_wait_for_it():
    p = Profile(period=10, period_ms=80.0, noise=0.0, job_noise=0.0, eval_every=10**9,
                checkpoint_every=10**9, spike_every=10**9, warmup_steps=0)  # fmt: skip
    out = steps(p, 40) / 1e6
    wait, step = out[:, :, C["comm_wait"]], out[:, 0, C["step_ns"]]
    assert step[10] - step[11] == pytest.approx(80.0)
    assert wait[10, 1] - wait[11, 1] == pytest.approx(80.0) and wait[10, 0] == wait[11, 0]
