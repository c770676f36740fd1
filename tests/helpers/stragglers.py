"""Test helper (not a test module): the straggler of tests/e2e/scripts/ddp_train.py, live
(benchmarks/accuracy) or recorded (tests/data/record.py): how long and where rank 1 sleeps,
the truth of what it costs, and how the diagnosis must name its phase.

Rank 1 sleeps ``DELAY_S`` once per step at ``--sleep-where`` from step ``FROM`` on; the steps
from ``REFERENCE_FROM`` to ``FROM`` are the undelayed reference of the same run.
"""

import json
import statistics
from pathlib import Path

DELAY_S = 0.07
STEPS, REFERENCE_FROM, FROM = 24, 3, 12
"""Steps in all; the first reference step (warm-up before); the first delayed step, from
which the probe's statistics are taken (``--warmup-steps``)."""

WHERE = {
    "data": ("in data", "rank 1 is late loading data"),
    "forward": ("in forward", "rank 1 is late in forward"),
    "backward": ("in backward", "rank 1 is late in backward"),
    "optimizer": ("in optimizer", "rank 1 is late in optimizer"),
    "outside": ("outside the recorded phases", "time outside the recorded phases of rank 1"),
}
"""Where rank 1 sleeps: how its finding's evidence and summary name the phase."""
OUTSIDE = "between the optimizer step and the next batch"
"""Where the time outside every phase is, in the words of its finding."""


def truth_ms(folder: Path) -> tuple[float, float, float]:
    """Median sleep, delayed step and reference step of rank 0 (``--sleep-log`` and
    ``--step-log`` in ``folder``), ms: medians, because a burst of another process's work
    in one short reference step moves a mean by points."""
    slept = json.loads((folder / "slept.json").read_text())
    steps = json.loads((folder / "steps.json").read_text())
    assert len(steps) == STEPS and len(slept) >= STEPS - FROM
    ms = [1e3 * statistics.median(x) for x in (slept, steps[FROM:], steps[REFERENCE_FROM:FROM])]
    return ms[0], ms[1], ms[2]
