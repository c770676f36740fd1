"""Lateness on a pipeline, on a hand-built 3-stage GPipe chain with known times
(analyze/stage_lateness.py): judged between stages along the sends and recvs, never against
a stage that only waits for a heavier one, and never more than the step.

Each step (100 ms, times from its start; one microbatch): rank 0 (stage 0) computes its
forward at 0-2 ms, sends the activations asynchronously at 2 ms (waited for at the end of
the step, 90-92 ms, as the recorded p2p_pipeline run does) and posts its recv of the
gradients at 3 ms. Rank 1 (stage 1) receives them (posted at 0), forward at 3-5, sends on to
rank 2 at 5, waits for the gradients from 6 ms, backward, ``pause_ms`` of its own, and sends
the gradients to rank 0. Rank 2 (stage 2) receives at 0-5.5 ms, forward of ``heavy_ms``,
backward, sends the gradients back. Every stage's backward is 2 ms, stages 0 and 1 compute
2 ms forward.
"""

from __future__ import annotations

import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import make_run

from scalescope.analyze.cross_rank import analyze_cross_rank
from scalescope.analyze.layouts.p2p import pair_p2p
from scalescope.analyze.ranks.clocks import align_clocks
from scalescope.analyze.steps.step_slots import measured_slots
from scalescope.events import Kind, RankMeta
from scalescope.events.run import PipelineMeta

MS = 1_000_000
STEP_MS, STEPS = 100, 4


def _row(step: int, kind: Kind, name: str, start_ms: float, dur_ms: float, seq: int = -1,
         peer: int = -1, group: str = "", count: int = 0) -> tuple:  # fmt: skip
    t = step * STEP_MS + start_ms
    nbytes = 1024 if peer >= 0 else 0
    return (step, int(kind), name, int(t * MS), int(dur_ms * MS), nbytes, count, "", group, seq,
            "user" if peer >= 0 else "", peer)  # fmt: skip


def _p2p(step: int, op: str, start_ms: float, dur_ms: float, peer: int, group: str,
         seq: int, kind: Kind = Kind.COLLECTIVE) -> tuple:  # fmt: skip
    return _row(step, kind, op, start_ms, dur_ms, seq=seq, peer=peer, group=group)


def chain(heavy_ms: float, pause_ms: float) -> dict[int, list[list[tuple]]]:
    """The three ranks' rows (module doc); groups "0" (ranks 0-1) and "1" (ranks 1-2)."""
    rows: dict[int, list[tuple]] = {0: [], 1: [], 2: []}
    for s in range(STEPS):
        to_1 = 6 + heavy_ms + 2  # rank 2 sends the gradients
        to_0 = to_1 + 3 + pause_ms  # rank 1 sends them on
        for r in rows:
            rows[r].append(_row(s, Kind.STEP, "step", 0, STEP_MS, count=8 if r == 0 else 0))
            rows[r].append(_row(s, Kind.PHASE, "optimizer", 95, 1))
        rows[0] += [
            _row(s, Kind.PHASE, "forward", 0, 2),
            _p2p(s, "send", 2, 90, 1, "0", 2 * s),
            _p2p(s, "send", 90, 2, 1, "0", s, kind=Kind.WAIT),
            _p2p(s, "recv", 3, to_0 + 0.5 - 3, 1, "0", 2 * s + 1),
            _row(s, Kind.PHASE, "backward", to_0 + 1, 2),
        ]
        rows[1] += [
            _p2p(s, "recv", 0, 2.5, 0, "0", 2 * s),
            _row(s, Kind.PHASE, "forward", 3, 2),
            _p2p(s, "send", 5, 0.5, 2, "1", 2 * s),
            _p2p(s, "recv", 6, to_1 + 0.5 - 6, 2, "1", 2 * s + 1),
            _row(s, Kind.PHASE, "backward", to_1 + 1, 2),
            _p2p(s, "send", to_0, 0.5, 0, "0", 2 * s + 1),
        ]
        rows[2] += [
            _p2p(s, "recv", 0, 5.5, 1, "1", 2 * s),
            _row(s, Kind.PHASE, "forward", 6, heavy_ms),
            _row(s, Kind.PHASE, "backward", 6 + heavy_ms, 2),
            _p2p(s, "send", to_1, 0.5, 1, "1", 2 * s + 1),
        ]
    return {r: [batch] for r, batch in rows.items()}


def test_the_heavy_stage_is_the_straggler_and_the_light_ones_are_never_late(tmp_path):
    """Stage 2 (40 ms forward) keeps rank 1 waiting 6-48 ms of every step: 42 ms. Rank 1 then
    keeps rank 0 waiting 3-51 ms, and rank 0's asynchronous send completes only at the end
    of the step: read as instances of a group (each op queued behind the rank's previous
    one) rank 0 arrived ~40 ms late at its recv, and rank 1 at the gradients it passes on."""
    analysis = analysed(make_run(tmp_path, chain(heavy_ms=40, pause_ms=0), world_size=3))
    assert analysis.pipeline.bound_stage == 2
    cross = analysis.cross_rank
    by_rank = {w.rank: w for w in cross.ranks}
    assert {r: w.stage for r, w in by_rank.items()} == {0: 0, 1: 1, 2: 2}
    assert by_rank[2].lateness_ms_per_step == pytest.approx(42.0)
    assert by_rank[2].lateness_share_pct == 100.0
    for light in (0, 1):
        assert (by_rank[light].lateness_ms_per_step, by_rank[light].last_count) == (0.0, 0)
    s = cross.straggler
    assert (s.rank, s.stage, s.phase) == (2, 2, "forward")
    assert s.lateness_ms_per_step <= STEP_MS


def test_a_stage_is_late_by_its_own_time_not_by_its_waiting(tmp_path):
    """Equal stages (4 ms a microbatch each), rank 1 pausing 30 ms before it sends the
    gradients on: rank 0 waits for it 3-43 ms, of which rank 1 waited 6-10 ms itself for
    rank 2. Rank 1's windows (0-5 ms toward rank 2, 3-43 toward rank 0) less its own
    waiting (0-2, 6-10) are 37 ms; rank 2 kept rank 1 waiting 6-10 ms, rank 0 kept it 0-2.
    Rank 1 does not bound the pipeline (its pause is not compute), so no straggler."""
    run = make_run(tmp_path, chain(heavy_ms=2, pause_ms=30), world_size=3)
    slots = measured_slots(run.events, run.meta.warmup_steps)
    sides = pair_p2p(run.events, align_clocks(run))
    cross = analyze_cross_rank(run, run.meta.warmup_steps, slots, sides)
    late = {w.rank: w.lateness_ms_per_step for w in cross.ranks}
    assert late == {0: pytest.approx(2.0), 1: pytest.approx(37.0), 2: pytest.approx(4.0)}
    assert cross.straggler is None


def test_off_a_pipeline_nothing_is_judged_by_stages(tmp_path):
    """A ring of three ranks exchanging with both neighbours is no chain: no stages, the
    ranks compared as replicas as before."""
    rows = chain(heavy_ms=40, pause_ms=0)
    for s in range(STEPS):
        rows[2][0].append(_p2p(s, "send", 60, 0.5, 0, "2", s))
        rows[0][0].append(_p2p(s, "recv", 60, 0.5, 2, "2", s))
    analysis = analysed(make_run(tmp_path, rows, world_size=3))
    assert analysis.pipeline is None
    assert [w.stage for w in analysis.cross_rank.ranks] == [None, None, None]


def _coll(step: int, op: str, start_ms: float, dur_ms: float, group: str, seq: int) -> tuple:
    t = step * STEP_MS + start_ms
    return (step, int(Kind.COLLECTIVE), op, int(t * MS), int(dur_ms * MS), 4096, 1024,
            "float32", group, seq, "user", -1)  # fmt: skip


def _stage_meta(rank: int, stage: int) -> RankMeta:
    pipe = PipelineMeta(stage=stage, stages=2, stages_held=[stage], schedule="Schedule1F1B",
                        microbatches=1, blocks=[])  # fmt: skip
    return RankMeta(rank=rank, world_size=4, status="completed", steps=STEPS, pipeline=pipe)


def test_replicas_of_a_stage_are_compared_and_a_collective_across_stages_is_not(tmp_path):
    """pp 2 x dp 2: ranks 0, 1 hold stage 0 (20 ms forward; rank 1 30 ms), ranks 2, 3 stage 1
    (5 ms). Stage 0's replicas all-reduce on their dp group as each ends its forward: rank
    1 is 10 ms late there. At 40 ms every rank enters a barrier of the world group, rank 2
    10 ms after the others: a collective across stages, judged nowhere."""
    stage = {0: 0, 1: 0, 2: 1, 3: 1}
    forward = {0: 20, 1: 30, 2: 5, 3: 5}
    rows: dict[int, list[tuple]] = {r: [] for r in stage}
    for s in range(STEPS):
        for r in stage:
            rows[r] += [
                _row(s, Kind.STEP, "step", 0, STEP_MS, count=8 if r == 0 else 0),
                _row(s, Kind.PHASE, "forward", 0, forward[r]),
                _coll(s, "barrier", 50 if r == 2 else 40, 0.5 if r == 2 else 10.5, "0", s),
            ]
            if stage[r] == 0:
                rows[r].append(_coll(s, "all_reduce", forward[r], 32 - forward[r], "dp0", s))
    metas = {r: _stage_meta(r, st) for r, st in stage.items()}
    analysis = analysed(make_run(tmp_path, {r: [b] for r, b in rows.items()}, world_size=4,
                                    rank_files=metas))  # fmt: skip
    assert analysis.pipeline.bound_stage == 0
    late = {w.rank: w.lateness_ms_per_step for w in analysis.cross_rank.ranks}
    assert late == {0: 0.0, 1: pytest.approx(10.0), 2: 0.0, 3: 0.0}
    s = analysis.cross_rank.straggler
    assert (s.rank, s.stage) == (1, 0)
