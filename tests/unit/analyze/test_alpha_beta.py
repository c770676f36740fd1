import json
from types import SimpleNamespace

import numpy as np
import pytest

from scalescope.analyze.comm.alpha_beta import bandwidth_fit, fit_alpha_beta
from scalescope.analyze.comm.comm_bench import load_fits
from scalescope.analyze.ranks.matching import WaitStats
from scalescope.predict.allreduce import allreduce_s, hop_from_fit
from scalescope.predict.inputs import _transfer_fit


def test_fit_recovers_known_line_within_noise():
    rng = np.random.default_rng(0)
    sizes = [2**k for k in range(3, 27)]
    alpha, beta = 40e-6, 1 / 2.5e9
    times = [(alpha + beta * s) * (1 + rng.normal(0, 0.02)) for s in sizes]
    fit = fit_alpha_beta("allreduce", "gloo", 2, sizes, times)
    assert fit.alpha_s == pytest.approx(alpha, rel=0.1)
    assert fit.beta_s_per_byte == pytest.approx(beta, rel=0.1)
    assert 0 < fit.rel_err < 0.05
    assert (fit.min_bytes, fit.max_bytes, fit.num_points) == (8, 2**26, len(sizes))


def test_fit_agrees_with_numpy_polyfit_on_exact_line():
    sizes = [1000, 5000, 20000, 80000]
    times = [1e-5 + 3e-9 * s for s in sizes]
    fit = fit_alpha_beta("broadcast", "gloo", 3, sizes, times)
    beta, alpha = np.polyfit(sizes, times, 1)
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert fit.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    assert fit.time_s(40000) == pytest.approx(1e-5 + 3e-9 * 40000)


def test_negative_latency_is_clamped():
    fit = fit_alpha_beta("allreduce", "gloo", 2, [100, 200, 400], [1e-7, 2.2e-7, 4.1e-7])
    assert fit.alpha_s >= 0 and fit.beta_s_per_byte > 0


@pytest.mark.parametrize(
    ("sizes", "times"), [([8], [1e-5]), ([8, 16], [1e-5]), ([8, 16], [0.0, 1e-5])]
)
def test_bad_points_are_refused(sizes, times):
    with pytest.raises(ValueError):
        fit_alpha_beta("allreduce", "gloo", 2, sizes, times)


def test_load_fits_round_trip_and_bad_file(tmp_path):
    fit = fit_alpha_beta("allreduce", "gloo", 2, [8, 1024, 65536], [2e-5, 2.5e-5, 9e-5])
    good = tmp_path / "comm.json"
    good.write_text(json.dumps({"fits": [fit.as_dict()]}))
    assert load_fits(good) == [fit]
    bad = tmp_path / "bad.json"
    bad.write_text('{"fits": [{"op": "allreduce"')
    with pytest.raises(ValueError, match="bad.json"):
        load_fits(bad)


def test_a_comm_run_directory_is_fitted_from_its_raw_record(tmp_path):
    """`project --comm RUN_DIR`: the raw per-call times rank 0 left, fitted on their means."""
    times = {8: [2e-5, 3e-5], 1024: [3e-5, 3e-5], 65536: [9e-5, 1.1e-4]}
    raw = {"world_size": 2, "dtype": "float32", "iters": 2, "warmup": 1, "measurements": [
        {"backend": "gloo", "op": "all_reduce", "nbytes": n, "count": n // 4, "times_s": t}
        for n, t in times.items()
    ]}  # fmt: skip
    (tmp_path / "comm.json").write_text(json.dumps(raw))
    means = [sum(t) / 2 for t in times.values()]
    expected = fit_alpha_beta("all_reduce", "gloo", 2, list(times), means)
    assert load_fits(tmp_path) == [expected]
    with pytest.raises(ValueError, match="comm run directory"):
        load_fits(tmp_path / "nothing-here")


def test_one_size_is_all_bandwidth():
    """A 2-rank run whose 4.94 MB of gradients went in one bucket over a 40 Mbit/s link
    in 1.24 s: the ring of 2 moves n bytes per rank, a ring of 3 moves 4/3 n."""
    fit = bandwidth_fit("all_reduce", "run", 2, 4_941_984, 1.24)
    assert (fit.alpha_s, fit.num_points, fit.min_bytes, fit.max_bytes) == (0.0, 1, 4_941_984,
                                                                          4_941_984)  # fmt: skip
    assert fit.time_s(4_941_984) == pytest.approx(1.24)
    hop = hop_from_fit(fit)
    assert allreduce_s(4_941_984, 2, hop) == pytest.approx(1.24)
    assert allreduce_s(4_941_984, 3, hop) == pytest.approx(1.24 * 4 / 3)
    assert allreduce_s(4_941_984, 8, hop) == pytest.approx(1.24 * 2 * 7 / 8)


@pytest.mark.parametrize(("nbytes", "time_s"), [(0, 1.0), (8, 0.0), (-8, 1.0)])
def test_one_size_needs_a_size_and_a_time(nbytes, time_s):
    with pytest.raises(ValueError, match="positive size and time"):
        bandwidth_fit("all_reduce", "run", 2, nbytes, time_s)


def transfers(*sizes_us: tuple[int, float], tag: str = "gradients") -> SimpleNamespace:
    """An analysis whose cross-rank table holds these (bytes, transfer µs) of 2 ranks."""
    waits = [WaitStats("all_reduce", tag, n, 5, 10.0, 20.0, 5.0, us, 1.0) for n, us in sizes_us]
    return SimpleNamespace(world_size=2, cross_rank=SimpleNamespace(waits=waits))


def test_a_run_with_one_bucket_size_gets_the_bandwidth_fit():
    one = _transfer_fit(transfers((4_941_984, 1.24e6)))
    assert (one.alpha_s, one.num_points) == (0.0, 1)
    assert one.time_s(4_941_984) == pytest.approx(1.24)
    two = _transfer_fit(transfers((1_000_000, 0.3e6), (4_000_000, 1.2e6)))
    assert two.num_points == 2 and two.beta_s_per_byte == pytest.approx(3e-7)
    assert _transfer_fit(transfers((4_941_984, 1.24e6), tag="user")) is None
