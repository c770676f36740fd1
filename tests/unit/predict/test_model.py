import math
from dataclasses import replace

import numpy as np
import pytest
from predict_inputs import inputs

from scalescope.predict.allreduce import hop_from_fit
from scalescope.predict.inputs import Placement
from scalescope.predict.model import (
    Target,
    expected_max_normal,
    exposed_ms,
    missed_exposed_ms,
    step_terms,
)
from scalescope.predict.project import ProjectOptions, project_inputs
from scalescope.predict.roofline import MEMORY_BOUND, target_compute


def target(ranks_per_node: int, nodes: int = 1, batch: float = 8.0, cores: int = 2) -> Target:
    placement = Placement(ranks_per_node=ranks_per_node, threads_per_rank=1, node_cores=cores)
    return Target(nodes=nodes, ranks_per_node=ranks_per_node, per_rank_batch=batch,
                  placement=placement)  # fmt: skip


def test_expected_max_of_normals_against_sampling():
    rng = np.random.default_rng(0)
    for p in (2, 3, 8, 64):
        sampled = rng.standard_normal((200_000, p)).max(axis=1).mean()
        assert expected_max_normal(p) == pytest.approx(sampled, rel=0.03)
    assert expected_max_normal(1) == 0.0


def test_exposed_by_hand():
    ref = inputs()
    hop = hop_from_fit(ref.transfer_fit)  # 0.5 us and 1 ns/B per hop
    # 4 MB ready at 40 ms, done at 44.001; 2 MB ready at 60 ms, done at 62.001
    assert exposed_ms(ref.buckets, 60.0, 2, hop, "ring") == pytest.approx(2.001)
    # a backward too short to hide anything: both buckets queue after it
    assert exposed_ms(ref.buckets, 1.0, 2, hop, "ring") == pytest.approx(6.002 - 1.0 + 0.6667, 1e-2)
    assert exposed_ms(ref.buckets, 60.0, 1, hop, "ring") == 0.0


def test_reference_size_gives_back_its_own_terms():
    """The schedule hides all but 2.001 ms of the transfer; the run measured 10 ms exposed:
    the 7.999 ms it misses are carried over, so the reference gives back its own step."""
    ref = inputs()
    terms = step_terms(ref, target(2), hop_from_fit(ref.transfer_fit))
    assert (terms.compute_ms, terms.data_ms, terms.other_ms) == (100.0, 2.0, 3.0)
    assert terms.waiting_ms == pytest.approx(4.0)
    assert terms.exposed_ms == pytest.approx(10.0)
    assert terms.step_ms == pytest.approx(ref.step_ms)


def test_missed_exposure_grows_as_the_whole_allreduce_does():
    ref = inputs()
    hop = hop_from_fit(ref.transfer_fit)
    # 6 MB over a ring of 2: 2 α + 6e6 β = 6.001 ms; of 3: 4 α + 4/3 · 6e6 β = 8.002 ms
    grown = missed_exposed_ms(ref, 3, hop, hop, "ring")
    assert grown == pytest.approx((10.0 - 2.001) * 8.002 / 6.001)
    slower = replace(hop, alpha_s=1.5 * hop.alpha_s, beta_s_per_byte=1.5 * hop.beta_s_per_byte)
    assert missed_exposed_ms(ref, 3, hop, slower, "ring") == pytest.approx(1.5 * grown)
    assert missed_exposed_ms(ref, 1, hop, hop, "ring") == 0.0
    # measured less than scheduled: the target's schedule (2.669 ms at 3 ranks, backward
    # 90 ms) is lowered by the grown difference
    over = inputs(exposed_ms=1.0)
    assert step_terms(over, target(3), hop).exposed_ms == pytest.approx(
        exposed_ms(over.buckets, 90.0, 3, hop, "ring") - (2.001 - 1.0) * 8.002 / 6.001
    )


def test_shared_cores_slow_compute_by_their_share():
    ref = inputs()
    terms = step_terms(ref, target(3), hop_from_fit(ref.transfer_fit))
    assert terms.compute_ms == pytest.approx(150.0)  # 3 ranks on 2 cores
    assert terms.waiting_ms == pytest.approx(
        4.0 * expected_max_normal(3) / expected_max_normal(2) * 1.5
    )
    doubled = step_terms(ref, target(2, batch=16), hop_from_fit(ref.transfer_fit))
    assert (doubled.compute_ms, doubled.data_ms, doubled.other_ms) == (200.0, 4.0, 3.0)


def test_weak_projection_table():
    p = project_inputs(inputs(), ProjectOptions(nodes=(1, 2, 4), epoch_samples=1600))
    assert [q.ranks for q in p.points] == [2, 4, 8]
    for q in p.points:
        assert q.samples_per_s == pytest.approx(q.ranks * 8 / (q.terms.step_ms / 1e3))
        steps = math.ceil(1600 / (q.ranks * 8))  # 100, 50, 25 whole steps
        assert q.epoch_s == pytest.approx(steps * q.terms.step_ms / 1e3)
        first = p.points[0]
        assert q.efficiency == pytest.approx(
            q.samples_per_s / first.samples_per_s * first.ranks / q.ranks
        )
    assert p.points[0].speedup == 1.0 and p.points[-1].efficiency < 1.0
    assert p.points[0].band_ms == pytest.approx(np.hypot(0.1 * 100, 0.05 * 10.0), 1e-3)


def test_throughput_and_epoch_carry_the_band():
    """2 ranks × 8 samples, 100 whole steps of an epoch of 1,600: at step ∓ band."""
    (q,) = project_inputs(inputs(), ProjectOptions(nodes=(1,), epoch_samples=1600)).points
    low_s, high_s = (q.terms.step_ms - q.band_ms) / 1e3, (q.terms.step_ms + q.band_ms) / 1e3
    assert q.samples_per_s_range == pytest.approx((16 / high_s, 16 / low_s))
    assert q.epoch_s_range == pytest.approx((100 * low_s, 100 * high_s))
    wide = project_inputs(inputs(compute_cv=5.0), ProjectOptions(nodes=(1,))).points[0]
    assert wide.samples_per_s_range[1] is None and wide.epoch_s_range[0] == 0.0


def test_strong_projection_splits_the_global_batch():
    p = project_inputs(inputs(), ProjectOptions(nodes=(1, 2), global_batch=64))
    assert [q.per_rank_batch for q in p.points] == [32.0, 16.0]
    assert p.mode == "strong" and p.points[1].terms.compute_ms == pytest.approx(200.0)
    with pytest.raises(ValueError, match="smaller than 4 ranks"):
        project_inputs(inputs(), ProjectOptions(nodes=(1, 2), global_batch=3))


def test_roofline_by_hand():
    # here: 64 GFLOP/s per core, 12.5 ms per sample for 2e8 FLOPs: 25 % of the roofline
    from scalescope.predict.catalogue import load_hardware

    roof = target_compute(inputs(), load_hardware("a64fx"), 4, 8.0)
    assert roof.efficiency == pytest.approx(0.25)
    # a quarter of A64FX: 1.35 TFLOP/s and 256 GB/s; 1e7 + 8 x 4e7 / 8 bytes per sample
    assert roof.bound == MEMORY_BOUND
    assert roof.per_sample_ms == pytest.approx(1e3 * 5e7 / 256e9 / 0.25)


def test_other_hardware_projection_and_its_refusals():
    p = project_inputs(inputs(), ProjectOptions(nodes=(1, 8), hardware="a64fx"))
    assert p.ranks_per_node == 4 and p.points[0].bound == MEMORY_BOUND
    assert p.points[0].terms.compute_ms == pytest.approx(8 * 1e3 * 5e7 / 256e9 / 0.25)
    assert "Tofu" in p.hop.source
    given = project_inputs(inputs(), ProjectOptions(nodes=(1,), hardware="a64fx", efficiency=0.5))
    assert given.points[0].terms.compute_ms == pytest.approx(p.points[0].terms.compute_ms / 2)
    with pytest.raises(ValueError, match="needs about .* GB per rank; v100 gives a rank 32.0"):
        project_inputs(inputs(), ProjectOptions(nodes=(1,), hardware="v100",
                                                per_rank_batch=20_000))  # fmt: skip
    with pytest.raises(ValueError, match="8 GPUs per node: 16 ranks"):
        project_inputs(inputs(), ProjectOptions(nodes=(1,), hardware="a100", ranks_per_node=16))
    with pytest.raises(ValueError, match="give --hardware too"):
        project_inputs(inputs(), ProjectOptions(nodes=(1,), efficiency=0.5))
    with pytest.raises(ValueError, match="bench runs only"):
        project_inputs(inputs(cost=None), ProjectOptions(nodes=(1,), hardware="h100"))


def test_a_batch_that_could_not_be_checked_against_memory_says_so():
    unknown = inputs(peak_memory_bytes=None)
    p = project_inputs(unknown, ProjectOptions(nodes=(1,), hardware="v100", per_rank_batch=20_000))
    assert "the run recorded no peak memory: the batch was not checked against v100's" in p.notes
    known = project_inputs(inputs(), ProjectOptions(nodes=(1,), hardware="a64fx"))
    assert not any("peak memory" in n for n in known.notes)


def test_one_rank_run_needs_transfers_from_somewhere():
    with pytest.raises(ValueError, match="give --comm"):
        project_inputs(inputs(world_size=1, transfer_fit=None), ProjectOptions(nodes=(1, 2)))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nodes": ()}, "positive node counts"),
        ({"nodes": (0, 2)}, "positive node counts"),
        ({"nodes": (1,), "global_batch": 8, "per_rank_batch": 8}, "not both"),
        ({"nodes": (1,), "ranks_per_node": 0}, "--ranks-per-node must be positive"),
        ({"nodes": (1,), "algorithm": "butterfly"}, "ring or tree"),
        ({"nodes": (1,), "efficiency": 1.5}, "--efficiency must be in"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        ProjectOptions(**options)


def test_other_processes_threads_from_the_share_the_ranks_got():
    from scalescope.predict.inputs import other_threads

    full = Placement(ranks_per_node=2, threads_per_rank=1, node_cores=2)
    # 2 ranks got a third of a core each: 4 other runnable threads shared the 2 cores
    assert other_threads(full, 1 / 3) == pytest.approx(4.0)
    assert other_threads(full, 1.0) == 0.0 and other_threads(full, None) == 0.0
    # a node with idle cores says nothing: the rank may have waited
    assert other_threads(Placement(ranks_per_node=1, threads_per_rank=1, node_cores=2), 0.5) == 0
    # 3 ranks and those 4 threads: 2 / 7 of a core each, 7/6 slower than 2 ranks
    loaded = Placement(ranks_per_node=3, threads_per_rank=1, node_cores=2, other_threads=4.0)
    assert loaded.cores_per_rank == pytest.approx(2 / 7)
    ref = inputs(placement=Placement(ranks_per_node=2, threads_per_rank=1, node_cores=2,
                                     other_threads=4.0))  # fmt: skip
    t = Target(nodes=1, ranks_per_node=3, per_rank_batch=8, placement=loaded)
    assert step_terms(ref, t, hop_from_fit(ref.transfer_fit)).compute_ms == pytest.approx(
        100 * 7 / 6
    )


def test_transfers_slow_only_where_threads_time_slice_cores():
    from scalescope.predict.model import transfer_slowdown

    def on(ranks: int, threads: int, cores: int) -> Placement:
        return Placement(ranks_per_node=ranks, threads_per_rank=threads, node_cores=cores)

    # one-thread ranks: as their cores, 3 ranks on 2 cores 1.5 × slower than 2
    assert transfer_slowdown(on(2, 1, 2), on(3, 1, 2)) == pytest.approx(1.5)
    # 4 → 8 ranks of 4 → 2 threads on 16 cores: a core for every thread, as fast
    assert transfer_slowdown(on(4, 4, 16), on(8, 2, 16)) == 1.0
    # 8 ranks of 4 threads on 16 cores: each thread half a core
    assert transfer_slowdown(on(4, 4, 16), on(8, 4, 16)) == pytest.approx(2.0)


def test_ranks_of_several_threads_count_other_load_by_their_run_queue_wait():
    """A 16-thread rank that used 3.3 cores on average on a quiet 16-core node (its serial
    parts run one thread) waited for no core: no other load."""
    from scalescope.predict.inputs import waited_threads

    quiet = Placement(ranks_per_node=1, threads_per_rank=16, node_cores=16)
    assert waited_threads(quiet, 33.1 / (33.1 + 0.0373)) == pytest.approx(0.0187, abs=1e-3)
    # 8 ranks of 2 threads whose runnable threads ran 80 % of the time: 4 more threads
    full = Placement(ranks_per_node=8, threads_per_rank=2, node_cores=16)
    assert waited_threads(full, 0.8) == pytest.approx(4.0)
    assert waited_threads(full, None) == 0.0 and waited_threads(full, 1.0) == 0.0


def test_run_queue_share_is_cpu_over_cpu_and_wait(tmp_path):
    from types import SimpleNamespace

    from scalescope.events.run import RankMeta
    from scalescope.predict.inputs import ran_share

    def run(*waits):
        ranks = {i: RankMeta(rank=i, cpu_s=3.0, runqueue_wait_s=w) for i, w in enumerate(waits)}
        return SimpleNamespace(ranks=ranks)

    assert ran_share(run(1.0, 0.0)) == pytest.approx((0.75 + 1.0) / 2)
    assert ran_share(run(1.0, None)) is None, "a rank without its wait: unknown"
    assert ran_share(run()) is None
