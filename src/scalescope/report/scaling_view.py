"""The scaling table for people (terminal) and its dashboard page (HTML)."""

from __future__ import annotations

import plotly.graph_objects as go
from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalescope.analyze.scaling import ScalingRow, ScalingTable
from scalescope.report.formatting import fmt
from scalescope.report.html import chart_html, esc, page
from scalescope.report.html_charts import PHASE_COLORS, Chart, layout

SCALE_CHART_IDS = ("chart-scale-throughput", "chart-scale-breakdown")
COLUMNS = (
    "ranks", "nodes", "samples/s", "step (ms)", "speedup", "efficiency (%)", "compute (ms)",
    "exposed comm (ms)", "waiting (ms)", "data (ms)", "note",
)  # fmt: skip
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


def cells(r: ScalingRow) -> list[str]:
    b = r.breakdown
    parts = [fmt(getattr(b, attr) if b else None, ",.1f") for _, attr in PARTS]
    return [
        str(r.ranks), str(r.nodes), fmt(r.samples_per_s, ",.1f"), fmt(r.step_ms, ",.1f"),
        fmt(r.speedup, ".2f"), fmt(r.efficiency_pct, ".0f"), *parts, note(r),
    ]  # fmt: skip


def render_scaling(t: ScalingTable, console: Console) -> None:
    base = f"against {t.base_ranks} ranks" if t.base_ranks else "no size succeeded"
    title = f"Scaling of {t.workload} ({t.mode}; speedup and efficiency {base})"
    table = Table(title=Text(title), title_justify="left")
    for col in COLUMNS:
        table.add_column(col, justify="left" if col == "note" else "right")
    for r in t.rows:
        style = "red" if r.status != "ok" else ("yellow" if r.oversubscribed else None)
        table.add_row(*(Text(c) for c in cells(r)), style=style)
    console.print(table)
    for r in t.rows:
        if (text := explain(r)) is not None:
            console.print(Text(text, style="red" if r.status != "ok" else "yellow"))
    console.print(
        "step breakdown per measured step, mean over ranks: compute = forward + backward + "
        "optimizer; exposed comm = gradient transfer after backward; waiting = for other ranks"
    )


def throughput_chart(t: ScalingTable) -> Chart:
    title = "Samples/s by ranks (dotted: perfect scaling)"
    ok = [r for r in t.rows if r.samples_per_s]
    if not ok:
        return Chart(SCALE_CHART_IDS[0], title, None, "No size succeeded.")
    base = next(r for r in ok if r.ranks == t.base_ranks)
    fig = go.Figure(
        [
            go.Scatter(x=[r.ranks for r in ok], y=[r.samples_per_s for r in ok],
                       name="measured", mode="lines+markers"),
            go.Scatter(x=[r.ranks for r in ok],
                       y=[base.samples_per_s * r.ranks / base.ranks for r in ok],
                       name="perfect", mode="lines", line={"dash": "dot"}),
        ]
    )  # fmt: skip
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


def render_scaling_html(t: ScalingTable) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    body_rows = "".join(
        "<tr>" + "".join(f'<td class="num">{esc(c)}</td>' for c in cells(r)) + "</tr>"
        for r in t.rows
    )
    body = [
        f"<h1>scalescope scale: {esc(t.workload)} ({esc(t.mode)} scaling)</h1>",
        f'<table id="scaling"><thead><tr>{head}</tr></thead><tbody>{body_rows}</tbody></table>',
        "".join(f"<p>{esc(text)}</p>" for r in t.rows if (text := explain(r))),
        chart_html(throughput_chart(t)),
        chart_html(breakdown_chart(t)),
    ]
    return page(f"scalescope scale {t.workload}", body)
