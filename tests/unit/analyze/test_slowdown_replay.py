"""The slowdown detector over a recorded real run (tests/data/runs/slowdown_rank: 4 DDP
ranks, rank 2 sleeping 30 ms in each forward from step 220): the watch's alert as it was
written live, the same named by the offline replay within 15 s of the onset, and the cost the
report gives it against a sum over the step rows by hand."""

from __future__ import annotations

from collections import defaultdict

import pytest
from recorded_runs import load_scenario

from scalescope.analyze.watch.slowdown_alerts import read_alerts
from scalescope.analyze.watch.slowdown_replay import recorded_reads, replay_run, slowdown_costs
from scalescope.events import Kind, load_run


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
