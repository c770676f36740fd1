"""The dashboard of a run analysed from its node files (``report RUN --html``): the verdict and
its findings, the late nodes, ranks and links, percentiles over ranks and nodes, the node
what-if, and charts of the node matrices as ``analyze/scale/node_grid.py`` bounds them (a few
nodes by sampled step, the distributions in bars). Nothing per rank beyond the ranks named.

A Document drawn by the shared page (report/media/html.py), so every text is escaped there;
host names in figures go through ``plotly_text``.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from scalescope.analyze.scale.node_grid import Bars, NodeGrid
from scalescope.analyze.scale.summary import ScaleAnalysis
from scalescope.analyze.verdict import Cause, Verdict
from scalescope.report.document import (
    Block,
    Chart,
    Column,
    Document,
    Grid,
    Heading,
    Item,
    Items,
    Line,
    Section,
    Table,
)
from scalescope.report.formatting import NA
from scalescope.report.media.charts import HEIGHT, STRAGGLER_COLOR, TRANSFER_COLOR, layout
from scalescope.report.media.charts import plotly_text as pt
from scalescope.report.subjects import ScaleReport

BUSY_HEATMAP_ID, STEP_HEATMAP_ID = "chart-node-busy", "chart-node-step"
NODE_SPREAD_ID, RANK_SPREAD_ID = "chart-node-spread", "chart-rank-spread"
NODE_CHART_IDS = (BUSY_HEATMAP_ID, STEP_HEATMAP_ID, NODE_SPREAD_ID, RANK_SPREAD_ID)
SPREAD_KEYS = ("min", "p10", "p50", "p90", "max")
FOLDED = (
    "a late node at an end of a slow link waits for the link's bytes: the verdict "
    "counts it in the link"
)
MARK_HOVER = "%{text}: %{x:.2f}<extra></extra>"


def _ms(value: float) -> str:
    return f"{value:,.2f}" if math.isfinite(value) else NA


def summary_section(a: ScaleAnalysis, verdict: Verdict) -> Section:
    rows = [
        ("run", str(a.path)),
        ("command", " ".join(a.command) or NA),
        ("ranks", f"{a.world_size:,} on {len(a.hosts):,} nodes"),
        ("step (median over ranks)", f"{_ms(a.step_ms)} ms"),
        ("measured steps per rank", "{:,}-{:,}".format(*a.rank_steps_range)),
        ("sampled steps", f"{a.sampled_steps:,} of the node matrices"),
        ("rank files", f"{len(a.rank_files):,} ranks (their detail: report --rank N)"),
    ]
    line = Line(f"Verdict: {verdict.line}", style="bold red", html_id="verdict")
    return Section("Summary", (Grid(tuple(rows)), line), html_class="card")


def cause_item(c: Cause) -> Item:
    lines = [f"culprit: {c.culprit.words}"] if c.culprit is not None else []
    if c.cost is not None:
        lines.append(f"range {c.cost.low_ms:,.1f}-{c.cost.high_ms:,.1f} ms/step")
    aside = c.cost.words if c.cost is not None else ""
    return Item(c.summary, label=c.bottleneck, style="bold red", aside=aside, lines=tuple(lines))


def findings_section(verdict: Verdict) -> Section:
    if not verdict.causes:
        return Section("Findings", (Line(verdict.line),), html_id="findings")
    return Section("Findings", (Items(tuple(map(cause_item, verdict.causes))),),
                   html_id="findings")  # fmt: skip


def late_tables(a: ScaleAnalysis) -> tuple[Block, ...]:
    """The late nodes, late ranks and slow links, or a line saying there are none."""
    late = Column("busy above median", "ms/step")
    spread = Column("spread", "ms/step")
    nodes = Table("Late nodes", (Column("node", align="left"), Column("ranks", align="left"),
                                 late, spread, Column("last arrival after median", "ms")),
                  tuple((n.host, f"{n.ranks[0]}-{n.ranks[-1]}", _ms(n.excess_ms), _ms(n.sd_ms),
                         _ms(n.lateness_ms)) for n in a.late_nodes),
                  html_id="late-nodes", caption=FOLDED if a.links else "")  # fmt: skip
    ranks = Table("Late ranks", (Column("rank"), Column("node", align="left"), late, spread),
                  tuple((str(r.ranks[0]), r.host, _ms(r.excess_ms), _ms(r.sd_ms))
                        for r in a.late_ranks), html_id="late-ranks")  # fmt: skip
    links = Table("Slow links", (Column("hosts", align="left"), Column("group", align="left"),
                                 Column("op", align="left"), Column("transfer", "ms/call"),
                                 Column("peers' median", "ms/call"), Column("peers"),
                                 Column("ratio", "x")),
                  tuple((" - ".join(x.hosts), x.group, x.op, f"{x.transfer_ms:,.3f}",
                         f"{x.peer_ms:,.3f}", str(x.peers), f"{x.ratio:.1f}") for x in a.links),
                  html_id="slow-links")  # fmt: skip
    out: list[Block] = [t for t in (nodes, ranks, links) if t.rows]
    if not out:
        out.append(Line("No node, rank or link slower than its peers beyond the steps' spread."))
    return tuple(out)


def spread_table(a: ScaleAnalysis) -> Table:
    """Percentiles over ranks (their mean step) and nodes (their mean busy time)."""
    cols = (Column("over", align="left"), *(Column(k, "ms") for k in SPREAD_KEYS))
    rows = []
    for what, values in (("ranks: mean step", a.rank_step_spread),
                         ("nodes: mean busy per step", a.node_busy_spread)):  # fmt: skip
        rows.append((what, *(_ms(values[k]) if values else NA for k in SPREAD_KEYS)))
    return Table("Percentiles", cols, tuple(rows), html_id="spread",
                 caption="busy: a node's ranks' mean step less their mean wait for the "
                 "other nodes in collectives")  # fmt: skip


def whatif_table(a: ScaleAnalysis) -> Table | None:
    """The node what-if (analyze/scale/node_replay.py) of the late nodes and ranks' nodes."""
    if not a.gains:
        return None
    rows = tuple((a.hosts[n], _ms(g.gain_ms), f"{_ms(g.low_ms)}-{_ms(g.high_ms)}", f"{g.steps:,}")
                 for n, g in sorted(a.gains.items(), key=lambda kv: -kv[1].gain_ms))  # fmt: skip
    cols = (Column("node at the median node's pace", align="left"), Column("gain", "ms/step"),
            Column("95 % over steps", "ms/step"), Column("sampled steps"))  # fmt: skip
    return Table("What-if, nodes as units", cols, rows, html_id="node-whatif",
                 caption="the sampled steps replayed with the node issuing the step's last "
                 "collective at the median node's pace; about 14 % under the full replay "
                 "(docs/many-ranks.md)")  # fmt: skip


def _label(a: ScaleAnalysis, n: int) -> str:
    tags = [t for t, held in (("late node", a.late_nodes), ("late rank", a.late_ranks))
            if any(x.node == n for x in held)]  # fmt: skip
    return pt(a.hosts[n]) + (f" ({', '.join(tags)})" if tags else "")


def node_heatmap(a: ScaleAnalysis, grid: NodeGrid, chart_id: str, what: str, z: Any) -> Chart:
    title = f"{what} per node and sampled step (ms)"
    if not grid.measured:
        return Chart(chart_id, title, None, "No sampled step in the node files.")
    fig = go.Figure(go.Heatmap(
        z=z, x=list(grid.steps), y=[_label(a, n) for n in grid.nodes], colorscale="YlOrRd",
        colorbar={"title": {"text": "ms"}}, hoverongaps=False,
        hovertemplate="%{y}, step %{x}: %{z:.2f} ms<extra></extra>"))  # fmt: skip
    layout(fig, height=min(max(HEIGHT, 14 * len(grid.nodes) + 120), 900),
           xaxis={"title": {"text": "step"}},
           yaxis={"autorange": "reversed", "type": "category"})  # fmt: skip
    shown = f"{len(grid.nodes)} of {len(a.hosts):,} nodes"
    if len(grid.nodes) < len(a.hosts):
        shown += f": the {grid.slowest} busiest, the late ones, the {grid.fastest} least busy"
    return Chart(chart_id, f"{title}, {shown}, busiest first", fig)


def bars_chart(chart_id: str, title: str, bars: Bars | None,
               marks: tuple[tuple[str, float], ...], unit: str) -> Chart:  # fmt: skip
    """A histogram, ``marks`` drawn as named points above it."""
    if bars is None:
        return Chart(chart_id, title, None, "Nothing measured.")
    fig = go.Figure(go.Bar(x=list(bars.centres), y=list(bars.counts), width=bars.width,
                           marker_color=TRANSFER_COLOR, name="count",
                           hovertemplate=f"%{{x:.2f}} {unit}: %{{y}}<extra></extra>"))  # fmt: skip
    if marks:
        fig.add_trace(go.Scatter(x=[v for _, v in marks], y=[bars.top * 1.05] * len(marks),
                                 mode="markers+text", text=[pt(m) for m, _ in marks],
                                 textposition="top center", marker_color=STRAGGLER_COLOR,
                                 name="late", hovertemplate=MARK_HOVER))  # fmt: skip
    layout(fig, xaxis={"title": {"text": unit}}, yaxis={"title": {"text": "count"}},
           showlegend=False)  # fmt: skip
    return Chart(chart_id, title, fig)


def charts(a: ScaleAnalysis, grid: NodeGrid | None) -> list[Chart]:
    if grid is None:
        note = "The node grid was not gathered (analyze/scale/node_grid.py)."
        titles = ("Busy time", "Mean step", "Nodes", "Ranks")
        return [Chart(i, t, None, note) for i, t in zip(NODE_CHART_IDS, titles, strict=True)]
    return [
        node_heatmap(a, grid, BUSY_HEATMAP_ID, "Busy time", grid.busy_ms),
        node_heatmap(a, grid, STEP_HEATMAP_ID, "Mean step of the node's ranks", grid.step_ms),
        bars_chart(NODE_SPREAD_ID, f"Nodes by mean busy time per step ({len(a.hosts):,})",
                   grid.node_busy, grid.late_busy_ms, "ms/step"),
        bars_chart(RANK_SPREAD_ID, f"Ranks by mean step ({a.world_size:,})", grid.rank_step,
                   (), "ms"),
    ]  # fmt: skip


def scale_document(report: ScaleReport) -> Document:
    """The page of a run analysed from its node files."""
    a, verdict = report.analysis, report.verdict
    whatif = whatif_table(a)
    heading = Heading(f"scalescope {a.path.name}", "analysed from node files", rule=True)
    blocks: list[Block] = [
        heading, summary_section(a, verdict), findings_section(verdict),
        Section("Late nodes, ranks and links", late_tables(a), html_id="late"),
        spread_table(a), *([whatif] if whatif else []), *charts(a, report.grid),
    ]  # fmt: skip
    return Document(f"scalescope {a.path.name} (node files)", tuple(blocks))
