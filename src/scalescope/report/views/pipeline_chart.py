"""The dashboard's pipeline chart: one measured step of each stage on the common clock, each
microbatch's forward and backward as measured (not the schedule's theory); the rest of the
step, where a stage neither computes nor finishes its step, is its bubble."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from scalescope.analyze import RunAnalysis
from scalescope.analyze.layouts.pipeline import PipelineAnalysis
from scalescope.events import EventTable, Kind, Run
from scalescope.report.document import Chart
from scalescope.report.media.charts import PHASE_COLORS, layout

CHART_ID = "chart-pipeline"
BUBBLE_COLOR = "#e8e8e8"


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


def stage_bars(
    run: Run, pipe: PipelineAnalysis, step: int, offsets_ns: Mapping[int, int]
) -> list[go.Bar]:
    """Per stage: the step as a bubble-coloured bar, each microbatch's forward and backward
    over it (ms from the first stage's step start)."""
    by_stage = sorted(pipe.ranks, key=lambda f: (f.stage, f.rank))
    steps = {f.rank: _rows(run.events, f.rank, step, Kind.STEP) for f in by_stage}
    known = [f for f in by_stage if len(steps[f.rank])]
    if not known:
        return []
    origin = min(int(steps[f.rank].start_ns[0]) + offsets_ns.get(f.rank, 0) for f in known)
    labels = {f.rank: f"stage {f.stage} (rank {f.rank})" for f in known}
    bars = [_bar("bubble", known, labels, steps, origin, offsets_ns, BUBBLE_COLOR)]
    for name in ("forward", "backward"):
        phases = {f.rank: _named(run.events, f.rank, step, name) for f in known}
        bars.append(_bar(name, known, labels, phases, origin, offsets_ns, PHASE_COLORS[name]))
    return bars


def _named(events: EventTable, rank: int, step: int, name: str) -> EventTable:
    rows = _rows(events, rank, step, Kind.PHASE)
    return rows.select(rows.where("name", name))


def _bar(
    name: str,
    stages: list,
    labels: dict[int, str],
    rows: dict[int, EventTable],
    origin: int,
    offsets_ns: Mapping[int, int],
    color: str,
) -> go.Bar:
    y, base, x, text = [], [], [], []
    for f in stages:
        r = rows[f.rank]
        starts = (r.start_ns.astype(np.int64) + offsets_ns.get(f.rank, 0) - origin) / 1e6
        for start, dur, seq in zip(starts, r.dur_ns / 1e6, r.seq, strict=True):
            y.append(labels[f.rank])
            base.append(float(start))
            x.append(float(max(dur, 0.0)))
            text.append(f"{name[0].upper()}{int(seq)}" if name != "bubble" and seq >= 0 else "")
    return go.Bar(
        name=name, y=y, x=x, base=base, orientation="h", marker_color=color, text=text,
        textposition="inside", hovertemplate="%{y}: %{base:.2f} + %{x:.2f} ms<extra></extra>",
    )  # fmt: skip


def pipeline_chart(
    analysis: RunAnalysis, run: Run, offsets_ns: Mapping[int, int], chart_id: str = CHART_ID
) -> Chart | None:
    """None where the run is not a pipeline."""
    pipe = analysis.pipeline
    if pipe is None:
        return None
    step = shown_step(run, pipe, analysis.warmup_steps)
    bars = stage_bars(run, pipe, step, offsets_ns) if step is not None else []
    title = (
        f"Pipeline: step {step} of each stage, measured ({pipe.schedule}, {pipe.microbatches} "
        f"microbatches; grey: bubble, theory {pipe.theory_bubble_pct:.0f} %)"
    )
    if not bars:
        return Chart(chart_id, title, None, "no measured step of the stages")
    fig = go.Figure(bars)
    layout(fig, barmode="overlay", xaxis_title="ms from the first stage's step start")
    fig.update_yaxes(autorange="reversed")
    return Chart(chart_id, title, fig)
