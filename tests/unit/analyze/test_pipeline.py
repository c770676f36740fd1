"""Pipeline stages on hand-built runs with known times (analyze/pipeline.py): the bubble,
the schedule's theory, the bound stage, the block move and its predicted step, and stages
inferred from a chain of sends and recvs."""

from __future__ import annotations

import dataclasses

import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import make_run

from scalescope.analyze.layouts.pipeline import theory_bubble_pct
from scalescope.diagnose.engine import diagnose_run
from scalescope.events import Kind
from scalescope.events.run import BlockMeta, PipelineMeta, RankMeta
from scalescope.report.document import Line, Table
from scalescope.report.media.report_json import report_json
from scalescope.report.views.pipeline import pipeline_section
from scalescope.report.views.rank_summary import ALL_IN_JSON, RANK_ROWS_LIMIT

MS = 1_000_000
STEP_MS, MICRO, STEPS = 200, 4, 3
BLOCK_FWD_MS, BLOCK_BWD_MS = 6, 12
"""Every block's forward and backward per step (all microbatches)."""
BLOCKS = {0: 2, 1: 6}
OPT_MS = {0: 1, 1: 2}


def row(step: int, kind: Kind, name: str, start_ms: float, dur_ms: float, seq: int = -1,
        peer: int = -1, count: int = 0) -> tuple:  # fmt: skip
    return (step, int(kind), name, int(start_ms * MS), int(dur_ms * MS), 0, count, "", "0" if
            peer >= 0 else "", seq, "user" if peer >= 0 else "", peer)  # fmt: skip


def stage_rows(rank: int, blocks: dict[int, int] = BLOCKS) -> list[tuple]:
    """Each microbatch's forward and backward: the stage's blocks' share of the step (stage
    ``rank``)."""
    fwd = blocks[rank] * BLOCK_FWD_MS / MICRO
    bwd = blocks[rank] * BLOCK_BWD_MS / MICRO
    out = []
    for s in range(STEPS):
        t = s * STEP_MS
        out.append(row(s, Kind.STEP, "step", t, STEP_MS, count=32 if rank == 0 else 0))
        for mb in range(MICRO):
            out.append(row(s, Kind.PHASE, "forward", t + 10 * mb, fwd, seq=mb))
            out.append(row(s, Kind.PHASE, "backward", t + 100 + 20 * mb, bwd, seq=mb))
        out.append(row(s, Kind.PHASE, "optimizer", t + STEP_MS - 5, OPT_MS[rank]))
    return out


def meta(
    rank: int, stage: int | None = None, world: int = 2, blocks_of: dict[int, int] = BLOCKS
) -> RankMeta:
    """Rank ``rank`` of ``world``, holding ``stage`` (its rank by default) of 2, its blocks
    ``blocks_of[stage]``."""
    stage = rank if stage is None else stage
    blocks = [
        BlockMeta(name=str(i), forward_ns=[BLOCK_FWD_MS * MS] * STEPS,
                  backward_ns=[BLOCK_BWD_MS * MS] * STEPS)
        for i in range(blocks_of[stage])
    ]  # fmt: skip
    pipe = PipelineMeta(stage=stage, stages=2, stages_held=[stage], schedule="Schedule1F1B",
                        microbatches=MICRO, blocks=blocks)  # fmt: skip
    return RankMeta(rank=rank, world_size=world, status="completed", steps=STEPS, pipeline=pipe)


@pytest.fixture
def pipeline_run(tmp_path):
    rows = {r: [stage_rows(r)] for r in (0, 1)}
    return make_run(tmp_path, rows, world_size=2, rank_files={r: meta(r) for r in (0, 1)})


def test_the_stages_table_is_cut_beyond_16_ranks(tmp_path):
    """24 ranks, 12 per stage: the report's table lists the first RANK_ROWS_LIMIT and says how
    many more the JSON holds, which keeps them all."""
    world = 24
    stage = {r: r * 2 // world for r in range(world)}
    rows = {r: [stage_rows(stage[r])] for r in range(world)}
    metas = {r: meta(r, stage[r], world) for r in range(world)}
    run = make_run(tmp_path, rows, world_size=world, rank_files=metas)
    analysis = analysed(run)
    assert len(analysis.pipeline.ranks) == world
    section = pipeline_section(analysis)
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    assert [row[0] for row in table.rows] == [str(r) for r in range(RANK_ROWS_LIMIT)]
    assert len(table.values) == RANK_ROWS_LIMIT
    assert table.caption.endswith(f"{world - RANK_ROWS_LIMIT:,} more rows not shown; {ALL_IN_JSON}")
    assert len(report_json(analysis, None)["pipeline"]["ranks"]) == world


def test_the_stages_table_keeps_every_rank_up_to_16(pipeline_run):
    (table,) = [b for b in pipeline_section(analysed(pipeline_run)).blocks
                if isinstance(b, Table)]  # fmt: skip
    assert [row[0] for row in table.rows] == ["0", "1"]
    assert "not shown" not in table.caption


def test_theory_of_the_schedules():
    assert theory_bubble_pct(2, 4) == pytest.approx(100 / 5)
    assert theory_bubble_pct(4, 8) == pytest.approx(100 * 3 / 11)
    assert theory_bubble_pct(4, 8, chunks=2) == pytest.approx(100 * 3 / 19)
    assert theory_bubble_pct(1, 8) == 0.0


def test_each_stage_compute_per_microbatch_and_bubble(pipeline_run):
    pipe = analysed(pipeline_run).pipeline
    assert (pipe.stages, pipe.microbatches, pipe.schedule) == (2, MICRO, "Schedule1F1B")
    assert pipe.theory_bubble_pct == pytest.approx(20.0)
    for f in pipe.ranks:
        n = BLOCKS[f.rank]
        assert f.forward_ms_per_microbatch == pytest.approx(n * BLOCK_FWD_MS / MICRO)
        assert f.backward_ms_per_microbatch == pytest.approx(n * BLOCK_BWD_MS / MICRO)
        busy = n * (BLOCK_FWD_MS + BLOCK_BWD_MS) + OPT_MS[f.rank]
        assert f.bubble_pct == pytest.approx(100 * (STEP_MS - busy) / STEP_MS)
    assert pipe.bound_stage == 1


def test_own_time_before_the_first_action_and_after_the_last_is_the_steps(tmp_path):
    """Each step: stage 1 posts its recv, is blocked in it 6 of the 12 ms before its first
    forward (lead 6 ms), and after its last backward (ends at 178 ms) waits 4 ms on its send
    and runs its 2 ms optimizer (tail 200 - 178 - 4 - 2 = 16 ms). Stage 0 recorded no waits:
    its blocking send's call (10 ms) after its last backward (ends at 166 ms) is its blocked
    time (tail 200 - 166 - 10 - 1 = 23 ms); it computes from its step's start (lead 0)."""
    rows = {0: stage_rows(0), 1: [r for r in stage_rows(1) if r[2] != "forward"]}
    for s in range(STEPS):
        t = s * STEP_MS
        rows[0].append(row(s, Kind.COLLECTIVE, "send", t + 170, 10, seq=s, peer=1))
        rows[1] += [row(s, Kind.WAIT, "recv", t + 3, 6, seq=s, peer=0),
                    row(s, Kind.WAIT, "send", t + 180, 4, seq=s, peer=0)]  # fmt: skip
        rows[1] += [row(s, Kind.PHASE, "forward", t + 12 + 10 * mb, 9, seq=mb)
                    for mb in range(MICRO)]  # fmt: skip
    run = make_run(tmp_path, {r: [v] for r, v in rows.items()}, world_size=2,
                   rank_files={r: meta(r) for r in (0, 1)})  # fmt: skip
    stages = {f.stage: f for f in analysed(run).pipeline.ranks}
    assert (stages[0].lead_ms, stages[0].tail_ms) == (pytest.approx(0.0), pytest.approx(23.0))
    assert (stages[1].lead_ms, stages[1].tail_ms) == (pytest.approx(6.0), pytest.approx(16.0))


def test_steps_whose_sends_and_recvs_were_not_kept_leave_the_ends_alone(tmp_path):
    """The rows of the last test's sends and waits kept for the first 2 of 3 steps, as a
    summary recording's window keeps them: in the last, stage 1's 6 ms blocked before its
    first forward and stage 0's 10 ms send after its last backward would read as their own
    time (leads 6, 6, 12: 8 ms a step; tails 23, 23, 33). Only the kept steps count: 6 and
    16, 0 and 23, as when every step kept them."""
    kept = STEPS - 1
    rows = {0: stage_rows(0), 1: [r for r in stage_rows(1) if r[2] != "forward"]}
    for s in range(STEPS):
        t = s * STEP_MS
        rows[1] += [row(s, Kind.PHASE, "forward", t + 12 + 10 * mb, 9, seq=mb)
                    for mb in range(MICRO)]  # fmt: skip
        if s >= kept:
            continue
        rows[0].append(row(s, Kind.COLLECTIVE, "send", t + 170, 10, seq=s, peer=1))
        rows[1] += [row(s, Kind.WAIT, "recv", t + 3, 6, seq=s, peer=0),
                    row(s, Kind.WAIT, "send", t + 180, 4, seq=s, peer=0)]  # fmt: skip
    run = make_run(tmp_path, {r: [v] for r, v in rows.items()}, world_size=2,
                   rank_files={r: meta(r) for r in (0, 1)})  # fmt: skip
    stages = {f.stage: f for f in analysed(run).pipeline.ranks}
    assert (stages[0].lead_ms, stages[0].tail_ms) == (pytest.approx(0.0), pytest.approx(23.0))
    assert (stages[1].lead_ms, stages[1].tail_ms) == (pytest.approx(6.0), pytest.approx(16.0))


def test_the_move_evens_the_stages_and_predicts_the_step(pipeline_run):
    """Per block 4.5 ms a microbatch: stage 0 has 9, stage 1 27; two blocks from the front of
    stage 1 leave 18 and 18. 1F1B replayed: (m - 1) x the slowest + the sum of the stages,
    3 x 27 + 36 = 117 ms, + stage 0's optimizer 1 = 118 before; 3 x 18 + 36 + 1 = 91 after:
    27 ms saved (the old formula's (m + p - 1) x 9 = 45 ms, the issue's example). The
    hand-built rows leave 82 ms of the 200 ms step outside every phase with no send or recv
    to tell it: the replay is 41% under the measured step, and says so."""
    analysis = analysed(pipeline_run)
    move = analysis.pipeline.move
    assert (move.source, move.target, move.blocks, move.names) == (1, 0, 2, ("0", "1"))
    assert move.slowest_ms_per_microbatch == pytest.approx(18.0)
    assert move.replayed_step_ms == pytest.approx(118.0)
    assert move.predicted_step_ms == pytest.approx(91.0)
    assert move.gain_ms == pytest.approx(27.0)
    assert move.replay_error_pct == pytest.approx(100 * (118 - STEP_MS) / STEP_MS)
    lines = [b.text for b in pipeline_section(analysis).blocks if isinstance(b, Line)]
    assert (
        "move 2 block(s) (0, 1) from stage 1 to stage 0: predicted step 91.0 ms, the schedule "
        "replayed (now 118.0 ms: -41% off the measured step)" in lines
    )


def test_findings_name_the_move_and_no_replica_comparison(pipeline_run):
    analysis = analysed(pipeline_run)
    findings = {f.code: f for f in diagnose_run(pipeline_run, analysis).findings}
    imbalance = findings["STAGE_IMBALANCE"]
    assert imbalance.saved_ms_per_step == pytest.approx(27.0), "the replay's gain, not 45"
    assert "move 2 block(s) (0, 1) from stage 1 to stage 0" in imbalance.remedies[0]
    assert (
        "a step of 91.0 ms, against 118.0 ms replayed now (measured 200.0 ms)"
        in (imbalance.remedies[0])
    )
    assert "replayed" in imbalance.basis and "-41% off the measured step" in imbalance.basis
    bubble = findings["PIPELINE_BUBBLE"]
    assert bubble.rank == 1 and bubble.share_pct == pytest.approx(81.5)
    assert bubble.summary.startswith(
        "stage 1 bounds the pipeline: the others idle up to 82% of each step waiting for it"
    ), "stage 0 idles most, waiting for stage 1: the cause is stage 1"
    assert bubble.remedies[0].startswith("even the stages' compute per microbatch: stage 1 "
                                         "computes 27.00 ms, stage 0 9.00 ms")  # fmt: skip
    assert not {"STRAGGLER", "LOAD_IMBALANCE", "INDEPENDENT_REPLICAS"} & set(findings)


def test_deepspeeds_bubble_is_told_its_own_knob(tmp_path):
    """DeepSpeed's pipeline engine runs one schedule: more microbatches is its only lever,
    set by its gradient accumulation steps."""
    rows = {r: [stage_rows(r)] for r in (0, 1)}
    files = {}
    for r in (0, 1):
        m = meta(r)
        m.pipeline.schedule = "DeepSpeed TrainSchedule (1F1B)"
        files[r] = m
    run = make_run(tmp_path, rows, world_size=2, rank_files=files)
    findings = {f.code: f for f in diagnose_run(run, analysed(run)).findings}
    lighten, only = findings["PIPELINE_BUBBLE"].remedies
    assert lighten.startswith("even the stages' compute per microbatch: stage 1")
    assert only.startswith(f"split the batch into {2 * MICRO} microbatches instead of {MICRO}")
    assert "gradient_accumulation_steps" in only and "n_microbatches" not in only


CHAIN_BATCH = 8
"""Samples every stage of the hand-written chain counts per step (its inputs' rows)."""


def chain_rows(rank: int, world: int) -> list[tuple]:
    """A hand-written GPipe step of one microbatch: activations forward, gradients back."""
    out = []
    for s in range(STEPS):
        t = s * STEP_MS
        out.append(row(s, Kind.STEP, "step", t, STEP_MS, count=CHAIN_BATCH))
        if rank > 0:
            out.append(row(s, Kind.COLLECTIVE, "recv", t + 10 * rank, 1, seq=4 * s, peer=rank - 1))
        if rank < world - 1:
            out.append(row(s, Kind.COLLECTIVE, "send", t + 10 * rank + 5, 1, seq=4 * s + 1,
                           peer=rank + 1))  # fmt: skip
            out.append(row(s, Kind.COLLECTIVE, "recv", t + 150 - 10 * rank, 1, seq=4 * s + 2,
                           peer=rank + 1))  # fmt: skip
        if rank > 0:
            out.append(row(s, Kind.COLLECTIVE, "send", t + 155 - 10 * rank, 1, seq=4 * s + 3,
                           peer=rank - 1))  # fmt: skip
        out.append(row(s, Kind.PHASE, "forward", t + 10 * rank + 2, 2))
    return out


def test_stages_of_a_hand_written_chain_are_inferred(tmp_path):
    """Ranks 2 - 0 - 1 in the chain (rank 2 starts it): stage 0 is the end that sends first."""
    order = {2: 0, 0: 1, 1: 2}
    world = 3
    rows = {}
    for rank, stage in order.items():
        mine = chain_rows(stage, world)
        back = {s: r for r, s in order.items()}
        rows[rank] = [[(*r[:11], back[r[11]] if r[11] >= 0 else -1) for r in mine]]
    analysis = analysed(make_run(tmp_path, rows, world_size=world))
    pipe = analysis.pipeline
    assert pipe.schedule == "inferred" and pipe.stages == 3 and pipe.microbatches == 1
    assert {f.rank: f.stage for f in pipe.ranks} == order
    assert pipe.move is None
    measured = STEPS - 1  # warm-up: 1 step
    assert analysis.steps.total_samples == CHAIN_BATCH * measured  # the first stage's only
    span_s = measured * STEP_MS / 1e3
    assert analysis.steps.samples_per_s == pytest.approx(CHAIN_BATCH * measured / span_s)


def test_the_dashboard_draws_one_measured_step_of_each_stage(pipeline_run):
    """One step of each stage on the common clock: the step as its bubble, each microbatch's
    forward and backward over it, where and as long as the rows say."""
    from scalescope.report.subjects import RunReport
    from scalescope.report.views.dashboard import render_html
    from scalescope.report.views.pipeline_chart import pipeline_chart

    analysis = analysed(pipeline_run)
    chart = pipeline_chart(analysis, RunReport(analysis=analysis, run=pipeline_run).pipeline_step)
    bubble, forward, backward = chart.figure.data
    step = int(chart.title.split("step ")[1].split(" ")[0])
    assert step >= analysis.warmup_steps
    assert list(bubble.y) == ["stage 0 (rank 0)", "stage 1 (rank 1)"]
    assert list(bubble.x) == [STEP_MS, STEP_MS] and list(bubble.base) == [0, 0]
    for trace, at, each in ((forward, 0, 10), (backward, 100, 20)):
        assert len(trace.x) == 2 * MICRO
        assert list(trace.base[:MICRO]) == pytest.approx([at + each * mb for mb in range(MICRO)])
    assert list(forward.text[:MICRO]) == [f"F{mb}" for mb in range(MICRO)]
    assert list(forward.x[:MICRO]) == pytest.approx([BLOCKS[0] * BLOCK_FWD_MS / MICRO] * MICRO)
    assert "theory 20 %" in chart.title
    html = render_html(RunReport(analysis=analysis, run=pipeline_run))
    assert 'id="chart-pipeline"' in html


def test_no_pipeline_chart_without_stages(tmp_path):
    from scalescope.report.subjects import RunReport
    from scalescope.report.views.pipeline_chart import pipeline_chart

    rows = {r: [[row(0, Kind.STEP, "step", 0, 10, count=4)]] for r in (0, 1)}
    run = make_run(tmp_path, rows, world_size=2)
    report = RunReport(analysis=analysed(run), run=run)
    assert report.pipeline_step is None and pipeline_chart(report.analysis, None) is None


def interleaved_run(tmp_path, schedule: str):
    """2 ranks holding stages (0, 2) and (1, 3), with ``schedule``."""

    def interleaved(rank: int) -> RankMeta:
        pipe = PipelineMeta(stage=rank, stages=4, stages_held=[rank, rank + 2],
                            schedule=schedule, microbatches=MICRO)  # fmt: skip
        return RankMeta(rank=rank, world_size=2, status="completed", steps=STEPS, pipeline=pipe)

    rows = {r: [stage_rows(r)] for r in (0, 1)}
    return make_run(tmp_path, rows, world_size=2, rank_files={r: interleaved(r) for r in (0, 1)})


def test_an_interleaved_pipelines_theory_counts_its_ranks_not_its_stages(tmp_path):
    """4 microbatches: (p - 1)/(v m + p - 1) with p = 2 ranks and v = 2, 1/9; a rank is its
    stages; no block move across them."""
    run = interleaved_run(tmp_path, "ScheduleInterleaved1F1B")
    analysis = analysed(run)
    pipe = analysis.pipeline
    assert (pipe.stages, pipe.chunks_per_rank, pipe.pipeline_ranks) == (4, 2, 2)
    assert pipe.theory_bubble_pct == pytest.approx(100 / 9)
    assert [f.held for f in pipe.ranks] == [(0, 2), (1, 3)] and pipe.move is None
    (table,) = [b for b in pipeline_section(analysis).blocks if isinstance(b, Table)]
    assert [row[1] for row in table.rows] == ["0, 2", "1, 3"]
    bubble = {f.code: f for f in diagnose_run(run, analysis).findings}["PIPELINE_BUBBLE"]
    assert bubble.summary.startswith("the rank of stages 1, 3 bounds the pipeline: the others")
    assert bubble.rank == 1
    assert "(ScheduleInterleaved1F1B, 4 stages on 2 ranks, 4 microbatches: theory 11%)" in (
        bubble.summary
    )
    assert any("falls to 6%" in r for r in bubble.remedies), "8 microbatches: 1/17"


def test_a_zero_bubble_schedule_has_none_in_theory_and_is_not_told_to_use_one(tmp_path):
    run = interleaved_run(tmp_path, "ScheduleInterleavedZeroBubble")
    analysis = analysed(run)
    assert analysis.pipeline.theory_bubble_pct == 0.0
    bubble = {f.code: f for f in diagnose_run(run, analysis).findings}["PIPELINE_BUBBLE"]
    assert "theory 0%" in bubble.summary and bubble.saved_ms_per_step is None
    assert len(bubble.remedies) == 2 and "waiting for a slower stage" in bubble.remedies[1]


def test_a_bubble_of_equal_stages_names_the_idlest_stage(tmp_path):
    """Both stages compute as much per microbatch: none bounds the pipeline, and the bubble is
    the schedule's: the finding names the idlest stage, as before."""
    even = {0: 4, 1: 4}
    rows = {0: [stage_rows(0, even)], 1: [stage_rows(1, even)]}
    metas = {r: meta(r, blocks_of=even) for r in (0, 1)}
    run = make_run(tmp_path, rows, world_size=2, rank_files=metas)
    analysis = analysed(run)
    bubble = {f.code: f for f in diagnose_run(run, analysis).findings}["PIPELINE_BUBBLE"]
    idlest = max(analysis.pipeline.ranks, key=lambda f: f.bubble_pct)
    assert bubble.summary.startswith(f"stage {idlest.stage} idles")
    assert bubble.rank == idlest.rank and "bound" not in bubble.summary
    assert not bubble.remedies[0].startswith("even the stages")


def test_the_bound_stage_costs_what_its_compute_evened_replays(pipeline_run):
    """Stage 1 computes 27 ms a microbatch, stage 0 9 ms: 1F1B replayed with stage 1 at the
    others' median (9 ms): 3 x 9 + 18 + stage 0's optimizer 1 = 46 ms against 118 ms now, so
    stage 1 costs 72 ms a step. The bubble's finding names stage 1: its saving is that cost,
    not what twice the microbatches would take off the bubble (200 x (20 - 11.1) % = 18 ms)."""
    analysis = analysed(pipeline_run)
    assert analysis.pipeline.paced.gain_ms == pytest.approx(72.0)
    bubble = {f.code: f for f in diagnose_run(pipeline_run, analysis).findings}["PIPELINE_BUBBLE"]
    assert bubble.saved_ms_per_step == pytest.approx(72.0)
    assert "stage 1 at its peers' pace per microbatch" in bubble.basis


def test_a_bubble_no_stage_bounds_is_the_schedules_and_costs_twice_the_microbatches(tmp_path):
    """The verdict names the schedule, not the stage computing most (noise would pick it),
    and its cost is the schedule replayed over twice the microbatches."""
    even = {0: 4, 1: 4}
    rows = {0: [stage_rows(0, even)], 1: [stage_rows(1, even)]}
    metas = {r: meta(r, blocks_of=even) for r in (0, 1)}
    run = make_run(tmp_path, rows, world_size=2, rank_files=metas)
    analysis = analysed(run)
    diagnosis = diagnose_run(run, analysis)
    bubble = {f.code: f for f in diagnosis.findings}["PIPELINE_BUBBLE"]
    assert bubble.basis.startswith(f"replayed: the Schedule1F1B schedule with {2 * MICRO} micro")
    assert bubble.saved_ms_per_step == pytest.approx(analysis.pipeline.doubled.gain_ms, abs=0.01)
    (cause,) = [c for c in diagnosis.verdict.causes if c.code == "PIPELINE_BUBBLE"]
    assert (cause.culprit.kind, cause.culprit.name) == ("schedule", "Schedule1F1B")
    assert cause.culprit.words == "the Schedule1F1B schedule" and cause.cost.replayed


def test_a_bubble_more_microbatches_would_lengthen_is_information(tmp_path):
    """Equal stages whose forwards and backwards lie mostly outside their one timed block
    (work per call, as a pre-hook's: 4.5 of each forward's 6 ms): replayed over 8
    microbatches the step is longer, so the finding is information that says to keep 4,
    proposes no more microbatches, and the verdict names no bottleneck."""
    even = {0: 4, 1: 4}
    rows = {0: [stage_rows(0, even)], 1: [stage_rows(1, even)]}
    metas = {r: meta(r, blocks_of={0: 1, 1: 1}) for r in (0, 1)}
    run = make_run(tmp_path, rows, world_size=2, rank_files=metas)
    analysis = analysed(run)
    assert analysis.pipeline.doubled.gain_ms < 0
    diagnosis = diagnose_run(run, analysis)
    bubble = {f.code: f for f in diagnosis.findings}["PIPELINE_BUBBLE"]
    assert bubble.level == "info" and bubble.saved_ms_per_step == 0.0
    assert bubble.remedies[0].startswith(f"keep {MICRO} microbatches: the Schedule1F1B")
    assert not any(r.startswith("split the batch") for r in bubble.remedies)
    assert diagnosis.verdict.state == "no bottleneck"


def test_more_microbatches_are_no_gain_within_the_steps_noise(pipeline_run):
    """Twice the microbatches replayed 0.5 ms shorter: within a noise of 1 ms the finding says
    to keep them (the verdict's range of the gain would reach 0), beyond 0.1 ms it does not;
    a bound stage's bubble is that stage's, whatever the doubled replay says."""
    from scalescope.analyze.layouts.stage_fixes import ReplayedFix
    from scalescope.diagnose.rules_stages import _more_microbatches_lose

    pipe = dataclasses.replace(analysed(pipeline_run).pipeline, doubled=ReplayedFix(10.0, 9.5, 0.0))
    kept = _more_microbatches_lose(pipe, None, 1.0)
    assert kept is not None and "takes 9.5 ms a step against 10.0 ms" in kept[0]
    assert _more_microbatches_lose(pipe, None, 0.1) is None
    assert _more_microbatches_lose(pipe, pipe.ranks[0], 1.0) is None


@pytest.mark.parametrize(("at", "order"), [((1, 3, 100, 110), "gpipe"), ((1, 50, 60, 110), "1f1b")])
def test_a_hand_written_chains_order_is_read_from_its_first_stage(tmp_path, at, order):
    """Both forwards of stage 0 before its first backward: GPipe; a backward between them:
    1F1B (the order its stages' costs are replayed in)."""
    from scalescope.analyze.layouts.pipeline import _chain_order

    names = ("forward", "forward", "backward", "backward") if order == "gpipe" else (
        "forward", "backward", "forward", "backward")  # fmt: skip
    rows = {r: [chain_rows(r, 2)] for r in (0, 1)}
    rows[0][0] = [r for r in rows[0][0] if r[2] != "forward"]
    for s in range(STEPS):
        phases = zip(names, at, strict=True)
        rows[0][0] += [row(s, Kind.PHASE, n, s * STEP_MS + t, 1) for n, t in phases]
    run = make_run(tmp_path, rows, world_size=2)
    assert _chain_order(run.events, {0: 0, 1: 1}, 2, 1) == order
