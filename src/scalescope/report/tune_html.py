"""The study's HTML page: samples/s per trial, per knob value, and the trials table."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from scalescope.report.html import chart_html, page
from scalescope.report.html_charts import Chart, layout, plotly_text
from scalescope.report.tune_view import (
    NO_GAIN,
    STOPPED,
    TABLE_COLUMNS,
    best_text,
    config_text,
    last_line,
    rate_text,
    unconfirmed_text,
)
from scalescope.tune.result import TuneResult, knob_effects

COLORS = {"ok": "#4878a8", "pruned": "#c9a227", "failed": "#b22222", "interrupted": "#888"}


def trials_chart(result: TuneResult) -> Chart:
    records = sorted(result.records, key=lambda r: r.number)
    measured = [r for r in records if r.samples_per_s is not None]
    if not measured:
        return Chart("chart-trials", "Samples/s per trial", None, "No trial was measured.")
    fig = go.Figure(
        go.Bar(
            x=[f"#{r.number}" for r in measured],
            y=[r.samples_per_s for r in measured],
            marker_color=[COLORS.get(r.status, "#888") for r in measured],
            hovertext=[plotly_text(config_text(r.config)) for r in measured],
            name="samples/s",
        )
    )
    base = result.baseline
    if base is not None and base.samples_per_s:
        fig.add_hline(y=base.samples_per_s, line_dash="dash", annotation_text="baseline")
    unit = measured[0].unit
    layout(fig, xaxis_title="trial", yaxis_title=unit, height=360)
    return Chart("chart-trials", f"{unit} per trial (pruned in yellow)", fig)


def knobs_chart(result: TuneResult) -> Chart:
    effects = knob_effects(result)
    if not effects:
        return Chart("chart-knobs", "Samples/s per knob value", None, "No trial was measured.")
    fig = go.Figure()
    for effect in effects:
        fig.add_trace(
            go.Bar(
                x=[plotly_text(f"{effect.name}={value}") for value, _, _ in effect.means],
                y=[mean for _, mean, _ in effect.means],
                hovertext=[f"{n} trials" for _, _, n in effect.means],
                name=plotly_text(f"{effect.name} (spread {effect.spread_pct:.0f}%)"),
            )
        )
    layout(fig, yaxis_title=f"mean {result.unit}", height=380)
    title = f"Mean {result.unit} per knob value (knobs by spread: the most important first)"
    return Chart("chart-knobs", title, fig)


def trials_table_html(result: TuneResult) -> str:
    rows = []
    for r in result.ranked():
        speedup = result.speedup(r)
        note = "; ".join(f"changes {s}" for s in result.semantics(r))
        if r.status == "failed":
            note = last_line(r.error)
        cells = [
            str(r.number),
            ("baseline " if r.baseline else "") + config_text(r.config),
            str(len(result.measurements(r))),
            rate_text(result.median(r) or r.samples_per_s, r.unit),
            "-" if speedup is None else f"{speedup:.2f}x",
            r.status,
            note or "",
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in TABLE_COLUMNS)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def render_tune_html(result: TuneResult) -> str:
    best = result.best
    summary = [f"<p>Study: {html.escape(STOPPED.get(result.stopped, result.stopped))}.</p>"]
    if best is not None:
        summary.append(f"<p><b>{html.escape(best_text(result, best))}</b></p>")
    leader = result.unconfirmed_leader
    if leader is not None:
        summary.append(f"<p>{html.escape(unconfirmed_text(result, leader))}</p>")
    if best is not None and result.recommended is None:
        summary.append(f"<p>{NO_GAIN}</p>")
    if result.reuse:
        summary.append(f"<pre>{html.escape(result.reuse)}</pre>")
    body = [
        f"<h1>scalescope tune: {html.escape(result.target)}</h1>",
        *summary,
        chart_html(trials_chart(result)),
        chart_html(knobs_chart(result)),
        "<h2>Trials</h2>",
        trials_table_html(result),
    ]
    return page(f"scalescope tune {result.target}", body)
