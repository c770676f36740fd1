"""analyze/layouts/stage_fixes.py: a stage's cost is the schedule replayed with the stage at
its peers' pace, and a bubble's the schedule replayed over twice the microbatches, on
hand-built stages (GPipe, 1F1B, interleaved); twice the microbatches keep each
microbatch's fixed costs (host time between actions, a transfer a message, the work outside the
blocks)."""

from __future__ import annotations

import dataclasses

import pytest

from scalescope.analyze.layouts.block_move import stage_times
from scalescope.analyze.layouts.schedule_replay import StageTimes, replay_step
from scalescope.analyze.layouts.stage_figures import BlockCost, StageFigures
from scalescope.analyze.layouts.stage_fixes import (
    PipelineReplay,
    at_peers_pace,
    pipeline_replay,
    twice_the_microbatches,
)


def figures(
    per_microbatch: list[tuple[float, float]], m: int, held: int = 1
) -> tuple[StageFigures, ...]:
    """One rank a stage, forward and backward per microbatch (ms, all its stages together);
    ``held`` stages a rank (stage r and r + p)."""
    p = len(per_microbatch)
    out = []
    for rank, (fwd, bwd) in enumerate(per_microbatch):
        out.append(StageFigures(
            rank=rank, stage=rank, step_ms=100.0, forward_ms=fwd * m, backward_ms=bwd * m,
            optimizer_ms=0.0, transfer_ms=0.0, wait_ms=0.0, bubble_ms=0.0, bubble_pct=0.0,
            forward_ms_per_microbatch=fwd, backward_ms_per_microbatch=bwd,
            peak_memory_bytes=None,
            held=tuple(rank + c * p for c in range(held)) if held > 1 else (),
        ))  # fmt: skip
    return tuple(out)


def test_a_heavy_first_stage_under_gpipe_costs_its_extra_m_times_not_m_plus_p_minus_1():
    """Stage 0 forwards in 10 ms, stage 1 in 1 (backwards 1 ms): stage 1 follows stage 0's
    forwards, then both backwards run back to back: 35 ms. At its peer's pace: 8 ms. The
    27 ms gain is m x 9 ms; (m + p - 1) x 9 would say 36."""
    replay = pipeline_replay(figures([(10.0, 1.0), (1.0, 1.0)], 3), 3, 35.0, "gpipe")
    fix = at_peers_pace(replay, 0)
    assert (fix.replayed_step_ms, fix.fixed_step_ms) == (pytest.approx(35.0), pytest.approx(8.0))
    assert fix.gain_ms == pytest.approx(27.0) and fix.replay_error_pct == pytest.approx(0.0)


@pytest.mark.parametrize("order", ["gpipe", "1f1b"])
def test_the_paced_stage_is_replayed_as_if_it_computed_as_its_peer(order):
    replay = pipeline_replay(figures([(2.0, 4.0), (7.0, 9.0)], 4), 4, 80.0, order)
    fix = at_peers_pace(replay, 1)
    before = replay_step(order, [StageTimes(2.0, 4.0), StageTimes(7.0, 9.0)], 4)
    assert fix.replayed_step_ms == pytest.approx(before)
    assert fix.fixed_step_ms == pytest.approx(replay_step(order, [StageTimes(2.0, 4.0)] * 2, 4))
    assert fix.replay_error_pct == pytest.approx(100 * (before - 80.0) / 80.0)


def test_a_stage_is_paced_at_the_median_of_the_others():
    replay = pipeline_replay(figures([(1.0, 1.0), (3.0, 3.0), (9.0, 9.0)], 4), 4, 0.0, "1f1b")
    fix = at_peers_pace(replay, 2)
    even = [StageTimes(1.0, 1.0), StageTimes(3.0, 3.0), StageTimes(2.0, 2.0)]
    assert fix.fixed_step_ms == pytest.approx(replay_step("1f1b", even, 4))


def test_an_interleaved_rank_is_split_between_its_stages_and_paced_as_a_whole():
    """2 ranks of 2 stages each (rank r holds stages r and r + 2): rank 1's 8 + 8 ms per
    microbatch are 4 + 4 in each of its stages."""
    replay = pipeline_replay(figures([(2.0, 2.0), (8.0, 8.0)], 4, held=2), 4, 0.0,
                             "interleaved", chunks=2)  # fmt: skip
    fix = at_peers_pace(replay, 1)
    light, heavy = StageTimes(1.0, 1.0), StageTimes(4.0, 4.0)
    now = replay_step("interleaved", [light, heavy, light, heavy], 4, 2)
    assert fix.replayed_step_ms == pytest.approx(now)
    assert fix.fixed_step_ms == pytest.approx(replay_step("interleaved", [light] * 4, 4, 2))
    assert fix.gain_ms > 0


def test_twice_the_microbatches_halves_each_action_and_doubles_them():
    """Equal stages of 1 + 2 ms a microbatch, 2 microbatches: (m + p - 1) x 3 = 9 ms; over 4
    microbatches of half the work, 5 x 1.5 = 7.5 ms."""
    replay = pipeline_replay(figures([(1.0, 2.0), (1.0, 2.0)], 2), 2, 9.0, "gpipe")
    fix = twice_the_microbatches(replay)
    assert (fix.replayed_step_ms, fix.fixed_step_ms) == (pytest.approx(9.0), pytest.approx(7.5))


def test_no_replay_without_a_chain_of_stages():
    assert pipeline_replay(figures([(1.0, 1.0)], 2), 2, 5.0, "gpipe") is None
    gap = tuple(f if f.rank == 0 else StageFigures(**{**f.__dict__, "stage": 2})
                for f in figures([(1.0, 1.0), (2.0, 2.0)], 2))  # fmt: skip
    assert pipeline_replay(gap, 2, 5.0, "gpipe") is None


def test_an_interleaved_order_torch_refuses_is_no_fix():
    """5 microbatches on 2 ranks: not a multiple of the interleaved schedule's 2 rounds."""
    replay = pipeline_replay(figures([(1.0, 1.0), (4.0, 4.0)], 5, held=2), 5, 0.0,
                             "interleaved", chunks=2)  # fmt: skip
    assert at_peers_pace(replay, 1) is None


def test_a_paced_stage_keeps_no_more_own_time_than_its_peers():
    """Stage 1's host time around its actions grew with its extra work (3 ms between two
    actions against its peer's 1, 4 ms after its last against 1, 2 ms before its first
    against none): paced, it has its peer's; a stage whose own time is the shorter keeps
    it."""
    heavy = (StageTimes(1.0, 1.0, own_ms=1.0, tail_ms=1.0),
             StageTimes(5.0, 1.0, own_ms=3.0, lead_ms=2.0, tail_ms=4.0))  # fmt: skip
    fix = at_peers_pace(PipelineReplay("gpipe", heavy, 4, 1, 0.0), 1)
    even = [StageTimes(1.0, 1.0, own_ms=1.0, tail_ms=1.0)] * 2
    assert fix.fixed_step_ms == pytest.approx(replay_step("gpipe", even, 4))
    light = (StageTimes(1.0, 1.0, own_ms=3.0), StageTimes(5.0, 1.0, own_ms=1.0))
    kept = at_peers_pace(PipelineReplay("gpipe", light, 4, 1, 0.0), 1)
    mine = [StageTimes(1.0, 1.0, own_ms=3.0), StageTimes(1.0, 1.0, own_ms=1.0)]
    assert kept.fixed_step_ms == pytest.approx(replay_step("gpipe", mine, 4))


def test_twice_the_microbatches_keeps_each_microbatchs_fixed_costs():
    """Equal GPipe stages of 1 + 2 ms a microbatch, 1 ms of host time between two actions and
    0.5 ms a message, 2 microbatches. Twice the microbatches halves only the blocks' work:
    the host's 3 ms between a rank's 4 actions become 6 ms over the 7 gaps between its 8, the
    message's 0.5 ms stays, and so does each forward's 0.5 ms outside the stage's blocks (its
    wrapper): each forward 0.5 + 0.25, each backward 1; the step's own time before the first
    action and after the last (2 and 3 ms) stays whole."""
    stage = StageTimes(1.0, 2.0, own_ms=1.0, recv_ms=0.5, forward_call_ms=0.5, lead_ms=2.0,
                       tail_ms=3.0)  # fmt: skip
    fix = twice_the_microbatches(PipelineReplay("gpipe", (stage, stage), 2, 1, 0.0))
    after = StageTimes(0.75, 1.0, own_ms=6.0 / 7, recv_ms=0.5, forward_call_ms=0.5,
                       lead_ms=2.0, tail_ms=3.0)  # fmt: skip
    assert fix.replayed_step_ms == pytest.approx(replay_step("gpipe", [stage] * 2, 2))
    assert fix.fixed_step_ms == pytest.approx(replay_step("gpipe", [after] * 2, 4))


def test_twice_the_microbatches_lose_where_fixed_costs_outweigh_the_bubble():
    """2 ms of host time an action against 1 + 1 ms of compute a microbatch: 4 microbatches
    add 8 actions' host time on each rank and take 1 ms of compute off the bubble."""
    stage = StageTimes(1.0, 1.0, own_ms=2.0)
    fix = twice_the_microbatches(PipelineReplay("gpipe", (stage, stage), 2, 1, 0.0))
    assert fix.gain_ms < 0


def test_a_forward_outside_the_blocks_is_a_cost_per_call():
    """A stage timed 3 ms a forward over 2 microbatches whose blocks took 4 ms a step: 1 ms
    of each forward lies outside them (a pre-hook's work), none of its backward; without
    block times nothing is known to be fixed."""
    (f,) = figures([(3.0, 2.0)], 2)[:1]
    blocks = (BlockCost("0", 4.0, 4.0),)
    t = stage_times(dataclasses.replace(f, blocks=blocks), 2, None)
    assert (t.forward_call_ms, t.backward_call_ms) == (pytest.approx(1.0), 0.0)
    assert (stage_times(f, 2, None).forward_call_ms) == 0.0
