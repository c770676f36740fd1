"""The hang watch's median step, read incrementally from rank 0's stream while it grows,
against numpy's median of the step durations written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalescope.events.files import events_path
from scalescope.launch.hang_watch import StepTimes
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
