"""The projection in a run's dashboard: what `scalescope project RUN_DIR` stored in the run
directory (read back by ``predict/stored.py``), drawn as projected throughput against nodes,
with the band and the dominant term.

The projection page of `project --html` draws its throughput with the same chart.
"""

from __future__ import annotations

import plotly.graph_objects as go

from scalescope.predict.stored import DashboardProjection, StoredPoint, StoredProjection
from scalescope.report.document import Chart, Column, Line, Section, Table
from scalescope.report.media.charts import PHASE_COLORS, layout, plotly_text
from scalescope.report.media.html import block_html

PROJECTION_CHART_ID = "chart-projection"
TERM_COLORS = {
    "compute": PHASE_COLORS["backward"],
    "data": PHASE_COLORS["data"],
    "exposed": PHASE_COLORS["comm_wait"],
    "waiting": "#e45756",
    "other": PHASE_COLORS["other"],
}


def _rate(global_batch: float, step_ms: float) -> float | None:
    """Samples/s at this step time; None (a gap in the band) for a band wider than the step."""
    return global_batch / (step_ms / 1e3) if step_ms > 0 else None


def _hover(q: StoredPoint) -> str:
    return (
        f"{q.nodes} nodes, {q.ranks} ranks: {q.samples_per_s:,.1f} samples/s<br>"
        f"step {q.step_ms:,.1f} ± {q.band_ms:,.1f} ms; dominant: {plotly_text(q.dominant)}"
    )


def _band_traces(points: list[StoredPoint]) -> list[go.Scatter]:
    """Throughput at step ∓ band: the upper edge, then the lower one filled up to it."""
    nodes = [q.nodes for q in points]
    upper = [_rate(q.global_batch, q.step_ms - q.band_ms) for q in points]
    lower = [_rate(q.global_batch, q.step_ms + q.band_ms) for q in points]
    edge = {"width": 0}
    return [
        go.Scatter(x=nodes, y=upper, mode="lines", line=edge, showlegend=False,
                   hoverinfo="skip"),
        go.Scatter(x=nodes, y=lower, mode="lines", line=edge, fill="tonexty",
                   fillcolor="rgba(76,120,168,0.2)", name="± one standard deviation",
                   hoverinfo="skip"),
    ]  # fmt: skip


def projection_chart(p: StoredProjection, chart_id: str = PROJECTION_CHART_ID) -> Chart:
    """Projected samples/s against nodes: the band, the linear line from the first size,
    and each point coloured and labelled by the term that dominates its step."""
    title = "Projected throughput (samples/s) by nodes, with the term that dominates"
    points = sorted(p.points, key=lambda q: q.nodes)
    if not points:
        return Chart(chart_id, title, None, "The projection holds no projected size.")
    nodes = [q.nodes for q in points]
    first = points[0]
    fig = go.Figure(_band_traces(points))
    fig.add_trace(go.Scatter(
        x=nodes, y=[first.samples_per_s * q.ranks / first.ranks for q in points], mode="lines",
        name="linear", line={"dash": "dot", "color": "#888888"}, hoverinfo="skip",
    ))  # fmt: skip
    fig.add_trace(go.Scatter(
        x=nodes, y=[q.samples_per_s for q in points], mode="lines+markers+text", name="projected",
        text=[plotly_text(q.dominant) for q in points], textposition="top center",
        marker={"size": 10, "color": [TERM_COLORS.get(q.dominant, "#333333") for q in points]},
        line={"color": "#4c78a8"}, hovertext=[_hover(q) for q in points], hoverinfo="text",
    ))  # fmt: skip
    xaxis = {"type": "log"} if nodes[-1] / nodes[0] >= 8 else {"dtick": 1}
    layout(
        fig,
        xaxis={"title": {"text": "nodes"}, **xaxis},
        yaxis={"title": {"text": "samples/s"}, "rangemode": "tozero"},
    )
    return Chart(chart_id, title, fig)


def _table(p: StoredProjection) -> Table:
    points = sorted(p.points, key=lambda q: q.nodes)
    columns = (
        Column("nodes"),
        Column("ranks"),
        Column("samples/s"),
        Column("step", "ms"),
        Column("±", "ms"),
        Column("dominant"),
    )
    rows = tuple(
        (str(q.nodes), str(q.ranks), f"{q.samples_per_s:,.1f}", f"{q.step_ms:,.1f}",
         f"{q.band_ms:,.1f}", q.dominant)
        for q in points
    )  # fmt: skip
    values = tuple(
        (q.nodes, q.ranks, q.samples_per_s, q.step_ms, q.band_ms, q.dominant) for q in points
    )
    return Table("", columns, rows, values, html_id="projected-sizes")


def projection_block(stored: DashboardProjection) -> Section:
    """The stored projection as a document section: what was projected, the sizes, the notes
    and the chart, or the one-line problem that kept it from being read."""
    title = "Projection (scalescope project)"
    p = stored.projection
    if p is None:
        return Section(title, (Line(stored.problem, style="note", html_id="projection-note"),))
    what = (
        f"{p.mode} scaling on {p.hardware}, ranks per node: {p.ranks_per_node}, "
        f"{p.algorithm} allreduce; band: one standard deviation of the model's inputs"
    )
    notes = tuple(Line(f"- {n}") for n in p.notes)
    return Section(
        title, (Line(what), _table(p), *notes, projection_chart(p)), html_id="projection"
    )


def projection_section(stored: DashboardProjection | None) -> str:
    """The dashboard's projection section; empty when the run has no stored projection."""
    return "" if stored is None else block_html(projection_block(stored))
