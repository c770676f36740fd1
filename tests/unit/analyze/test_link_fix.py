"""The what-if of a slow link (analyze/model/link_fix.py, batches.py) on generated pipeline runs
(benchmarks/synthetic_run.py: 4 nodes of 8 ranks, each rank exchanging activations with the
same local rank of the next node through one batch of a send and a recv, and DDP's
all-reduces over every rank, whose ring crosses the slow link too). The link's fix is tried
without being named, and its replayed gain is held to what regenerating the same run without
the plant gains; a jitter-only run has no link to fix."""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.analyze.comm.collectives import bus_factor  # noqa: E402
from scalescope.analyze.model.batches import batch_waits  # noqa: E402
from scalescope.analyze.model.causes import apply_fix  # noqa: E402
from scalescope.analyze.model.link_fix import bound_by_link, crossing, latency_ns  # noqa: E402
from scalescope.analyze.model.pacing import link_classes  # noqa: E402
from scalescope.analyze.model.step_grid import build_grid  # noqa: E402
from scalescope.analyze.model.whatif import hosts_of, what_if  # noqa: E402
from scalescope.events import Kind, load_run  # noqa: E402
from synthetic_run import RANKS_PER_NODE, WARMUP_STEPS, Plant, write_run  # noqa: E402

RANKS, STEPS, SEED = 32, 30, 7
LINK = "link:node001,node002"


def rank0_step_ms(path: Path) -> float:
    """Rank 0's mean step after warm-up (ms): the generator's reference clock."""
    ev = load_run(path).events
    rows = ev.of_kind(Kind.STEP)
    rows = rows.select((rows.rank == 0) & (rows.step >= WARMUP_STEPS))
    return statistics.fmean(rows.dur_ns.tolist()) / 1e6


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The planted run (link node001-node002 4x slower) and the same run without it."""
    base = tmp_path_factory.mktemp("link_fix")
    plant = Plant("slow_link", target=1, factor=4.0)
    write_run(base / "planted", RANKS, STEPS, plant, SEED, layout="pipeline")
    write_run(base / "clean", RANKS, STEPS, None, SEED, layout="pipeline")
    return base / "planted", base / "clean"


def test_the_slow_link_is_tried_and_its_gain_is_the_regenerated_runs(runs):
    planted, clean = runs
    w = what_if(load_run(planted), WARMUP_STEPS)
    fixes = {f.cause: f for f in w.fixes}
    assert LINK in fixes, f"the link is a candidate: {list(fixes)}"
    measured = rank0_step_ms(planted) - rank0_step_ms(clean)
    assert measured > 5.0, "the plant costs several ms a step"
    assert fixes[LINK].gain_ms == pytest.approx(measured, rel=0.2)
    assert fixes[LINK].gain_low_ms < measured * 1.2 and fixes[LINK].gain_high_ms > measured * 0.8
    assert w.ideal is not None and w.ideal.mean_ms <= fixes[LINK].prediction.mean_ms + 0.1, (
        "the ideal step fixes the link whole, the all-reduces across it included"
    )


def test_a_jitter_only_pipeline_has_no_link_to_fix(runs):
    _, clean = runs
    w = what_if(load_run(clean), WARMUP_STEPS)
    assert not [f.cause for f in w.fixes if f.cause.startswith("link:")]


def test_a_send_waited_for_with_its_batchs_recv_is_no_own_time(runs):
    """The ranks sending over the slow link wait for their send after their recv completed:
    that wait is the link's, and their own time after the batch is their peers'."""
    planted, _ = runs
    grid, _ = build_grid(load_run(planted))
    send, recv = list(grid.ops).index("send"), list(grid.ops).index("recv")
    assert (grid.waits_with[:, send] == recv).all()
    senders = np.arange(RANKS_PER_NODE, 2 * RANKS_PER_NODE)  # node001's, to node002
    others = np.setdiff1d(np.arange(RANKS), np.r_[senders, senders + RANKS_PER_NODE])
    after = grid.work_ns[WARMUP_STEPS:, :, recv + 1].mean(axis=0)
    assert after[senders].mean() == pytest.approx(after[others].mean(), rel=0.03)


def test_the_links_fix_speeds_up_the_world_collectives_it_bound_not_their_latency(runs):
    planted, _ = runs
    run = load_run(planted)
    grid, _ = build_grid(run)
    fixed, note, _ = apply_fix(grid, LINK, hosts_of(run))
    assert note == "the link node001-node002 as fast as the others"
    ratio = fixed.transfer_ns.mean(axis=(0, 1)) / grid.transfer_ns.mean(axis=(0, 1))
    ops = list(grid.ops)
    assert ratio[ops.index("broadcast")] > 0.99, "1 KiB: its time is latency, not bytes"
    big = [k for k, op in enumerate(ops) if op == "all_reduce" and grid.nbytes[0, k] > 1 << 24]
    assert ratio[big].max() < 0.4, "25 and 20 MiB: at the healthy links' bandwidth"


def test_a_collective_faster_than_the_link_keeps_its_time(runs):
    planted, _ = runs
    run = load_run(planted)
    grid, _ = build_grid(run)
    sh = link_classes(grid, hosts_of(run), frozenset({"node001", "node002"}))
    assert sh.crosses.any() and not (sh.crosses & sh.on_link).any()
    reduces = np.flatnonzero(grid.op_names[0] == "all_reduce")
    steps = np.ones(grid.shape[0])
    # the all-reduces move ~3 GB/s over the 4x slow link: a link of 0.1 GB/s whose peers move
    # 10 GB/s bound none of them (3 > 1, the two's geometric mean)
    kept = crossing(grid, sh, 1_000_000, steps * 1e7, steps * 1e5)
    np.testing.assert_array_equal(kept[:, :, reduces], grid.transfer_ns[:, :, reduces])
    sped = crossing(grid, sh, 12_000_000, steps * 4e6, steps * 1e6)  # 3 GB/s against 12
    assert (sped[:, :, reduces] < grid.transfer_ns[:, :, reduces]).all()
    healthy = np.r_[steps[:10] * 1e6, steps[10:] * 4e6]  # slowed from step 10
    onset = crossing(grid, sh, 12_000_000, healthy, steps * 1e6)
    np.testing.assert_array_equal(onset[:10], grid.transfer_ns[:10], "as measured before it")


def _reduces_at(grid, alpha_ns: float, gbps: float) -> tuple[np.ndarray, np.ndarray]:
    """The grid's all-reduces (the mask) as taking ``alpha_ns`` plus their bus bytes at
    ``gbps`` (bytes/ns) each step, and those bus bytes."""
    reduces = grid.op_names == "all_reduce"
    bus = bus_factor("all_reduce", RANKS) * grid.nbytes
    t = grid.transfer_ns.copy()
    t[:, reduces] = alpha_ns + bus[reduces] / gbps
    return reduces, t


def test_a_collectives_latency_is_the_intercept_of_its_times_over_its_bytes(runs):
    planted, _ = runs
    grid, _ = build_grid(load_run(planted))
    reduces, t = _reduces_at(grid, 3e6, 2.0)
    bus = bus_factor("all_reduce", RANKS) * grid.nbytes
    assert len(np.unique(bus[reduces])) >= 2, "the run's all-reduces come in two sizes"
    got = latency_ns(grid, reduces, bus, t.mean(axis=0))
    np.testing.assert_allclose(got[reduces], 3e6, rtol=1e-6)
    assert (got[~reduces] == 0).all()
    one = reduces & (grid.nbytes == grid.nbytes[reduces].max())  # one size: all bytes
    assert (latency_ns(grid, one, bus, t.mean(axis=0)) == 0).all()
    noisy = t.mean(axis=0).copy()  # the smallest faster than the line's intercept
    small = reduces & (grid.nbytes == grid.nbytes[reduces].min())
    noisy[small] = 2e6
    assert latency_ns(grid, reduces, bus, noisy)[reduces].max() <= 2e6
    low = bus[reduces].min()  # times on a line through -0.1 ms at 0 bytes: no latency, not <0
    rising = t.mean(axis=0).copy()
    rising[reduces] = 1e5 + (bus[reduces] - low) * 2e5 / low
    assert latency_ns(grid, reduces, bus, rising)[reduces].max() == 0


def test_a_collective_slow_on_its_latency_is_not_bound_by_the_link(runs):
    """Bound or not by the bandwidth over its bytes' time, not over its whole time: a 50 ms
    latency makes 6 GB/s of bytes 0.9 GB/s over the whole, under the 1 GB/s link's and its
    12 GB/s peers' geometric mean (3.5); its bytes at 1 GB/s are bound, and lose their time
    beyond the latency by the link's ratio at most."""
    planted, _ = runs
    run = load_run(planted)
    grid, _ = build_grid(run)
    sh = link_classes(grid, hosts_of(run), frozenset({"node001", "node002"}))
    steps = np.ones(grid.shape[0])
    reduces, fast = _reduces_at(grid, 5e7, 6.0)
    bus = bus_factor("all_reduce", RANKS) * grid.nbytes
    whole = bus[reduces] / fast.mean(axis=0)[reduces]
    assert bound_by_link(whole, 1.0, 12.0).all(), "over its whole time it would be bound"
    fixed = crossing(replace(grid, transfer_ns=fast), sh, 12_000_000, steps * 1.2e7, steps * 1e6)
    np.testing.assert_array_equal(fixed[:, reduces], fast[:, reduces])
    reduces, slow = _reduces_at(grid, 5e7, 1.0)
    fixed = crossing(replace(grid, transfer_ns=slow), sh, 12_000_000, steps * 1.2e7, steps * 1e6)
    floor = 5e7 + (slow - 5e7) / 12
    assert (fixed[:, reduces] < slow[:, reduces]).all()
    assert (fixed[:, reduces] >= floor[:, reduces] - 1e-3).all(), "its latency stays"


@pytest.mark.parametrize(
    ("busbw", "slow", "peers", "bound"),
    [(3.0, 3.0, 12.0, True), (5.9, 3.0, 12.0, True), (6.1, 3.0, 12.0, False),
     (1.0, 12.0, 12.0, False), (1.0, 0.0, 12.0, False)],
)  # fmt: skip
def test_a_collective_is_bound_by_the_link_below_the_geometric_mean(busbw, slow, peers, bound):
    assert bool(bound_by_link(busbw, slow, peers)) is bound


def test_only_back_to_back_point_to_point_ops_waited_at_their_last_are_one_batch():
    """Places: send, recv (issued together, the recv waited for), send (alone, 1 ms later),
    an all-reduce issued at once after it."""
    issue = np.array([[[0.0, 10.0, 1e6, 1e6 + 10.0]]])
    blocking = np.array([[[False, True, False, True]]])
    ops = np.array([["send", "recv", "send", "all_reduce"]])
    np.testing.assert_array_equal(batch_waits(issue, blocking, ops), [[1, -1, -1, -1]])
    went_on = np.array([[[False, False, False, True]]])
    np.testing.assert_array_equal(batch_waits(issue, went_on, ops), [[-1, -1, -1, -1]])
