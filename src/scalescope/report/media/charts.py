"""Plotly figures of the HTML report, one builder per chart.

A builder returns a ``Chart`` holding a figure, or a short note saying why there is none
(never an empty or broken chart). Every string that came from the user or the run (op and
tag names, host names) is HTML-escaped before it goes into a figure: plotly renders a subset
of HTML in labels and decodes entities, so escaped text shows as typed.
"""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scalescope.analyze import RunAnalysis
from scalescope.analyze.cross_rank import CrossRankAnalysis, RankWaits
from scalescope.analyze.steps.steps import OTHER, PhaseStats
from scalescope.events import PHASES
from scalescope.events.units import fmt_bytes, number_ranges
from scalescope.report.document import Chart

PHASE_COLORS = {
    "data": "#e45756",
    "to_device": "#eeca3b",
    "forward": "#4c78a8",
    "backward": "#72b7b2",
    "comm_wait": "#f58518",
    "optimizer": "#54a24b",
    OTHER: "#bab0ac",
}
WAIT_COLOR, TRANSFER_COLOR, STRAGGLER_COLOR, RANK_COLOR = "#f58518", "#4c78a8", "#e45756", "#72b7b2"
HEIGHT = 380


def plotly_text(text: str) -> str:
    """Escape a user string for a plotly label (plotly decodes the entities back)."""
    return html.escape(str(text), quote=False)


def cross_rank_of(analysis: RunAnalysis) -> CrossRankAnalysis | None:
    """The cross-rank analysis; None with fewer than 2 ranks or no matched collectives."""
    return analysis.cross_rank


def no_events_note(analysis: RunAnalysis, what: str) -> str:
    if not analysis.probe:
        return "The run was launched without the probe: no events were recorded."
    return f"No {what} were recorded in this run."


def layout(fig: go.Figure, **kwargs: Any) -> go.Figure:
    """Shared look; no template (it would add ~6 kB of JSON per chart)."""
    shared: dict[str, Any] = {
        "template": None,
        "height": HEIGHT,
        "margin": {"l": 70, "r": 20, "t": 30, "b": 60},
        "legend": {"orientation": "h", "y": -0.2, "traceorder": "normal"},
        "hovermode": "closest",
    }
    fig.update_layout(**(shared | kwargs))
    fig.update_yaxes(automargin=True)
    return fig


def latency_chart(runs: list[tuple[str, RunAnalysis]], chart_id: str = "chart-latency") -> Chart:
    """Mean time per call against message size, per op (log-log), min/max as error bars."""
    title = "Latency by message size (time per call, µs)"
    fig = go.Figure()
    for label, analysis in runs:
        coll = analysis.collectives
        for op in sorted({s.op for s in coll.sizes} if coll else ()):
            rows = [s for s in coll.sizes if s.op == op and s.nbytes > 0]
            if not rows:
                continue
            avg = [s.time_avg_us for s in rows]
            fig.add_trace(
                go.Scatter(
                    x=[s.nbytes for s in rows],
                    y=avg,
                    name=plotly_text(f"{label}{op}"),
                    mode="lines+markers",
                    line={"dash": "dash" if label.startswith("B") else None},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [s.time_max_us - a for s, a in zip(rows, avg, strict=True)],
                        "arrayminus": [a - s.time_min_us for s, a in zip(rows, avg, strict=True)],
                    },
                )
            )
    if not fig.data:
        return Chart(
            chart_id, title, None, no_events_note(runs[0][1], "collectives with a payload")
        )
    layout(
        fig,
        xaxis={"type": "log", "title": {"text": "message size (bytes)"}},
        yaxis={"type": "log", "title": {"text": "µs per call (min–max bars)"}},
    )
    return Chart(chart_id, title, fig)


def count_chart(analysis: RunAnalysis) -> Chart:
    """Calls per rank against message size, per op."""
    title = "Count by message size (calls per rank)"
    coll = analysis.collectives
    if coll is None or not any(s.nbytes > 0 for s in coll.sizes):
        return Chart("chart-count", title, None, no_events_note(analysis, "collectives"))
    fig = go.Figure()
    for op in sorted({s.op for s in coll.sizes}):
        rows = [s for s in coll.sizes if s.op == op and s.nbytes > 0]
        if rows:
            fig.add_trace(
                go.Scatter(
                    x=[s.nbytes for s in rows],
                    y=[s.calls_per_rank for s in rows],
                    name=plotly_text(op),
                    mode="lines+markers",
                )
            )
    layout(
        fig,
        xaxis={"type": "log", "title": {"text": "message size (bytes)"}},
        yaxis={"title": {"text": "calls per rank"}, "rangemode": "tozero"},
    )
    return Chart("chart-count", title, fig)


def phases_chart(runs: list[tuple[str, RunAnalysis]], chart_id: str = "chart-phases") -> Chart:
    """Mean ms per step of each phase, stacked, one bar per rank (per run when comparing)."""
    title = "Step phases per rank (mean ms per measured step)"
    ranks = [
        (plotly_text(f"{label}rank {r.rank}"), {p.phase: p for p in r.phases})
        for label, analysis in runs
        if analysis.steps is not None
        for r in analysis.steps.ranks
        if r.num_steps > 0
    ]
    if not ranks:
        return Chart(chart_id, title, None, no_events_note(runs[0][1], "steps"))
    fig = go.Figure()
    for phase in (*PHASES, OTHER):
        if any(phase in stats for _, stats in ranks):
            shown = [stats.get(phase) for _, stats in ranks]
            fig.add_trace(
                go.Bar(
                    x=[x for x, _ in ranks],
                    y=[p.mean_ms if p else 0.0 for p in shown],
                    name=phase,
                    marker_color=PHASE_COLORS.get(phase),
                    hovertext=[_on_cpu(p) for p in shown],
                )
            )
    layout(fig, barmode="stack", yaxis={"title": {"text": "ms per step"}})
    return Chart(chart_id, title, fig)


def _on_cpu(p: PhaseStats | None) -> str:
    """A bar's hover line: the phase's share on a CPU, where the probe recorded it."""
    if p is None or p.on_cpu_pct is None:
        return ""
    return f"{p.on_cpu_pct:.0f}% on a CPU (the rest waiting)"


def waits_chart(analysis: RunAnalysis) -> Chart:
    """Per op, tag and size: mean wait for the last rank versus mean transfer, stacked."""
    title = "Waiting for other ranks versus transfer, per collective (mean µs per call)"
    cross = cross_rank_of(analysis)
    if cross is None or not cross.waits:
        note = "No cross-rank analysis: it needs collectives matched across at least 2 ranks."
        return Chart("chart-waits", title, None, note)
    labels = [plotly_text(f"{w.op} {fmt_bytes(w.nbytes)} ({w.tag})") for w in cross.waits]
    hover = [
        f"{w.instances} instances, skew avg {w.skew_avg_us:.1f} µs, max "
        f"{w.skew_max_us:.1f} µs, waiting {w.wait_share_pct:.1f}%"
        for w in cross.waits
    ]
    fig = go.Figure(
        [
            go.Bar(
                x=labels,
                y=[w.wait_avg_us for w in cross.waits],
                name="waiting",
                marker_color=WAIT_COLOR,
                hovertext=hover,
            ),
            go.Bar(
                x=labels,
                y=[w.transfer_avg_us for w in cross.waits],
                name="transfer",
                marker_color=TRANSFER_COLOR,
                hovertext=hover,
            ),
        ]
    )
    layout(fig, barmode="stack", yaxis={"title": {"text": "µs per call"}})
    return Chart("chart-waits", title, fig)


def _rank_label(r: RankWaits) -> str:
    """``rank 3``, or on a pipeline ``stage 1 (rank 3)``."""
    return f"rank {r.rank}" if r.stage is None else f"stage {r.stage} (rank {r.rank})"


def straggler_chart(analysis: RunAnalysis) -> Chart:
    """Per rank (on a pipeline, per stage, in stage order): its share of the time others
    waited for it, and its waiting per step."""
    title = "Stragglers: who arrives last, who waits"
    cross = cross_rank_of(analysis)
    if cross is None or not cross.ranks:
        note = "No cross-rank analysis: it needs collectives matched across at least 2 ranks."
        return Chart("chart-straggler", title, None, note)
    slow = cross.straggler.rank if cross.straggler else None
    ranks = sorted(cross.ranks, key=lambda r: (-1 if r.stage is None else r.stage, r.rank))
    x = [_rank_label(r) for r in ranks]
    colors = [STRAGGLER_COLOR if r.rank == slow else RANK_COLOR for r in ranks]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "share of the time others waited for it (%)",
            "waiting in collectives (ms/step)",
        ),
    )
    fig.add_trace(
        go.Bar(x=x, y=[r.lateness_share_pct for r in ranks], marker_color=colors, name="late %"),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            x=x,
            y=[r.wait_ms_per_step for r in ranks],
            marker_color=colors,
            name="wait ms/step",
        ),
        row=1,
        col=2,
    )
    layout(fig, showlegend=False)
    return Chart("chart-straggler", title, fig)


def _timeline_rows(trace: dict[str, Any]) -> dict[tuple[int, int], str]:
    """(pid, tid) -> row label "rank N: track", in display order."""
    ranks = {
        e["pid"]: e["args"]["sort_index"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_sort_index"
    }
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    keys = sorted(threads, key=lambda k: (ranks.get(k[0], k[0]), k[1]))
    return {k: f"rank {ranks.get(k[0], k[0])}: {plotly_text(threads[k])}" for k in keys}


def _hover(e: dict[str, Any]) -> str:
    """Short (it is repeated per bar): name, step, duration or start, message."""
    args = e.get("args", {})
    name = "" if e["cat"] == "step" else f"{plotly_text(e['name'])}, "
    when = f"{e['dur'] / 1e3:.3f} ms" if "dur" in e else f"at {e['ts'] / 1e3:.3f} ms"
    text = f"{name}step {args.get('step')}, {when}"
    if "bytes" in args:
        text += f"<br>{fmt_bytes(args['bytes'])} {plotly_text(args['tag'])}, seq {args['seq']}"
    return text


Series = dict[str, list[Any]]


def _timeline_series(trace: dict[str, Any]) -> tuple[dict[str, Series], Series, list[str]]:
    """Bars by name (all steps as one "step" series), never-completed marks, row labels."""
    rows = _timeline_rows(trace)
    bars: dict[str, Series] = {}
    marks: Series = {"x": [], "y": [], "hovertext": []}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            key = "step" if e["cat"] == "step" else e["name"]
            series = bars.setdefault(key, {"x": [], "base": [], "y": [], "hovertext": []})
            series["x"].append(round(e["dur"] / 1e3, 4))
            series["base"].append(round(e["ts"] / 1e3, 4))
        elif e["ph"] == "i":
            series = marks
            series["x"].append(round(e["ts"] / 1e3, 4))
        else:
            continue
        series["y"].append(rows[(e["pid"], e["tid"])])
        series["hovertext"].append(_hover(e))
    return bars, marks, list(rows.values())


def timeline_chart(trace: dict[str, Any], ranks_note: str = "") -> Chart:
    """Horizontal bars per rank and track from a ``chrome_trace`` (same steps, same clock)."""
    first, stop = trace["metadata"]["steps"]
    title = f"Timeline of steps {first}–{stop - 1} (aligned clock, ms)"
    title += f"; {ranks_note}" if ranks_note else ""
    summarised = tuple(trace["metadata"].get("summarised_steps", ()))
    if summarised:
        title += (
            f"; no calls drawn in steps {number_ranges(summarised)}, recorded as summaries "
            "(--record summary)"
        )
    bars, marks, rows = _timeline_series(trace)
    if not bars and not marks["x"]:
        return Chart("chart-timeline", title, None, "No events were recorded in these steps.")
    fig = go.Figure()
    for name, series in bars.items():
        color = PHASE_COLORS.get(name, "#dddddd" if name == "step" else None)
        fig.add_trace(
            go.Bar(
                orientation="h",
                name=plotly_text(name),
                marker_color=color,
                hoverinfo="text",
                **series,
            )
        )
    if marks["x"]:
        never = {"symbol": "x", "size": 10, "color": "#d62728"}
        fig.add_trace(
            go.Scatter(
                mode="markers", name="never completed", hoverinfo="text", marker=never, **marks
            )
        )
    layout(
        fig,
        barmode="overlay",
        height=max(HEIGHT, 24 * len(rows) + 120),
        xaxis={"title": {"text": "ms"}},
        yaxis={"categoryorder": "array", "categoryarray": rows, "autorange": "reversed"},
    )
    return Chart("chart-timeline", title, fig)
