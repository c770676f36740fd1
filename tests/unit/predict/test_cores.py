"""A rank's compute against its threads and cores (predict/cores.py): the fit recovers a
known serial and parallel part, falls back to the linear rule where the sizes cannot say,
and gives today's rule back wherever threads do not change."""

from __future__ import annotations

import pytest
from predict_inputs import inputs

from scalescope.predict.allreduce import hop_from_fit
from scalescope.predict.cores import fit_core_scaling, fit_line, linear, study_core_scaling
from scalescope.predict.inputs import Placement
from scalescope.predict.model import Target, step_terms

S, P = 2.0, 48.0
"""A rank's ms per sample: 2 serial, 48 split between its threads."""


def node(ranks: int, cores: int = 16, threads: int | None = None, other: float = 0.0):
    t = threads or max(cores // ranks, 1)
    return Placement(ranks_per_node=ranks, threads_per_rank=t, node_cores=cores,
                     other_threads=other)  # fmt: skip


def amdahl(placement: Placement, s: float = S, p: float = P) -> float:
    t = placement.threads_per_rank
    return (s + p / t) * t / placement.cores_per_rank


def test_the_fit_recovers_a_known_serial_and_parallel_part():
    sizes = [node(r) for r in (1, 2, 4)]  # 16, 8 and 4 threads on 16 cores
    fit = fit_core_scaling([(pl, amdahl(pl)) for pl in sizes])
    assert fit.fitted and fit.threads == (16, 8, 4)
    assert (fit.serial_ms, fit.parallel_ms) == (pytest.approx(S), pytest.approx(P))
    assert fit.serial_fraction == pytest.approx(S / (S + P))
    # 4 → 8 ranks: 2 + 48/2 = 26 against 2 + 48/4 = 14 ms, not twice as slow
    assert fit.slowdown(node(4), node(8)) == pytest.approx(26 / 14)


def test_time_slicing_is_divided_out_before_the_fit():
    """Sizes measured under other processes' load (a third of the cores taken) fit the same
    s and p: the load stretches serial and parallel parts alike."""
    loaded = [node(r, other=8.0) for r in (1, 2, 4)]
    fit = fit_core_scaling([(pl, amdahl(pl)) for pl in loaded])
    assert (fit.serial_ms, fit.parallel_ms) == (pytest.approx(S), pytest.approx(P))
    # 3 one-thread ranks on 2 cores: 1.5 × slower than 2, whatever s is
    assert fit.slowdown(node(2, cores=2, threads=1), node(3, cores=2, threads=1)) == 1.5


def test_one_thread_count_falls_back_to_the_linear_rule():
    one = [node(r, cores=2, threads=1) for r in (1, 2)]
    fit = fit_core_scaling([(pl, 10.0 * r) for r, pl in enumerate(one, 1)])
    assert not fit.fitted and fit.serial_ms == 0.0 and "one thread count" in fit.note
    assert fit.slowdown(one[1], node(3, cores=2, threads=1)) == pytest.approx(1.5)
    assert fit.slowdown(node(4), node(8)) == pytest.approx(2.0)  # c_ref / c_target
    assert fit_core_scaling([]).note == fit.note


@pytest.mark.parametrize(
    ("times", "why"),
    [
        ((10.0, 10.0, 10.0), "did not fall"),  # threads bought nothing
        ((20.0, 15.0, 10.0), "did not fall"),  # more threads, slower
    ],
)
def test_compute_that_does_not_fall_with_threads_keeps_the_linear_rule(times, why):
    fit = fit_core_scaling(list(zip([node(r) for r in (1, 2, 4)], times, strict=True)))
    assert not fit.fitted and why in fit.note and fit.serial_ms == 0.0


def test_faster_than_linear_is_fitted_through_the_origin():
    """Superlinear sizes (each thread's share of the cache) give s < 0: refitted with s = 0."""
    sizes = [node(r) for r in (1, 2, 4)]
    fit = fit_core_scaling([(pl, amdahl(pl, s=-1.0)) for pl in sizes])
    assert fit.fitted and fit.serial_ms == 0.0 and "s = 0" in fit.note
    assert fit.slowdown(node(4), node(8)) == pytest.approx(2.0)


def test_degenerate_points_are_left_out():
    sizes = [node(r) for r in (1, 2, 4)]
    points = [(pl, amdahl(pl)) for pl in sizes] + [(node(8), 0.0), (node(8), -3.0)]
    fit = fit_core_scaling(points)
    assert fit.threads == (16, 8, 4) and fit.serial_ms == pytest.approx(S)
    assert not fit_core_scaling([(node(1), 0.0), (node(2), 0.0)]).fitted


def test_fit_line_by_hand():
    assert fit_line([0.0, 1.0, 2.0], [1.0, 3.0, 5.0]) == pytest.approx((1.0, 2.0))


def test_study_fit_reads_compute_per_sample_of_each_run():
    runs = [
        inputs(
            world_size=r, placement=node(r), per_rank_batch=16.0, compute_ms=16.0 * amdahl(node(r))
        )  # fmt: skip
        for r in (1, 2, 4)
    ]
    fit = study_core_scaling(runs)
    assert (fit.serial_ms, fit.parallel_ms) == (pytest.approx(S), pytest.approx(P))


def test_the_step_uses_the_fit_and_gives_the_reference_back():
    ref = inputs(world_size=4, placement=node(4), compute_ms=16 * 14.0, backward_ms=140.0)
    fit = fit_core_scaling([(pl, amdahl(pl)) for pl in (node(1), node(2), node(4))])
    hop = hop_from_fit(ref.transfer_fit)

    def at(ranks: int, scaling=None):
        target = Target(nodes=1, ranks_per_node=ranks, per_rank_batch=8.0, placement=node(ranks))
        return step_terms(ref, target, hop, scaling=scaling)

    assert at(4, fit).compute_ms == pytest.approx(ref.compute_ms)
    assert at(8, fit).compute_ms == pytest.approx(ref.compute_ms * 26 / 14)
    assert at(8).compute_ms == pytest.approx(ref.compute_ms * 2)
    assert at(8, linear()).compute_ms == at(8).compute_ms
