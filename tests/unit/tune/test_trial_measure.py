"""A trial's speed from its run directory, as the run's own analysis gives it."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_builders import step_row, write_run_dir

from scalescope.events import RunMeta
from scalescope.events.run import events_path
from scalescope.events.writer import EventWriter
from scalescope.tune.trial import RunningRate, scoped_environ

MS = 1_000_000


def steps(durations_ms: list[float], samples: int) -> list:
    rows, t = [], 0
    for i, d in enumerate(durations_ms):
        rows.append(step_row(i, t, int(d * MS), samples))
        t += int(d * MS)
    return rows


def test_running_rate_is_samples_per_s_after_warmup(tmp_path: Path) -> None:
    meta = RunMeta(run_id="r", command=[], script="s.py", world_size=2, warmup_steps=2)
    durations = [500.0, 300.0, 100.0, 100.0, 200.0]
    write_run_dir(tmp_path, meta, {0: [steps(durations, 8)], 1: [steps(durations, 8)]})
    rate = RunningRate(tmp_path, 2)
    # measured: steps 2..4 of each rank, 3 x 8 samples in 400 ms on each of 2 ranks
    assert rate() == pytest.approx(2 * 3 * 8 / 0.4)
    assert rate() == pytest.approx(2 * 3 * 8 / 0.4), "nothing new read: the same rate"


def test_the_rate_grows_with_what_the_ranks_append(tmp_path: Path) -> None:
    """Read incrementally while the rank writes, the rate equals the whole stream's read
    afresh."""
    meta = RunMeta(run_id="r", command=[], script="s.py", world_size=1, warmup_steps=1)
    write_run_dir(tmp_path, meta, {})
    rows = steps([500.0, 100.0, 100.0, 400.0], 8)
    writer = EventWriter(events_path(tmp_path, 0), 0)
    writer.write(rows[:2])
    rate = RunningRate(tmp_path, 1)
    assert rate() == pytest.approx(8 / 0.1)
    writer.write(rows[2:])
    assert rate() == pytest.approx(3 * 8 / 0.6) == RunningRate(tmp_path, 1)()
    writer.close()


def test_no_rate_before_a_measured_step_or_a_run(tmp_path: Path) -> None:
    rate = RunningRate(tmp_path, 5)
    assert rate() is None  # no run.json yet: the trial is starting
    meta = RunMeta(run_id="r", command=[], script="s.py", world_size=1, warmup_steps=5)
    write_run_dir(tmp_path, meta, {0: [steps([100.0, 100.0], 8)]})
    assert rate() is None  # warm-up only: no rate yet


def test_scoped_environ_restores_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("KEEP", "1")
    with scoped_environ({"TRIAL": "x"}):
        os.environ["LAUNCHER_ADDED"] = "y"
        os.environ["KEEP"] = "2"
        assert os.environ["TRIAL"] == "x"
    assert "TRIAL" not in os.environ and "LAUNCHER_ADDED" not in os.environ
    assert os.environ["KEEP"] == "1"


def test_uncounted_samples_give_global_steps_per_s(tmp_path: Path) -> None:
    from scalescope.analyze.steps.steps import analyze_steps
    from scalescope.events import load_run
    from scalescope.tune.trial import STEPS_UNIT, samples_per_step, throughput

    meta = RunMeta(run_id="r", command=[], script="s.py", world_size=2, warmup_steps=1)
    # rank 1 is slower: 3 measured steps in 600 ms against rank 0's 300 ms
    write_run_dir(tmp_path, meta, {0: [steps([50.0] + [100.0] * 3, 0)],
                                   1: [steps([50.0] + [200.0] * 3, 0)]})  # fmt: skip
    analysis = analyze_steps(load_run(tmp_path).events, 1)
    rate, unit, count = throughput(analysis)
    assert unit == STEPS_UNIT and count == 6
    assert rate == pytest.approx(3 / 0.6)  # the job steps at its slowest rank's pace
    assert samples_per_step(analysis) is None


def test_samples_per_step_is_the_global_batch(tmp_path: Path) -> None:
    from scalescope.analyze.steps.steps import analyze_steps
    from scalescope.events import load_run
    from scalescope.tune.trial import samples_per_step

    meta = RunMeta(run_id="r", command=[], script="s.py", world_size=2, warmup_steps=1)
    write_run_dir(tmp_path, meta, {0: [steps([100.0] * 4, 8)], 1: [steps([100.0] * 4, 8)]})
    assert samples_per_step(analyze_steps(load_run(tmp_path).events, 1)) == 16
