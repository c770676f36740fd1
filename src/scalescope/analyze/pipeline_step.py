"""One measured step of each pipeline stage on the common clock, as the rows recorded it: the
step of the first stage's rank whose length is the median's, and in it each stage's step and
each microbatch's forward and backward (not the schedule's theory)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.layouts.pipeline import PipelineAnalysis
from scalescope.analyze.layouts.stage_figures import StageFigures
from scalescope.events import EventTable, Kind, Run


@dataclass(frozen=True)
class Span:
    start_ms: float
    """From the earliest stage's step start, on rank 0's clock."""
    dur_ms: float
    microbatch: int
    """-1 for the step itself."""


@dataclass(frozen=True)
class StageStep:
    stage: int
    rank: int
    step: tuple[Span, ...]
    forward: tuple[Span, ...]
    backward: tuple[Span, ...]


@dataclass(frozen=True)
class PipelineStep:
    step: int | None
    """None when the first stage's rank measured no step."""
    stages: tuple[StageStep, ...]
    """By stage, then rank; only the stages that recorded that step."""


def shown_step(run: Run, pipe: PipelineAnalysis, warmup: int) -> int | None:
    """The measured step of the first stage's rank whose length is the median's."""
    rank = min(pipe.ranks, key=lambda f: f.stage).rank
    steps = run.events.of_kind(Kind.STEP)
    mine = (steps.rank == rank) & (steps.step >= warmup)
    if not mine.any():
        return None
    durs, numbers = steps.dur_ns[mine], steps.step[mine]
    return int(numbers[np.argsort(durs, kind="stable")[len(durs) // 2]])


def _rows(events: EventTable, rank: int, step: int, kind: Kind) -> EventTable:
    return events.select((events.rank == rank) & (events.step == step) & (events.kind == kind))


def _named(events: EventTable, rank: int, step: int, name: str) -> EventTable:
    rows = _rows(events, rank, step, Kind.PHASE)
    return rows.select(rows.where("name", name))


def _spans(rows: EventTable, shift_ns: int) -> tuple[Span, ...]:
    starts = (rows.start_ns.astype(np.int64) + shift_ns) / 1e6
    return tuple(
        Span(float(start), float(max(dur, 0.0)), int(seq))
        for start, dur, seq in zip(starts, rows.dur_ns / 1e6, rows.seq, strict=True)
    )


def _stage(run: Run, f: StageFigures, step: int, rows: EventTable, shift_ns: int) -> StageStep:
    forward, backward = (_named(run.events, f.rank, step, n) for n in ("forward", "backward"))
    return StageStep(
        f.stage, f.rank, _spans(rows, shift_ns), _spans(forward, shift_ns),
        _spans(backward, shift_ns),
    )  # fmt: skip


def pipeline_step(
    run: Run, pipe: PipelineAnalysis, warmup: int, offsets_ns: Mapping[int, int]
) -> PipelineStep:
    """``shown_step`` of every stage, its times from the earliest stage's step start."""
    step = shown_step(run, pipe, warmup)
    if step is None:
        return PipelineStep(None, ())
    by_stage = sorted(pipe.ranks, key=lambda f: (f.stage, f.rank))
    steps = {f.rank: _rows(run.events, f.rank, step, Kind.STEP) for f in by_stage}
    known = [f for f in by_stage if len(steps[f.rank])]
    if not known:
        return PipelineStep(step, ())
    origin = min(int(steps[f.rank].start_ns[0]) + offsets_ns.get(f.rank, 0) for f in known)
    return PipelineStep(
        step,
        tuple(
            _stage(run, f, step, steps[f.rank], offsets_ns.get(f.rank, 0) - origin) for f in known
        ),
    )
