"""The scaling table for people (terminal) and its dashboard page (HTML)."""

from __future__ import annotations

import plotly.graph_objects as go

from scalescope.analyze.runs.scaling import ScalingRow, ScalingTable
from scalescope.report.document import Chart, Column, Document, Line, Style, Table
from scalescope.report.formatting import fmt
from scalescope.report.media.charts import PHASE_COLORS, layout

SCALE_CHART_IDS = ("chart-scale-throughput", "chart-scale-breakdown")
COLUMNS = (
    Column("ranks"),
    Column("nodes"),
    Column("samples/s"),
    Column("step", "ms"),
    Column("speedup"),
    Column("efficiency", "%"),
    Column("compute", "ms"),
    Column("exposed comm", "ms"),
    Column("waiting", "ms"),
    Column("data", "ms"),
    Column("note", align="left"),
)
PARTS = (
    ("compute", "compute_ms"),
    ("exposed comm", "exposed_comm_ms"),
    ("waiting", "waiting_ms"),
    ("data", "data_ms"),
)


def note(r: ScalingRow) -> str:
    if r.status != "ok":
        return "FAILED"
    return "oversubscribed" if r.oversubscribed else ""


def explain(r: ScalingRow) -> str | None:
    """The sentence under the table for a failed or oversubscribed size."""
    if r.status != "ok":
        return f"{r.ranks} ranks failed: {r.error or 'unknown error'} (run dir {r.run_dir})"
    if r.oversubscribed:
        per_node = r.ranks // r.nodes
        return (
            f"{r.ranks} ranks oversubscribed: {per_node} ranks × {r.threads_per_rank} threads "
            "exceed the node's cores, so ranks share cpus and its timings say so"
        )
    return None


def cells(r: ScalingRow) -> tuple[str, ...]:
    b = r.breakdown
    parts = [fmt(getattr(b, attr) if b else None, ",.1f") for _, attr in PARTS]
    return (
        str(r.ranks),
        str(r.nodes),
        fmt(r.samples_per_s, ",.1f"),
        fmt(r.step_ms, ",.1f"),
        fmt(r.speedup, ".2f"),
        fmt(r.efficiency_pct, ".0f"),
        *parts,
        note(r),
    )


def values(r: ScalingRow) -> tuple[float | int | str | None, ...]:
    b = r.breakdown
    parts = [getattr(b, attr) if b else None for _, attr in PARTS]
    return (
        r.ranks,
        r.nodes,
        r.samples_per_s,
        r.step_ms,
        r.speedup,
        r.efficiency_pct,
        *parts,
        note(r),
    )


def style(r: ScalingRow) -> Style:
    return "red" if r.status != "ok" else ("yellow" if r.oversubscribed else "")


def scaling_table(t: ScalingTable) -> Table:
    base = f"against {t.base_ranks} ranks" if t.base_ranks else "no size succeeded"
    title = f"Scaling of {t.workload} ({t.mode}; speedup and efficiency {base})"
    rows = tuple(cells(r) for r in t.rows)
    return Table(
        title,
        COLUMNS,
        rows,
        tuple(values(r) for r in t.rows),
        html_id="scaling",
        styles=tuple(style(r) for r in t.rows),
    )


def scaling_document(t: ScalingTable) -> Document:
    explained = [Line(text, style=style(r)) for r in t.rows if (text := explain(r)) is not None]
    legend = (
        "step breakdown per measured step, mean over ranks: compute = forward + backward + "
        "optimizer; exposed comm = gradient transfer after backward; waiting = for other ranks"
    )
    return Document(
        f"scalescope scale {t.workload}",
        (scaling_table(t), *explained, Line(legend), throughput_chart(t), breakdown_chart(t)),
    )


def throughput_chart(t: ScalingTable) -> Chart:
    title = "Samples/s by ranks (dotted: perfect scaling)"
    ok = [r for r in t.rows if r.samples_per_s]
    if not ok:
        return Chart(SCALE_CHART_IDS[0], title, None, "No size succeeded.")
    traces = [go.Scatter(x=[r.ranks for r in ok], y=[r.samples_per_s for r in ok],
                         name="measured", mode="lines+markers")]  # fmt: skip
    base = next((r for r in ok if r.ranks == t.base_ranks), None)
    if base is not None:  # no perfect line without a base size that completed
        traces.append(go.Scatter(x=[r.ranks for r in ok],
                                 y=[base.samples_per_s * r.ranks / base.ranks for r in ok],
                                 name="perfect", mode="lines", line={"dash": "dot"}))  # fmt: skip
    fig = go.Figure(traces)
    layout(fig, xaxis={"title": {"text": "ranks"}}, yaxis={"title": {"text": "samples/s"}})
    return Chart(SCALE_CHART_IDS[0], title, fig)


def breakdown_chart(t: ScalingTable) -> Chart:
    title = "Step breakdown by ranks (ms per step)"
    rows = [r for r in t.rows if r.breakdown is not None]
    if not rows:
        return Chart(SCALE_CHART_IDS[1], title, None, "No size has a step breakdown.")
    colors = {"compute": PHASE_COLORS.get("forward"), "data": PHASE_COLORS.get("data")}
    fig = go.Figure(
        [
            go.Bar(x=[str(r.ranks) for r in rows],
                   y=[getattr(r.breakdown, attr) or 0.0 for r in rows],
                   name=name, marker={"color": colors.get(name)})
            for name, attr in PARTS
        ]
    )  # fmt: skip
    layout(fig, barmode="stack", xaxis={"title": {"text": "ranks"}, "type": "category"},
           yaxis={"title": {"text": "ms per step"}})  # fmt: skip
    return Chart(SCALE_CHART_IDS[1], title, fig)
