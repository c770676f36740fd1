"""The hang watch: its median step, read incrementally from rank 0's stream while it grows,
against numpy's median of the step durations written; when it counts a wait from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalescope.events.files import events_path
from scalescope.events.live_state import LiveState
from scalescope.launch.watch.hang import StepTimes, progress_times
from scalescope.probe.recorder import Recorder


def test_median_follows_the_stream_as_it_is_appended(tmp_path: Path) -> None:
    recorder = Recorder(events_path(tmp_path, 0), 0, flush_every_steps=2)
    steps = StepTimes(tmp_path)
    assert steps.median_s() is None  # no stream yet
    durations_ms = [10, 30, 20, 50, 40, 60]
    now = 0
    for i, ms in enumerate(durations_ms, 1):
        recorder.phase("forward", now, now + 1)
        now += ms * 1_000_000
        recorder.end_step(now)
        if i % 2 == 0:
            assert steps.median_s() == pytest.approx(np.median(durations_ms[:i]) / 1e3)
    recorder.close()
    assert steps.median_s() == pytest.approx(np.median(durations_ms) / 1e3)


def _state(rank: int, **kw) -> LiveState:
    values = dict(
        rank=rank, pid=100 + rank, steps_done=0, last_step_end_s=None, phase="outside",
        phase_since_s=None, op="", group="", seq=-1, nbytes=0, entered_s=None, left_s=None,
        last_done_s=None,
    )  # fmt: skip
    return LiveState(**(values | kw))


def test_progress_is_the_last_finish_else_the_first_collective_entered():
    starting = {0: _state(0), 1: _state(1)}
    assert progress_times(starting) == [], "a slow start with no collective is no hang"
    waiting = {0: _state(0, op="all_reduce", group="0", seq=0, entered_s=50.0), 1: _state(1)}
    assert progress_times(waiting) == [50.0]
    done = {0: _state(0, last_step_end_s=70.0, entered_s=72.0), 1: _state(1, last_done_s=71.0)}
    assert progress_times(done) == [70.0, 71.0]
