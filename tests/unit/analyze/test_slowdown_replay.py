"""The slowdown detector over a recorded real run (tests/data/runs/slowdown_rank: 4 DDP
ranks, rank 2 sleeping 30 ms in each forward from step 220): the watch's alert as it was
written live, the same named by the offline replay within 15 s of the onset, and the cost the
report gives it against a sum over the step rows by hand."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from recorded_runs import load_scenario

from scalescope.analyze.watch.slowdown_alerts import read_alerts
from scalescope.analyze.watch.slowdown_replay import (
    recorded_reads,
    replay_run,
    slowdown_costs,
    step_totals,
)
from scalescope.events import Kind, load_run

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def recorded():
    s = load_scenario("slowdown_rank")
    return s, load_run(s.run_dir)


def test_the_live_watch_named_the_slow_rank_and_phase(recorded):
    s, run = recorded
    (alert,) = read_alerts(run.path)
    assert (alert.event, alert.subject, alert.ranks) == ("onset", "rank", (s.truth["slow_rank"],))
    assert (alert.phase, alert.category, alert.nodes) == ("forward", "compute", ("vm",))
    assert s.truth["from_step"] - 5 <= alert.since_step <= s.truth["from_step"]
    assert alert.detected_step - alert.since_step < 60


def test_the_replay_names_it_within_15_s_of_the_onset(recorded):
    s, run = recorded
    (alert,) = replay_run(run)
    assert (alert.ranks, alert.phase) == ((s.truth["slow_rank"],), "forward")
    first_end, onset_end = _step_end_s(run, 0), _step_end_s(run, s.truth["from_step"])
    assert 0 < alert.detected_at - (onset_end - first_end) <= 15.0


def test_the_reads_hold_every_steps_totals(recorded):
    _, run = recorded
    *_, last = recorded_reads(run)
    steps = run.events.of_kind(Kind.STEP)
    for i, rank in enumerate(last.ranks.tolist()):
        mine = steps.rank == rank
        assert last.values[i, 0] == mine.sum()
        assert last.values[i, 1] == steps.dur_ns[mine].sum()


def test_the_cost_is_the_steps_beyond_the_baseline(recorded):
    _, run = recorded
    alerts = read_alerts(run.path)
    (cost,) = slowdown_costs(run, alerts, None)
    per_step = defaultdict(list)
    steps = run.events.of_kind(Kind.STEP)
    for step, dur in zip(steps.step.tolist(), steps.dur_ns.tolist(), strict=True):
        per_step[step].append(dur / 1e6)
    since = alerts[0].since_step
    lost = sum(sum(v) / len(v) - alerts[0].baseline_ms for s, v in per_step.items() if s >= since)
    assert cost.lost_s == pytest.approx(lost / 1e3, abs=1e-3)
    assert cost.steps == sum(1 for s in per_step if s >= since)
    assert cost.recovery_step is None and cost.fix_cause == "rank:2"


def _step_end_s(run, step: int) -> float:
    """When rank 0 ended ``step``, on its clock (s)."""
    steps = run.events.of_kind(Kind.STEP)
    row = (steps.rank == 0) & (steps.step == step)
    return float((steps.start_ns[row] + steps.dur_ns[row])[0]) / 1e9


def _slow_run_with_a_checkpoint(tmp_path, phase: str = "checkpoint"):
    """2 ranks, 20 ms steps, 30 ms from step 10 on (rank 1 slower in forward), and at step 20
    rank 0 saves a checkpoint for 8 s (in ``phase``) while rank 1 waits in its all_reduce;
    the watch's onset at step 10 written beside it."""
    import json
    from dataclasses import asdict

    from analyze_runs import make_run
    from run_builders import coll_row, phase_row, step_row

    from scalescope.analyze.watch.slowdown_alerts import Alert
    from scalescope.events.files import ALERTS_FILE

    ms = 1_000_000
    rows = {0: [[]], 1: [[]]}
    start = 0
    for k in range(30):
        dur = (20 if k < 10 else 30) * ms + (8_000 * ms if k == 20 else 0)
        for r in (0, 1):
            wait = 8_000 * ms if (k == 20 and r == 1) else ms // 2
            rows[r][0].append(step_row(k, start, dur, 8))
            if k == 20 and r == 0 and phase:
                rows[r][0].append(phase_row(k, phase, start + ms, 8_000 * ms))
            rows[r][0].append(coll_row(k, "all_reduce", start + dur - wait - ms, wait, 16, k))
        start += dur
    run = make_run(tmp_path, rows, world_size=2)
    onset = Alert(
        event="onset", id=1, subject="rank", ranks=(1,), nodes=(), phase="forward",
        category="compute", change_pct=50.0, phase_change_pct=None, baseline_ms=20.0,
        now_ms=30.0, since_step=10, detected_step=14, detected_at=1.0,
        message="slowdown: rank 1: forward since step 10; the step 20.0 -> 30.0 ms",
    )  # fmt: skip
    (run.path / ALERTS_FILE).write_text(json.dumps(asdict(onset)) + "\n")
    return run


def test_a_checkpoint_pause_is_not_a_slowdowns_lost_time(tmp_path):
    """The 8 s checkpoint at step 20 is the run's pause: the slowdown since step 10 lost
    10 ms at each of its other 19 steps, 0.19 s, and its line says the pause is left out."""
    from scalescope.diagnose.recording import Recording
    from scalescope.report.views.slowdowns import slowdowns_section

    a = Recording.load(_slow_run_with_a_checkpoint(tmp_path).path).analysis
    assert a.pauses is not None and [p.step for p in a.pauses.pauses] == [20]
    (cost,) = a.slowdowns
    assert cost.paused_steps == (20,) and cost.steps == 19
    assert cost.lost_s == pytest.approx(0.19, abs=1e-3)
    with_pause = slowdown_costs(a.run, list(a.alerts), None)
    assert with_pause[0].lost_s == pytest.approx(0.2 + 8.0, abs=1e-3), "the pause counted"
    section = slowdowns_section(a)
    assert section is not None
    text = " ".join(getattr(b, "text", "") for b in section.blocks)
    assert "its lost time leaves out 1 pause step (20): evaluations and checkpoints" in text


def test_one_ranks_stall_inside_a_slowdown_is_lost_time(tmp_path):
    """The same 8 s on rank 0 without a checkpoint (a GC): no pause, so it is lost time."""
    from scalescope.diagnose.recording import Recording

    a = Recording.load(_slow_run_with_a_checkpoint(tmp_path, phase="").path).analysis
    assert a.pauses is None
    (cost,) = a.slowdowns
    assert cost.paused_steps == () and cost.steps == 20 and cost.pause_words == ""
    assert cost.lost_s == pytest.approx(0.2 + 8.0, abs=1e-3)


def test_at_summary_the_totals_are_those_of_every_call(recorded, tmp_path):
    """The run folded as at ``--record summary`` (the default; benchmarks/faultbench/
    levels.py): a summarised step's time in collectives, and in each group, is its SUMMARY
    rows', the same as its calls' rows in full; the replay names the same rank and phase."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks" / "faultbench"))
    from levels import summarised_run

    s, run = recorded
    summarised_run(s.run_dir, tmp_path / "run", warmup_steps=run.meta.warmup_steps)
    folded = load_run(tmp_path / "run")
    assert (folded.events.kind == Kind.SUMMARY).any()
    assert (folded.events.kind == Kind.COLLECTIVE).sum() < (
        run.events.kind == Kind.COLLECTIVE
    ).sum() / 4
    ranks, _, totals, groups = step_totals(run)
    ranks_f, _, totals_f, groups_f = step_totals(folded)
    assert ranks.tolist() == ranks_f.tolist()
    for i in range(len(ranks)):
        assert np.array_equal(totals[i], totals_f[i])
        assert groups[i].keys() == groups_f[i].keys()
        assert all(np.array_equal(groups[i][k], groups_f[i][k]) for k in groups[i])
    (alert,) = replay_run(folded)
    assert (alert.ranks, alert.phase) == ((s.truth["slow_rank"],), "forward")
