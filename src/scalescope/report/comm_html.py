"""The HTML page of `scalescope comm`: latency and busbw by size (log-log), a line per backend."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from scalescope.analyze.comm_bench import CommBenchmark, CommRow
from scalescope.report.comm_view import NCCL_COLUMNS, groups, nccl_cells
from scalescope.report.html import chart_html, esc, page
from scalescope.report.html_charts import Chart, layout, plotly_text

COMM_CHART_IDS = ("chart-comm-latency", "chart-comm-busbw")


def _chart(bench: CommBenchmark, chart_id: str, title: str, value: str, unit: str) -> Chart:
    fig = go.Figure()
    for op, backend, rows in groups(bench):
        fig.add_trace(
            go.Scatter(
                x=[r.nbytes for r in rows],
                y=[getattr(r, value) for r in rows],
                name=plotly_text(f"{op} · {backend}"),
                mode="lines+markers",
            )
        )
    if not fig.data:
        return Chart(chart_id, title, None, "No size was measured.")
    layout(
        fig,
        xaxis={"type": "log", "title": {"text": "message size (bytes)"}},
        yaxis={"type": "log", "title": {"text": unit}},
    )
    return Chart(chart_id, title, fig)


def _table(op: str, backend: str, rows: list[CommRow]) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in NCCL_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{esc(c)}</td>' for c in nccl_cells(r)) + "</tr>"
        for r in rows
    )
    return (
        f"<table><caption>{esc(op)} on {esc(backend)}</caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def render_comm_html(bench: CommBenchmark) -> str:
    charts = [
        _chart(bench, COMM_CHART_IDS[0], "Latency by message size", "time_avg_us", "µs per call"),
        _chart(bench, COMM_CHART_IDS[1], "Bus bandwidth by message size", "busbw_gbps", "GB/s"),
    ]
    unavailable = "".join(
        f"<li>{esc(b)}: {esc(reason)}</li>" for b, reason in bench.unavailable.items()
    )
    body = [
        f"<h1>scalescope comm: {bench.world_size} ranks, {html.escape(bench.dtype)}</h1>",
        *(chart_html(c) for c in charts),
        "<h2>nccl-tests columns</h2>",
        *(_table(op, backend, rows) for op, backend, rows in groups(bench)),
        f"<h2>Unavailable backends</h2><ul>{unavailable}</ul>" if unavailable else "",
    ]
    return page(f"scalescope comm {bench.world_size} ranks", body)
