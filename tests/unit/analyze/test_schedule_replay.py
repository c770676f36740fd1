"""analyze/layouts/schedule_replay.py and block_move.py: the step of a pipeline replayed from
its schedule with measured times, before and after a block move (the issue's numbers, GPipe,
1F1B, interleaved, balanced stages, transfers and each rank's own time)."""

from __future__ import annotations

import pytest

from scalescope.analyze.layouts.block_move import propose_move
from scalescope.analyze.layouts.schedule_replay import (
    StageTimes,
    rank_order,
    replay_step,
    schedule_order,
)
from scalescope.analyze.layouts.stage_figures import BlockCost, StageFigures

M = 4


def uneven() -> list[StageTimes]:
    """The issue's example: 2 and 6 blocks of 1.5 + 3 ms a microbatch: 9 and 27 ms."""
    return [StageTimes(3.0, 6.0), StageTimes(9.0, 18.0)]


@pytest.mark.parametrize("order", ["gpipe", "1f1b"])
def test_the_issues_example_gains_27_ms_not_45(order):
    """(m - 1) x the slowest + the sum of the stages: 3 x 27 + 36 = 117 ms before, 3 x 18 +
    36 = 90 after the two blocks move: 27 ms, where (m + p - 1) x 9 said 45."""
    before = replay_step(order, uneven(), M)
    after = replay_step(order, [StageTimes(6.0, 12.0)] * 2, M)
    assert (before, after) == (pytest.approx(117.0), pytest.approx(90.0))


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (3, 5), (4, 2)])
@pytest.mark.parametrize("order", ["gpipe", "1f1b"])
def test_balanced_stages_replay_the_schedules_theory(order, p, m):
    """Equal stages, no transfer: (m + p - 1) slots of forward + backward."""
    assert replay_step(order, [StageTimes(1.0, 2.0)] * p, m) == pytest.approx((m + p - 1) * 3)


@pytest.mark.parametrize(("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (2, 3, 4), (4, 3, 4)])
def test_an_interleaved_schedule_replays_its_theory(p, v, m):
    """p ranks of v chunks of 1 + 2 ms: v m chunk slots, bubble (p - 1)/(v m + p - 1)."""
    step = replay_step("interleaved", [StageTimes(1.0, 2.0)] * (p * v), m, chunks=v)
    assert step == pytest.approx(3 * (v * m + p - 1))


def test_the_orders_run_every_microbatch_once_and_never_deadlock():
    """Every shape torch's schedules take (an interleaved one: m a multiple of its rounds,
    max(1, m // p))."""
    for p in range(2, 6):
        for v in (1, 2, 3):
            for m in range(1, 13):
                order = "interleaved" if v > 1 else "1f1b"
                if v > 1 and m % max(1, m // p):
                    continue
                for r in range(p):
                    actions = rank_order(order, r, p, m, v)
                    assert sorted(actions) == sorted(
                        (f, c * p + r, i) for f in (True, False) for c in range(v)
                        for i in range(m)
                    )  # fmt: skip
                replay_step(order, [StageTimes(1.0, 1.0)] * (p * v), m, chunks=v)


def test_1f1b_runs_warm_up_forwards_then_one_of_each():
    assert rank_order("1f1b", 0, 2, 4) == [
        (True, 0, 0), (True, 0, 1), (False, 0, 0), (True, 0, 2), (False, 0, 1), (True, 0, 3),
        (False, 0, 2), (False, 0, 3),
    ]  # fmt: skip
    assert rank_order("1f1b", 1, 2, 2) == [(True, 1, 0), (False, 1, 0), (True, 1, 1),
                                           (False, 1, 1)]  # fmt: skip


def test_transfers_own_time_and_the_optimizer_lengthen_the_step():
    """One microbatch through 2 stages: F 1, transfer 0.5, F 1, B 2, transfer 0.5, B 2 = 7 ms.
    Stage 0's own time: 0.25 ms before its first forward (its lead) delays the whole step;
    3 ms between its forward and backward hides under its wait for the gradients (4.5 ms);
    its optimizer 1 ms and 0.5 ms after its last action (its tail) follow it."""
    plain = [StageTimes(1.0, 2.0, recv_ms=0.5), StageTimes(1.0, 2.0, recv_ms=0.5)]
    assert replay_step("gpipe", plain, 1) == pytest.approx(7.0)
    busy = [StageTimes(1.0, 2.0, own_ms=3.0, recv_ms=0.5, optimizer_ms=1.0, lead_ms=0.25,
                       tail_ms=0.5), plain[1]]  # fmt: skip
    assert replay_step("gpipe", busy, 1) == pytest.approx(7.0 + 0.25 + 1.0 + 0.5)


def test_a_recv_blocks_its_stage_even_when_its_input_came_early():
    """1F1B, 4 microbatches, the last stage 10 + 1 ms a microbatch, 0.5 ms to receive each
    activation; stage 0 1 + 1 ms runs ahead, so from the second microbatch on stage 1's input
    is there before it is free. Each of its 4 transfers is its own time all the same: 1 (stage
    0's first forward) + 4 x (0.5 + 11) + 1 (its last backward) = 48 ms; a transfer after the
    input's arrival only counted the first (46.5 ms)."""
    stages = [StageTimes(1.0, 1.0), StageTimes(10.0, 1.0, recv_ms=0.5)]
    assert replay_step("1f1b", stages, M) == pytest.approx(48.0)


def test_own_time_between_actions_is_on_the_path_where_no_wait_hides_it():
    """The last stage's forward and backward follow each other with no input to wait for:
    its 1.5 ms between them lengthen the step; none is charged before its first action."""
    plain = [StageTimes(1.0, 2.0), StageTimes(1.0, 2.0)]
    last = [plain[0], StageTimes(1.0, 2.0, own_ms=1.5)]
    assert replay_step("gpipe", last, 1) == pytest.approx(replay_step("gpipe", plain, 1) + 1.5)


def test_a_bad_order_or_shape_is_one_line():
    with pytest.raises(ValueError, match="no schedule order 'zb'"):
        replay_step("zb", uneven(), M)
    with pytest.raises(ValueError, match="7 is not a multiple of its 3 rounds"):
        replay_step("interleaved", [StageTimes(1.0, 1.0)] * 4, 7, chunks=2)
    with pytest.raises(ValueError, match="3 stages do not split into 2 per rank"):
        replay_step("interleaved", [StageTimes(1.0, 1.0)] * 3, M, chunks=2)


def test_schedule_names_map_to_their_order():
    assert schedule_order("ScheduleGPipe", 1) == "gpipe"
    assert schedule_order("Schedule1F1B", 1) == "1f1b"
    assert schedule_order("DeepSpeed TrainSchedule (1F1B)", 1) == "1f1b"
    assert schedule_order("ScheduleInterleaved1F1B", 2) == "interleaved"


def figures(stage: int, blocks: int, step_ms: float, block_ms: float = 4.5) -> StageFigures:
    """A stage of ``blocks`` blocks of ``block_ms`` a microbatch (1/3 forward), no sends."""
    f, b = blocks * block_ms / 3, blocks * block_ms * 2 / 3
    costs = tuple(BlockCost(str(i), M * block_ms / 3, M * block_ms * 2 / 3)
                  for i in range(blocks))  # fmt: skip
    return StageFigures(
        rank=stage, stage=stage, step_ms=step_ms, forward_ms=M * f, backward_ms=M * b,
        optimizer_ms=0.0, transfer_ms=0.0, wait_ms=0.0, bubble_ms=0.0, bubble_pct=0.0,
        forward_ms_per_microbatch=f, backward_ms_per_microbatch=b, peak_memory_bytes=None,
        blocks=costs,
    )  # fmt: skip


@pytest.mark.parametrize("schedule", ["ScheduleGPipe", "Schedule1F1B"])
def test_balanced_stages_get_no_move(schedule):
    even = (figures(0, 4, 90.0), figures(1, 4, 90.0))
    assert propose_move(even, M, 90.0, schedule) is None


@pytest.mark.parametrize("schedule", ["ScheduleGPipe", "Schedule1F1B"])
def test_the_move_is_replayed_and_fits_a_step_that_the_replay_describes(schedule):
    """Measured 117 ms, as the schedule runs the stages: the replay fits it exactly and the
    move of 2 blocks gains 27 ms."""
    move = propose_move((figures(0, 2, 117.0), figures(1, 6, 117.0)), M, 117.0, schedule)
    assert (move.source, move.target, move.names) == (1, 0, ("0", "1"))
    assert move.replayed_step_ms == pytest.approx(117.0) and move.replay_error_pct == 0.0
    assert (move.predicted_step_ms, move.gain_ms) == (pytest.approx(90.0), pytest.approx(27.0))
