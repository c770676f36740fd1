"""The dashboard's views of many ranks: ranks x steps heatmaps and a summary per node.

Heatmaps show, for every rank and measured step, the step time and the time the rank waited
in collectives for the last rank to arrive (cross-rank matching, ``analyze/ranks/matching.py``).
They stay small at any size: up to ``MAX_ROWS`` ranks each rank is a row and up to
``MAX_COLUMNS`` steps each step a column; beyond, consecutive ranks (steps) are put in equal
bins and a cell is the mean over the rank-steps of its bin. The grid comes binned from
``analyze/rank_steps.py``; its values travel as float32 typed arrays (plotly's base64
``bdata``, 5.3 bytes a cell), so each heatmap is at most about 1.1 MB of the page.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from scalescope.analyze import RunAnalysis
from scalescope.analyze.rank_steps import Bins, RankStepGrid
from scalescope.events.units import number_ranges as rank_ranges
from scalescope.report.document import Chart, Column, Style, Table
from scalescope.report.formatting import NA, fmt
from scalescope.report.media.charts import HEIGHT, layout

STEP_HEATMAP_ID, WAIT_HEATMAP_ID = "chart-heatmap-step", "chart-heatmap-wait"
NODES_TABLE_ID = "nodes"


def _bins_note(bins: Bins) -> str:
    parts = []
    if bins.rank_bin > 1:
        parts.append(f"rows of {bins.rank_bin} consecutive ranks")
    if bins.step_bin > 1:
        parts.append(f"columns of {bins.step_bin} steps (labelled by their first)")
    return "; mean over " + " and ".join(parts) if parts else ""


def _heatmap(chart_id: str, title: str, grid: RankStepGrid, z: Any, scale: str) -> Chart:
    bins = grid.bins
    rows = bins.row_labels()
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=bins.column_starts(),
            y=rows,
            colorscale=scale,
            colorbar={"title": {"text": "ms"}},
            hoverongaps=False,
            hovertemplate="%{y}, step %{x}: %{z:.2f} ms<extra></extra>",
        )
    )
    layout(
        fig,
        height=min(max(HEIGHT, 3 * len(rows) + 120), 1400),
        xaxis={"title": {"text": "step"}},
        yaxis={"autorange": "reversed", "type": "category"},
    )
    return Chart(chart_id, title + _bins_note(bins), fig)


def heatmap_charts(grid: RankStepGrid | None) -> tuple[Chart, Chart]:
    """Step time and waiting in collectives, ranks x measured steps (notes when missing)."""
    step_title = "Step time per rank and step (ms)"
    wait_title = "Waiting in collectives for the last rank, per rank and step (ms)"
    if grid is None:
        note = "No completed steps were recorded."
        return Chart(STEP_HEATMAP_ID, step_title, None, note), Chart(
            WAIT_HEATMAP_ID, wait_title, None, note
        )
    step = _heatmap(STEP_HEATMAP_ID, step_title, grid, grid.step_ms, "Viridis")
    if grid.wait_ms is None:
        note = "No cross-rank analysis: it needs collectives matched across at least 2 ranks."
        return step, Chart(WAIT_HEATMAP_ID, wait_title, None, note)
    return step, _heatmap(WAIT_HEATMAP_ID, wait_title, grid, grid.wait_ms, "YlOrRd")


NODE_COLUMNS = (
    Column("node", align="left"),
    Column("ranks", align="left"),
    Column("mean step", "ms"),
    Column("busy avg", "ms/step"),
    Column("busy max", "ms/step"),
    Column("busiest rank"),
    Column("wait avg", "ms/step"),
    Column("busy vs median node", "%"),
)


def nodes_table(analysis: RunAnalysis) -> Table | None:
    """One row per node, the busiest first; None for a run on a single host or with one rank
    per host (the per-rank views say it all)."""
    nodes = analysis.nodes
    if len(nodes) < 2 or all(len(n.ranks) < 2 for n in nodes):
        return None
    rows, styles = [], []
    for n in nodes:
        vs = n.busy_vs_median_pct
        rows.append(
            (
                n.host,
                f"{len(n.ranks)}: {rank_ranges(n.ranks)}",
                fmt(n.mean_step_ms, ",.2f"),
                fmt(n.busy_ms, ",.2f"),
                fmt(n.busy_max_ms, ",.2f"),
                NA if n.busiest_rank is None else str(n.busiest_rank),
                fmt(n.wait_ms, ",.2f"),
                NA if vs is None else f"{vs:+.1f}",
            )
        )
        style: Style = "yellow" if vs is not None and vs >= 10.0 else ""
        styles.append(style)
    return Table(
        f"Per node ({len(nodes):,} nodes, the busiest first)",
        NODE_COLUMNS,
        tuple(rows),
        html_id=NODES_TABLE_ID,
        styles=tuple(styles),
        caption="ranks grouped by host name; busy: the step less its waiting for other ranks "
        "(the cross-rank analysis), averaged over the node's ranks; a node 10% or more above "
        "the median node in yellow",
    )
