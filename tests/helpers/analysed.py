"""A run's analysis as the tests read it: through ``Recording``, the one builder of it."""

from __future__ import annotations

from scalescope.analyze import RunAnalysis
from scalescope.diagnose.recording import Recording
from scalescope.events import Run


def analysed(run: Run) -> RunAnalysis:
    return Recording.of(run).analysis
