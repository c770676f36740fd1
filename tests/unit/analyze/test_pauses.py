"""Pauses (checkpoints): steps of 10 typical steps or more on every rank that completed, the
rank that paused (the one that waited least in the step's collectives), their period; left
out of the step statistics and described by an info finding, never a hang or a straggler.
One rank's stall outside evaluation and checkpoints (a GC) is no pause: a straggler."""

from __future__ import annotations

import msgspec
from analysed import analysed  # noqa: E402
from analyze_runs import make_run
from run_builders import coll_row, phase_row, step_row

from scalescope.analyze.steps.pauses import analyze_pauses

MS = 1_000_000
STEP_MS, PAUSE_MS = 20, 8_000


def paused_run(
    tmp_path, pause_steps=(4, 9, 14), pauser=0, steps=16, phase="checkpoint", everyone=False
):
    """2 ranks, 20 ms steps; in each pause step ``pauser`` is late by 8 s (in ``phase``; none
    when empty) and the other waits that long in the step's all_reduce; with ``everyone``
    both ranks pause themselves and neither waits."""
    rows = {0: [[]], 1: [[]]}
    start = 0
    for k in range(steps):
        dur = (STEP_MS + PAUSE_MS if k in pause_steps else STEP_MS) * MS
        for r in (0, 1):
            pausing = k in pause_steps and (r == pauser or everyone)
            wait = PAUSE_MS * MS if (k in pause_steps and not pausing) else MS // 2
            rows[r][0].append(step_row(k, start, dur, 8))
            if pausing and phase:
                rows[r][0].append(phase_row(k, phase, start + STEP_MS * MS // 2, PAUSE_MS * MS))
            rows[r][0].append(
                coll_row(k, "all_reduce", start + dur - wait - MS, wait, 16, k, "user")
            )
        start += dur
    return make_run(tmp_path, rows, world_size=2)


def test_pauses_name_the_rank_and_the_period(tmp_path) -> None:
    p = analyze_pauses(paused_run(tmp_path).events)
    assert p is not None
    assert [(x.step, x.rank) for x in p.pauses] == [(4, 0), (9, 0), (14, 0)]
    assert p.every_steps == 5 and p.ranks == (0,)
    assert round(p.longest_s, 2) == 8.02 and round(p.median_step_s, 3) == 0.02
    assert round(p.share_pct) == round(100 * 3 * 8.02 / (16 * 0.02 + 3 * 8))
    assert msgspec.json.decode(msgspec.json.encode(p))["every_steps"] == 5, "JSON-able"


def test_the_rank_that_paused_is_the_one_that_did_not_wait(tmp_path) -> None:
    p = analyze_pauses(paused_run(tmp_path, pause_steps=(3, 10), pauser=1).events)
    assert p is not None and [(x.step, x.rank) for x in p.pauses] == [(3, 1), (10, 1)]
    assert p.every_steps == 7


def test_a_balanced_run_has_no_pause_and_a_long_first_step_is_setup(tmp_path) -> None:
    assert analyze_pauses(paused_run(tmp_path, pause_steps=()).events) is None
    assert analyze_pauses(paused_run(tmp_path, pause_steps=(0,)).events) is None


def test_pause_steps_leave_the_step_statistics_and_only_an_info_finding_remains(tmp_path):
    from scalescope.diagnose.engine import diagnose_run

    run = paused_run(tmp_path)
    a = analysed(run)
    assert a.steps is not None and a.hang is None
    assert round(a.steps.mean_step_ms) == STEP_MS, "the pauses are not typical steps"
    diagnosis = diagnose_run(run, a)
    codes = [f.code for f in diagnosis.findings]
    assert codes[:1] == ["PAUSE"] and "STRAGGLER" not in codes and "HANG" not in codes
    pause = diagnosis.findings[0]
    assert pause.level == "info" and pause.rank == 0
    assert "rank 0 paused 3 times every 5 steps, 8.0 s at the longest" in pause.summary
    assert "tolerates pauses of 8.0 s" in pause.remedies[0]


def test_an_evaluation_on_every_rank_is_a_pause_without_any_wait(tmp_path) -> None:
    p = analyze_pauses(paused_run(tmp_path, phase="eval").events)
    assert p is not None and [x.step for x in p.pauses] == [4, 9, 14]
    both = analyze_pauses(paused_run(tmp_path / "b", phase="", everyone=True).events)
    assert both is not None and [x.step for x in both.pauses] == [4, 9, 14], "no rank waited"


def test_one_rank_stalling_outside_eval_and_checkpoints_is_a_straggler(tmp_path) -> None:
    """A GC on rank 1: its steps 4, 9, 14 last 8 s, rank 0 waits them out in its all_reduce,
    and rank 1 records no evaluation or checkpoint there. No pause: the steps stay in the
    analysis, and rank 1's stall is not a hang."""
    from scalescope.diagnose.engine import diagnose_run

    run = paused_run(tmp_path, pauser=1, phase="")
    assert analyze_pauses(run.events) is None
    a = analysed(run)
    assert a.pauses is None and a.steps is not None and a.hang is None
    assert a.steps.mean_step_ms > 10 * STEP_MS, "the stalled steps are measured steps"
    findings = diagnose_run(run, a).findings
    codes = [f.code for f in findings]
    assert "PAUSE" not in codes and "HANG" not in codes, codes
    late = next(f for f in findings if f.code == "STRAGGLER")
    assert late.rank == 1 and "late only at steps 4, 9, 14" in late.summary
