"""A synthetic case's arms (cases_synthetic.py), for run.py's ``run_case``: the planted arm is
the generator's run with the plant, the clean arm the same run without it from the same noise
seed (the gain of removing the fault and nothing else), and pair ``i`` of both regenerates
from another noise seed. The step is measured as a real case's is, by rank 0's own clock:
its step rows' mean after warm-up, or since a mid-run fault's onset."""

from __future__ import annotations

import statistics
from pathlib import Path

import pyarrow.compute as pc
from cases import Case

from scalescope.events import Kind
from scalescope.events.files import events_path
from scalescope.events.reader import read_event_stream

RUN = "run"
"""The run directory inside an arm's folder, as ``scalescope run --run-dir run`` names it."""


def run_arm(case: Case, folder: Path, planted: bool, pair: int) -> Path:
    """Generate one arm of the case's pair ``pair`` in ``folder``/run; returns ``folder``."""
    if case.synthetic is None:
        raise ValueError(f"{case.name} is not a synthetic case")
    folder.mkdir(parents=True)
    case.synthetic.write(folder / RUN, planted, pair)
    return folder


def step_ms(case: Case, folder: Path) -> float:
    """Rank 0's mean step (ms) by its step rows, from warm-up's end or the fault's onset.
    Rank 0's host is the generator's reference clock: its durations are true times."""
    read = read_event_stream(events_path(folder / RUN, 0))
    table = read.table
    first = max(case.warmup_steps, case.since)
    rows = pc.and_(pc.equal(table["kind"], int(Kind.STEP)), pc.greater_equal(table["step"], first))
    durations = table.filter(rows)["dur_ns"].to_pylist()
    if not durations:
        raise ValueError(f"{case.name}: rank 0 has no step since step {first}")
    return statistics.fmean(durations) / 1e6
