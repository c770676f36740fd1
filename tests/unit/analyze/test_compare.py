"""compare_runs on two hand-built runs: B is A at twice the speed, with other message sizes.

Run A: 2 ranks, steps of 100 ms (data 10, forward 30, backward 40, comm_wait 10,
optimizer 10), in comm_wait an all_reduce of 4 MiB (2 ms) then one of 1 MiB (1 ms).
Run B: every phase halved (50 ms steps); the 4 MiB all_reduce takes 1 ms, rank 1 issues it
1 ms late, and the second all_reduce is 8 MiB.
"""

from __future__ import annotations

import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import coll_row, make_run, phase_row, step_row

from scalescope.analyze.runs.compare import Pair, SizeKey, compare_runs, pair

MS, MIB = 1_000_000, 1024 * 1024
STEPS, WARMUP, SAMPLES = 3, 1, 32
PHASES = {"data": 10, "forward": 30, "backward": 40, "comm_wait": 10, "optimizer": 10}


def rank_rows(rank: int, scale: float, second: int, lag_ms: float, ar_ms: float) -> list:
    rows, seq = [], 0
    period = int(100 * MS * scale)
    for s in range(STEPS):
        t = s * period
        rows.append(step_row(s, t, period, SAMPLES))
        for name, ms in PHASES.items():
            dur = int(ms * MS * scale)
            if name == "comm_wait":
                lag = int(lag_ms * MS) if rank == 1 else 0
                done = t + int(lag_ms * MS) + int(ar_ms * MS)
                rows.append(coll_row(s, "all_reduce", t + lag, done - t - lag, 4 * MIB, seq))
                rows.append(coll_row(s, "all_reduce", done, int(ar_ms * MS / 2), second, seq + 1))
                seq += 2
            rows.append(phase_row(s, name, t, dur))
            t += dur
    return rows


@pytest.fixture
def runs(tmp_path):
    a = {r: [rank_rows(r, 1.0, 1 * MIB, 0.0, 2.0)] for r in range(2)}
    b = {r: [rank_rows(r, 0.5, 8 * MIB, 1.0, 1.0)] for r in range(2)}
    kwargs = {"world_size": 2, "warmup_steps": WARMUP}
    return (
        analysed(make_run(tmp_path, a, **kwargs)),
        analysed(make_run(tmp_path, b, **kwargs)),
    )


def _approx(value: float) -> object:
    return pytest.approx(value, rel=1e-9)


def test_pair_ratio_is_b_over_a_and_none_without_a():
    assert pair(2.0, 3.0) == Pair(2.0, 3.0, 1.5)
    assert pair(0.0, 3.0).ratio is None
    assert pair(None, 3.0).ratio is None and pair(2.0, None).ratio is None


def test_facts_throughput_and_step_time(runs):
    c = compare_runs(*runs)
    assert (c.a.world_size, c.b.world_size, c.a.measured_steps) == (2, 2, STEPS - WARMUP)
    assert c.a.run_id == c.b.run_id == "test-run"
    samples = 2 * (STEPS - WARMUP) * SAMPLES
    assert c.samples_per_s.a == _approx(samples / 0.2)
    assert c.samples_per_s.b == _approx(samples / 0.1)
    assert c.samples_per_s.ratio == _approx(2.0)
    assert (c.mean_step_ms.a, c.mean_step_ms.b) == (_approx(100.0), _approx(50.0))
    assert c.mean_step_ms.ratio == _approx(0.5)


def test_phases_side_by_side(runs):
    c = compare_runs(*runs)
    assert [p.phase for p in c.phases] == [*PHASES, "other"]
    for p in c.phases[:-1]:
        assert p.mean_ms.a == _approx(PHASES[p.phase])
        assert p.mean_ms.ratio == _approx(0.5)
    other = c.phases[-1].mean_ms
    assert (other.a, other.b, other.ratio) == (0.0, 0.0, None)


def test_collectives_only_sizes_in_both_are_compared(runs):
    c = compare_runs(*runs)
    [size] = c.sizes
    assert (size.op, size.nbytes) == ("all_reduce", 4 * MIB)
    assert size.calls_per_rank == Pair(STEPS, STEPS, 1.0)
    assert size.time_avg_us.a == _approx(2000.0)
    # B: rank 0 waits 1 ms for rank 1, so its call takes 2 ms; rank 1's takes 1 ms
    assert size.time_avg_us.b == _approx(1500.0)
    assert size.busbw_gbps.ratio == _approx(2000 / 1500)
    assert c.sizes_only_a == (SizeKey("all_reduce", 1 * MIB),)
    assert c.sizes_only_b == (SizeKey("all_reduce", 8 * MIB),)


def test_cross_rank_waits_side_by_side(runs):
    x = compare_runs(*runs).cross_rank
    assert x.straggler_a is None and x.straggler_b is None  # B: 1 ms late per 50 ms step < 10 %
    w = next(w for w in x.waits if w.nbytes == 4 * MIB)
    assert (w.op, w.tag) == ("all_reduce", "gradients")
    assert w.wait_avg_us.a == 0.0 and w.wait_avg_us.ratio is None  # nothing to divide by
    assert w.wait_avg_us.b == _approx(500.0)
    assert w.transfer_avg_us.a == _approx(2000.0)
    assert w.transfer_avg_us.ratio == _approx(0.5)
    assert x.wait_ms_per_step.b == _approx(0.5)  # rank 0 waits 1 ms per step, rank 1 none
    assert x.busy_ms_per_step.ratio == _approx(0.5)
    assert [v.nbytes for v in x.waits] == [4 * MIB]


def test_missing_data_gives_none_not_zero(runs, tmp_path):
    off = analysed(make_run(tmp_path, {}, world_size=2, probe=False))
    c = compare_runs(runs[0], off)
    assert c.samples_per_s.b is None and c.samples_per_s.ratio is None
    assert c.b.measured_steps is None
    assert c.sizes == () and len(c.sizes_only_a) == 2 and c.sizes_only_b == ()
    assert c.cross_rank is None
    assert [p.mean_ms.b for p in c.phases] == [None] * len(c.phases)
