"""The dashboard's pipeline chart: one measured step of each stage on the common clock, each
microbatch's forward and backward as measured (not the schedule's theory); the rest of the
step, where a stage neither computes nor finishes its step, is its bubble."""

from __future__ import annotations

import plotly.graph_objects as go

from scalescope.analyze import RunAnalysis
from scalescope.analyze.pipeline_step import PipelineStep, Span, StageStep
from scalescope.report.document import Chart
from scalescope.report.media.charts import PHASE_COLORS, layout

CHART_ID = "chart-pipeline"
BUBBLE_COLOR = "#e8e8e8"


def stage_bars(shown: PipelineStep) -> list[go.Bar]:
    """Per stage: the step as a bubble-coloured bar, each microbatch's forward and backward
    over it (ms from the first stage's step start)."""
    if not shown.stages:
        return []
    bars = [_bar("bubble", shown.stages, [s.step for s in shown.stages], BUBBLE_COLOR)]
    for name in ("forward", "backward"):
        spans = [getattr(s, name) for s in shown.stages]
        bars.append(_bar(name, shown.stages, spans, PHASE_COLORS[name]))
    return bars


def _bar(
    name: str, stages: tuple[StageStep, ...], spans: list[tuple[Span, ...]], color: str
) -> go.Bar:
    y, base, x, text = [], [], [], []
    for stage, mine in zip(stages, spans, strict=True):
        for span in mine:
            y.append(f"stage {stage.stage} (rank {stage.rank})")
            base.append(span.start_ms)
            x.append(span.dur_ms)
            mb = span.microbatch
            text.append(f"{name[0].upper()}{mb}" if name != "bubble" and mb >= 0 else "")
    return go.Bar(
        name=name, y=y, x=x, base=base, orientation="h", marker_color=color, text=text,
        textposition="inside", hovertemplate="%{y}: %{base:.2f} + %{x:.2f} ms<extra></extra>",
    )  # fmt: skip


def pipeline_chart(
    analysis: RunAnalysis, shown: PipelineStep | None, chart_id: str = CHART_ID
) -> Chart | None:
    """None where the run is not a pipeline (``shown``: ``RunReport.pipeline_step``)."""
    pipe = analysis.pipeline
    if pipe is None or shown is None:
        return None
    bars = stage_bars(shown)
    title = (
        f"Pipeline: step {shown.step} of each stage, measured ({pipe.schedule}, "
        f"{pipe.microbatches} microbatches; grey: bubble, theory {pipe.theory_bubble_pct:.0f} %)"
    )
    if not bars:
        return Chart(chart_id, title, None, "no measured step of the stages")
    fig = go.Figure(bars)
    layout(fig, barmode="overlay", xaxis_title="ms from the first stage's step start")
    fig.update_yaxes(autorange="reversed")
    return Chart(chart_id, title, fig)
