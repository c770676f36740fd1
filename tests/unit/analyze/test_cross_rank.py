"""Cross-rank analysis on hand-built runs whose arrivals, waits and transfers are known.

The main scenario has 3 ranks and one process group. Each step (40 ms, 4 steps, 1 warm-up):
data, forward with DDP's buffer broadcast at its start, backward issuing three asynchronous
gradient buckets, comm_wait until the last completes, optimizer. Rank 1 is slow: 300 µs
late at the broadcast, 10 ms late at the first bucket (a longer forward). Its clock reads
5 ms behind rank 0's (measured by ping-pong); rank 2's reads 2 ms ahead (wall-clock
fallback). The backend moves each bucket in 2 ms, one after the other, so buckets 2 and 3
wait for bucket 1, not for rank 1: only bucket 1 and the broadcast have waiting.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import coll_row, make_run, phase_row, step_row

from scalescope.analyze.cross_rank import (
    RankWaits,
    _straggler,
    analyze_cross_rank,
    straggler_min_share_pct,
)
from scalescope.analyze.ranks import matching
from scalescope.analyze.ranks.clocks import align_clocks, aligned_start_ns
from scalescope.analyze.ranks.groups import dims_of
from scalescope.analyze.steps.step_slots import StepSlots, step_key
from scalescope.events import PHASES, EventTable, RankMeta
from scalescope.events.run import ClockSync

US, MS = 1_000, 1_000_000
MIB = 1024 * 1024
BASE = 1_000 * MS
PERIOD = 40 * MS
STEPS, WARMUP, SAMPLES = 4, 1, 32
OFFSET = {0: 0, 1: 5 * MS, 2: -2 * MS}
"""Add to a rank's recorded times to get rank 0's clock."""
DATA_END = {0: 1_000 * US, 1: 1_300 * US, 2: 1_100 * US}
FWD_END = {0: 10 * MS, 1: 20 * MS, 2: 10 * MS}
ISSUE = {0: (20 * MS, 21 * MS, 22 * MS), 1: (30 * MS, 30_500 * US, 31 * MS)}
ISSUE[2] = ISSUE[0]
BUCKETS = (1 * MIB, 2 * MIB, 4 * MIB)
BUCKET_DONE = (32 * MS, 34 * MS, 36 * MS)
BCAST_DONE = 1_350 * US
BCAST_BYTES = 1024
OPT_START = 36 * MS


def rank_rows(rank: int, steps: int = STEPS) -> list[tuple]:
    """Rows of one rank on its own clock (true time minus its offset)."""
    rows, seq = [], 0
    for s in range(steps):
        t0 = BASE + s * PERIOD - OFFSET[rank]
        rows.append(step_row(s, t0, PERIOD, SAMPLES))
        rows.append(phase_row(s, "data", t0, DATA_END[rank]))
        rows.append(phase_row(s, "forward", t0 + DATA_END[rank], FWD_END[rank] - DATA_END[rank]))
        bcast_dur = BCAST_DONE - DATA_END[rank]
        rows.append(
            coll_row(s, "broadcast", t0 + DATA_END[rank], bcast_dur, BCAST_BYTES, seq, "buffers")
        )
        seq += 1
        for issue, done, nbytes in zip(ISSUE[rank], BUCKET_DONE, BUCKETS, strict=True):
            rows.append(coll_row(s, "all_reduce", t0 + issue, done - issue, nbytes, seq))
            seq += 1
        last_issue = ISSUE[rank][-1]
        rows.append(phase_row(s, "backward", t0 + FWD_END[rank], last_issue - FWD_END[rank]))
        rows.append(phase_row(s, "comm_wait", t0 + last_issue, OPT_START - last_issue))
        rows.append(phase_row(s, "optimizer", t0 + OPT_START, PERIOD - OPT_START))
    return rows


def rank_files() -> dict[int, RankMeta]:
    wall = 10**15
    return {
        0: RankMeta(
            rank=0,
            wall_minus_perf_ns=wall,
            clock=[ClockSync(when="start", offset_ns=0, uncertainty_ns=0)],
        ),
        1: RankMeta(
            rank=1,
            wall_minus_perf_ns=wall + 123,  # ignored: ping-pong samples win
            clock=[
                ClockSync(when="start", offset_ns=5 * MS, uncertainty_ns=10 * US, rounds=8),
                ClockSync(when="end", offset_ns=5 * MS + 400, uncertainty_ns=12 * US, rounds=8),
            ],
        ),
        2: RankMeta(rank=2, wall_minus_perf_ns=wall + OFFSET[2]),
    }


@pytest.fixture
def scenario(tmp_path):
    rows = {r: [rank_rows(r)] for r in range(3)}
    return make_run(tmp_path, rows, world_size=3, warmup_steps=WARMUP, rank_files=rank_files())


def _approx(value: float) -> object:
    return pytest.approx(value, rel=1e-9, abs=1e-9)


def test_clocks_ping_pong_wall_clock_and_reference(scenario):
    clocks = {c.rank: c for c in align_clocks(scenario)}
    assert (clocks[0].offset_ns, clocks[0].method) == (0, "reference")
    c1 = clocks[1]
    assert (c1.offset_ns, c1.uncertainty_ns, c1.drift_ns, c1.method) == (
        5 * MS,
        10 * US,
        400,
        "ping-pong",
    )
    c2 = clocks[2]
    assert (c2.offset_ns, c2.uncertainty_ns, c2.drift_ns, c2.method) == (
        -2 * MS,
        None,
        None,
        "wall-clock",
    )


def test_aligned_start_puts_every_rank_on_rank_0s_clock(scenario):
    events = scenario.events
    aligned = aligned_start_ns(events, align_clocks(scenario))
    expected = events.start_ns + np.array([OFFSET[int(r)] for r in events.rank])
    assert aligned.dtype == np.int64
    np.testing.assert_array_equal(aligned, expected)
    steps = events.kind == 2
    assert set(aligned[steps & (events.step == 1)]) == {BASE + PERIOD}  # one instant


def test_no_meta_means_no_alignment(tmp_path):
    run = make_run(tmp_path, {r: [rank_rows(r)] for r in range(2)}, world_size=2)
    clocks = align_clocks(run)
    assert [(c.rank, c.offset_ns, c.method) for c in clocks] == [
        (0, 0, "reference"),
        (1, 0, "none"),
    ]


def test_waits_and_transfers_per_op_and_size(scenario):
    cross = analyze_cross_rank(scenario, WARMUP)
    assert cross.matched_instances == 4 * STEPS and cross.unmatched_instances == 0
    assert cross.measured_instances == 4 * (STEPS - WARMUP)
    assert cross.tie_tolerance_us == _approx(50.0)
    by_key = {(w.op, w.tag, w.nbytes): w for w in cross.waits}
    assert list(by_key) == [
        ("all_reduce", "gradients", BUCKETS[0]),
        ("all_reduce", "gradients", BUCKETS[1]),
        ("all_reduce", "gradients", BUCKETS[2]),
        ("broadcast", "buffers", BCAST_BYTES),
    ]
    bcast = by_key["broadcast", "buffers", BCAST_BYTES]
    assert bcast.instances == STEPS - WARMUP
    assert (bcast.skew_avg_us, bcast.skew_max_us) == (_approx(300.0), _approx(300.0))
    assert bcast.wait_avg_us == _approx((300 + 0 + 200) / 3)
    assert bcast.transfer_avg_us == _approx(50.0)
    assert bcast.wait_share_pct == _approx(100 * (500 / 3) / (500 / 3 + 50))
    first = by_key["all_reduce", "gradients", BUCKETS[0]]
    assert first.skew_avg_us == _approx(10_000.0)
    assert first.wait_avg_us == _approx(20_000 / 3)
    assert first.transfer_avg_us == _approx(2_000.0)
    for nbytes in BUCKETS[1:]:  # queued behind bucket 1: no waiting, only transfer
        queued = by_key["all_reduce", "gradients", nbytes]
        assert (queued.skew_avg_us, queued.wait_avg_us, queued.wait_share_pct) == (0, 0, 0)
        assert queued.transfer_avg_us == _approx(2_000.0)


def test_per_rank_waits_straggler_and_imbalance(scenario):
    cross = analyze_cross_rank(scenario, WARMUP)
    ranks = {r.rank: r for r in cross.ranks}
    assert ranks[0].wait_ms_per_step == _approx(10.3)
    assert ranks[1].wait_ms_per_step == _approx(0.0)
    assert ranks[2].wait_ms_per_step == _approx(10.2)
    assert [ranks[r].last_count for r in range(3)] == [0, 2 * (STEPS - WARMUP), 0]
    assert ranks[1].last_share_pct == _approx(100.0)
    assert ranks[1].lateness_avg_us == _approx((200 + 10_000) / 2)
    assert [ranks[r].instances for r in range(3)] == [4 * (STEPS - WARMUP)] * 3
    # busy: own time of data, forward, backward, optimizer; the broadcast's waiting is
    # taken out of forward (ranks 0 and 2 wait there for rank 1)
    busy = {0: 1 + (9 - 0.3) + 12 + 4, 1: 1.3 + 18.7 + 11 + 4, 2: 1.1 + (8.9 - 0.2) + 12 + 4}
    for r, ms in busy.items():
        assert ranks[r].busy_ms_per_step == _approx(ms)
    mean = sum(busy.values()) / 3
    assert cross.load_imbalance_pct == _approx(100 * (35 - mean) / mean)
    assert ranks[1].lateness_ms_per_step == _approx(10.2)
    assert [ranks[r].lateness_share_pct for r in range(3)] == [0.0, 100.0, 0.0]
    s = cross.straggler
    assert (s.rank, s.phase) == (1, "forward")
    assert s.last_share_pct == _approx(100.0)
    assert s.lateness_avg_ms == _approx(5.1)
    assert (s.lateness_share_pct, s.lateness_ms_per_step) == (100.0, _approx(10.2))
    assert s.phase_excess_ms == _approx(18.7 - 8.7)


def test_overlap_of_gradient_communication_with_backward(scenario):
    o = analyze_cross_rank(scenario, WARMUP).overlap
    # rank 0 and 2: buckets cover 20-36 ms, backward ends at 22; rank 1: 30-36, ends at 31
    assert o.comm_ms_per_step == _approx((16 + 6 + 16) / 3)
    assert o.hidden_ms_per_step == _approx((2 + 1 + 2) / 3)
    assert o.exposed_ms_per_step == _approx((14 + 5 + 14) / 3)
    assert o.hidden_pct == _approx(100 * 5 / 38)
    assert o.exposed_transfer_ms_per_step == _approx(5), "rank 1 arrives last every step"


def test_exposed_transfer_is_the_least_comm_wait_of_each_step(tmp_path):
    """The ranks take turns arriving late: each waits 14 ms in comm_wait in half the steps
    and 2 ms (the transfer) in the others. Their means are 8 ms; the transfer is 2 ms."""

    def late_in_turn(rank, row):
        if row[2] == "comm_wait" and row[0] % 2 == rank:
            return (*row[:4], 2 * MS, *row[5:])
        return row

    o = _two_ranks(tmp_path, late_in_turn).overlap
    assert o.exposed_ms_per_step == _approx(8.0)
    assert o.exposed_transfer_ms_per_step == _approx(2.0)


@pytest.mark.parametrize("dense", [True, False])
def test_unmatched_instances_of_a_crashed_rank(tmp_path, monkeypatch, dense):
    """Instances counted in a dense array or, when their ids are too sparse, by sorting."""
    if not dense:
        monkeypatch.setattr(matching, "DENSE_CELLS", -(10**9))
    rows = {0: rank_rows(0), 1: rank_rows(1), 2: rank_rows(2)}
    crash_step = [i for i, row in enumerate(rows[2]) if row[0] == STEPS - 1]
    rows[2] = rows[2][: crash_step[0] + 4]  # step row, data, forward, broadcast: then dead
    for r in (0, 1):  # the others' first bucket of that step never completes
        for i, row in enumerate(rows[r]):
            if row[0] == STEPS - 1 and row[2] == "all_reduce" and row[5] == BUCKETS[0]:
                rows[r][i] = (*row[:4], -1, *row[5:])
    run = make_run(
        tmp_path,
        {r: [v] for r, v in rows.items()},
        world_size=3,
        warmup_steps=WARMUP,
        rank_files=rank_files(),
    )
    cross = analyze_cross_rank(run, WARMUP)
    assert cross.matched_instances == 4 * (STEPS - 1) + 1  # + the last step's broadcast
    assert cross.unmatched_instances == 3  # three buckets of the last step
    bcast = next(w for w in cross.waits if w.op == "broadcast")
    assert bcast.instances == STEPS - WARMUP


def test_ties_name_no_straggler(tmp_path):
    """Identical ranks: every arrival ties, so no rank is last and nobody waits."""
    rows = {r: [rank_rows(0)] for r in range(4)}  # rank 0's timeline, rank 0's clock
    cross = analyze_cross_rank(make_run(tmp_path, rows, world_size=4, warmup_steps=1), 1)
    assert cross.straggler is None
    assert all(r.last_count == 0 and r.wait_ms_per_step == 0 for r in cross.ranks)
    assert cross.load_imbalance_pct == _approx(0.0)
    assert {w.wait_avg_us for w in cross.waits} == {0.0}


def test_jitter_in_a_balanced_run_names_no_straggler(tmp_path):
    """Each rank is 100 µs late at the broadcast in turn: shares are equal."""
    rows = {}
    for r in range(2):
        own = rank_rows(0, steps=9)
        for i, row in enumerate(own):
            if row[2] == "broadcast" and row[0] % 2 == r:
                own[i] = (*row[:3], row[3] + 100 * US, row[4] - 100 * US, *row[5:])
        rows[r] = [own]
    cross = analyze_cross_rank(make_run(tmp_path, rows, world_size=2, warmup_steps=1), 1)
    assert [r.last_count for r in cross.ranks] == [4, 4]
    assert [r.last_share_pct for r in cross.ranks] == [50.0, 50.0]
    assert cross.straggler is None


def _two_ranks(tmp_path, change) -> object:
    """Two ranks on rank 0's timeline (9 steps); ``change(rank, row)`` edits a row."""
    rows = {r: [[change(r, row) for row in rank_rows(0, steps=9)]] for r in range(2)}
    return analyze_cross_rank(make_run(tmp_path, rows, world_size=2, warmup_steps=1), 1)


def test_small_steady_lateness_is_no_straggler(tmp_path):
    """Rank 1 is always 100 µs late at the broadcast: 0.1 ms per 40 ms step, under 10 %."""

    def late_broadcast(rank: int, row: tuple) -> tuple:
        if rank == 1 and row[2] == "broadcast":
            return (*row[:3], row[3] + 100 * US, row[4] - 100 * US, *row[5:])
        return row

    cross = _two_ranks(tmp_path, late_broadcast)
    late = cross.ranks[1]
    assert (late.last_share_pct, late.lateness_share_pct) == (100.0, 100.0)
    assert late.lateness_ms_per_step == _approx(0.1)
    assert cross.straggler is None


def test_lateness_not_counts_names_the_straggler(tmp_path):
    """Rank 0 is last at two instances a step by 0.2 and 0.3 ms; rank 1 at one, by 10 ms."""

    def change(rank: int, row: tuple) -> tuple:
        op, nbytes = row[2], row[5]
        if rank == 0 and op == "broadcast":  # 200 µs late
            return (*row[:3], row[3] + 200 * US, row[4] - 200 * US, *row[5:])
        if rank == 0 and op == "all_reduce" and nbytes == BUCKETS[0]:  # completes 300 µs late
            return (*row[:4], row[4] + 300 * US, *row[5:])
        if rank == 1 and op == "all_reduce" and nbytes == BUCKETS[0]:  # issued 10 ms late
            return (*row[:3], row[3] + 10 * MS, row[4] - 10 * MS, *row[5:])
        return row

    cross = _two_ranks(tmp_path, change)
    counts = [(r.last_count, round(r.last_share_pct, 6)) for r in cross.ranks]
    assert counts == [(16, round(200 / 3, 6)), (8, round(100 / 3, 6))]
    assert cross.ranks[1].lateness_share_pct == _approx(100 * 10 / 10.5)
    s = cross.straggler
    assert (s.rank, s.lateness_ms_per_step) == (1, _approx(10.0))
    assert s.last_share_pct == _approx(100 / 3)
    assert (s.phase, s.phase_excess_ms) == (None, None)  # its phases are no longer


def test_straggler_threshold():
    assert straggler_min_share_pct(2) == 75.0
    assert straggler_min_share_pct(3) == 50.0
    assert straggler_min_share_pct(64) == 50.0
    assert straggler_min_share_pct(20, 3.3) == 7.5  # 1.5 x a fair share of 20
    assert straggler_min_share_pct(20, 19.0) == 38.0  # twice the next rank's share
    assert straggler_min_share_pct(4, 3.3) == 50.0  # a majority under 8 ranks


def _slots(own_ms: dict[int, float], steps: int = 10) -> StepSlots:
    """Ranks whose every step takes ``own_ms``, all of it in forward."""
    ranks = np.repeat(list(own_ms), steps)
    forward = np.repeat(list(own_ms.values()), steps) * 1e6
    phase_ns = {p: np.zeros(len(ranks)) for p in PHASES} | {"forward": forward}
    keys = step_key(ranks, np.tile(np.arange(steps), len(own_ms)))
    return StepSlots(
        keys=keys, rank=ranks, dur_ns=forward.copy(), samples=np.ones(len(keys), np.int64),
        phase_ns=phase_ns, ranks=np.array(sorted(own_ms)),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("ranks", "next_share", "named"),
    [(20, 62 / 19, True), (20, 20.0, False), (4, 62 / 3, False)],
    ids=["leader of 20", "two leaders of 20", "no majority of 4"],
)
def test_a_clear_leader_among_many_ranks_is_named_without_a_majority(ranks, next_share, named):
    """Among 20 time-sliced ranks a 20 ms sleeper causes 38 % of the lateness and the
    scheduling noise of the 19 others the rest: twice any other rank's share names it.
    Not when another rank comes close, nor among fewer than 8 ranks (a majority)."""
    sleeper = 7 % ranks
    share = {r: (62.0 - next_share) / (ranks - 2) for r in range(ranks)}
    share[sleeper], share[(sleeper + 1) % ranks] = 38.0, next_share
    waits = tuple(
        RankWaits(
            rank=r,
            last_count=1,
            last_share_pct=100 / ranks,
            lateness_avg_us=1e3,
            wait_ms_per_step=5.0,
            busy_ms_per_step=120.0 if r == sleeper else 100.0,
            lateness_ms_per_step=0.6 * share[r],
            lateness_share_pct=share[r],
        )  # fmt: skip
        for r in range(ranks)
    )
    own = {r: 120.0 if r == sleeper else 100.0 for r in range(ranks)}
    found = _straggler(waits, _slots(own), EventTable.empty(), None)
    assert (found is not None) == named
    if named:
        assert (found.rank, found.phase) == (sleeper, "forward")
        assert found.share_needed_pct == pytest.approx(max(150 / ranks, 2 * next_share))


def test_single_rank_has_no_cross_rank_analysis(tmp_path):
    run = make_run(tmp_path, {0: [rank_rows(0)]}, world_size=1)
    assert analyze_cross_rank(run, WARMUP) is None
    assert analysed(run).cross_rank is None


def test_analyze_run_carries_the_cross_rank_analysis(scenario):
    a = analysed(scenario)
    assert a.cross_rank == analyze_cross_rank(scenario, WARMUP, dims=dims_of(a.groups))
    assert a.cross_rank.straggler.rank == 1
    assert {w.dim for w in a.cross_rank.waits} == {"world"}


def _plain_types(obj) -> set[type]:
    """Types of every leaf value of a result (numpy scalars must not leak into results)."""
    if dataclasses.is_dataclass(obj):
        return set().union(*(_plain_types(getattr(obj, f.name)) for f in dataclasses.fields(obj)))
    if isinstance(obj, tuple):
        return set().union(set(), *(_plain_types(v) for v in obj))
    return {type(obj)}


def test_results_hold_plain_python_values(scenario):
    assert _plain_types(analyze_cross_rank(scenario, WARMUP)) <= {int, float, str, type(None)}


def test_no_complete_instance_and_no_step_rows(tmp_path):
    incomplete = [(*r[:4], -1, *r[5:]) if r[1] == 1 else r for r in rank_rows(1)]
    run = make_run(tmp_path, {0: [rank_rows(0)], 1: [incomplete]}, world_size=2)
    cross = analyze_cross_rank(run, WARMUP)
    assert (cross.matched_instances, cross.unmatched_instances) == (0, 4 * STEPS)
    assert cross.waits == () and cross.straggler is None
    assert [r.wait_ms_per_step for r in cross.ranks] == [0.0, 0.0]
    no_steps = {r: [[row for row in rank_rows(r) if row[1] != 2]] for r in range(2)}
    cross = analyze_cross_rank(make_run(tmp_path, no_steps, world_size=2), WARMUP)
    assert cross.matched_instances == 4 * STEPS and cross.measured_instances == 0
    assert (cross.overlap, cross.load_imbalance_pct, cross.straggler) == (None,) * 3
