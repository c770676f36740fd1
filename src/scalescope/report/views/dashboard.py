"""One HTML dashboard of a run (or two runs side by side), on the shared page of
report/media/page.py: summary, failures, findings, the by-size table, charts and a timeline.
The hang, the failures and problems and the by-size table are the run report's own blocks
(report/views/run.py) through document_html, so they say what the terminal says. The
summary, failures and the by-size table are plain HTML and work without JavaScript.
"""

from __future__ import annotations

from scalescope.analyze import RunAnalysis
from scalescope.analyze.verdict import Verdict
from scalescope.diagnose.findings import Diagnosis
from scalescope.events import Run
from scalescope.report.document import Grid, Heading, Line, Section
from scalescope.report.media.charts import (
    count_chart,
    cross_rank_of,
    latency_chart,
    phases_chart,
    straggler_chart,
    timeline_chart,
    waits_chart,
)
from scalescope.report.media.html import block_html
from scalescope.report.media.page import chart_html, page
from scalescope.report.media.timeline import DEFAULT_NUM_STEPS, chrome_trace, default_steps
from scalescope.report.subjects import ComparedRuns, RunReport
from scalescope.report.views.collectives import full_windows, size_table, windows_note
from scalescope.report.views.dashboard_ranks import (
    STEP_HEATMAP_ID,
    WAIT_HEATMAP_ID,
    heatmap_charts,
    nodes_table,
)
from scalescope.report.views.pipeline_chart import pipeline_chart
from scalescope.report.views.project_section import projection_section
from scalescope.report.views.rank_select import DASHBOARD_SPEC, parse_rank_spec, select_ranks
from scalescope.report.views.rank_summary import RANK_ROWS_LIMIT
from scalescope.report.views.run import (
    failure_blocks,
    header_rows,
    problem_lines,
    report_heading,
    throughput_rows,
)
from scalescope.report.views.run import hang_section as run_hang_section

CHART_IDS = (
    "chart-latency",
    "chart-count",
    "chart-phases",
    "chart-waits",
    "chart-straggler",
    STEP_HEATMAP_ID,
    WAIT_HEATMAP_ID,
    "chart-timeline",
)
TIMELINE_MAX_RANKS = 8
TIMELINE_RANK_STEPS = 40
"""Ranks x steps in the page's timeline when no steps are given: ~1.3 kB of page each."""


def timeline_scope(
    analysis: RunAnalysis, run: Run, steps: range | None
) -> tuple[range, list[int] | None]:
    """Steps and ranks of the page's timeline, bounded so the page stays small: at most
    TIMELINE_MAX_RANKS ranks (the first ones, the straggler replacing the last; beyond
    RANK_ROWS_LIMIT ranks, rank 0 and the slowest and fastest) and, unless ``steps`` is given,
    about TIMELINE_RANK_STEPS rank-steps (between 2 and 10 steps)."""
    ranks = sorted(set(run.events.ranks()) | set(run.ranks))
    shown = None
    order = analysis.slowest_first
    if len(ranks) > RANK_ROWS_LIMIT and order is not None:
        shown = select_ranks(parse_rank_spec(DASHBOARD_SPEC), ranks, order)
    elif len(ranks) > TIMELINE_MAX_RANKS:
        cross = cross_rank_of(analysis)
        shown = ranks[:TIMELINE_MAX_RANKS]
        if cross is not None and cross.straggler is not None and cross.straggler.rank not in shown:
            shown[-1] = cross.straggler.rank
    if steps is None:
        per_rank = TIMELINE_RANK_STEPS // max(len(shown or ranks), 1)
        num_steps = max(2, min(DEFAULT_NUM_STEPS, per_rank))
        steps = default_steps(run.events, run.meta.warmup_steps, num_steps)
    return steps, shown


def shown_ranks_note(run: Run, shown: list[int] | None) -> str:
    if shown is None:
        return ""
    total = len(set(run.events.ranks()) | set(run.ranks))
    return f"ranks {', '.join(map(str, shown))} of {total}"


def _card_rows(a: RunAnalysis, verdict: Verdict | None) -> list[tuple[str, str]]:
    """The run report's header and headline figures, in its words, then the verdict's
    culprit and cost: the run's one verdict, not a headline of the page's own."""
    rows = [("run id", a.run_id), *header_rows(a)]
    if a.steps is not None:
        rows += throughput_rows(a.steps)
    for cause in verdict.causes if verdict is not None else ():
        if cause.culprit is not None:
            rows.append(("culprit", f"{cause.culprit.words} ({cause.bottleneck})"))
        if cause.cost is not None:
            c = cause.cost
            rows.append(("cost", f"{c.words} (range {c.low_ms:,.1f}-{c.high_ms:,.1f} ms/step)"))
    return rows


def summary_section(analysis: RunAnalysis, verdict: Verdict | None, label: str = "") -> Section:
    """The run at a glance: facts, throughput, step time and the verdict."""
    line = (
        Line(f"Verdict: {verdict.line}", style="bold red", html_id="verdict")
        if verdict is not None
        else Line("Not diagnosed, so no verdict.", style="note")
    )
    title = f"{label} summary" if label else "Summary"
    rows = Grid(tuple(_card_rows(analysis, verdict)))
    return Section(title, (rows, line), html_class="card")


def summary_card(analysis: RunAnalysis, verdict: Verdict | None, label: str = "") -> str:
    return block_html(summary_section(analysis, verdict, label))


def failures_section(analysis: RunAnalysis, label: str = "") -> str:
    """Failed ranks with their errors and problems with the data, as the terminal words them,
    and the calls that never completed."""
    coll = analysis.collectives
    incomplete = tuple(
        Line(f"rank {i.rank}: {i.calls} {i.op} ({i.tag}) never completed, from step {i.first_step}")
        for i in (coll.incomplete if coll is not None else ())
    )
    items = (*failure_blocks(analysis), *problem_lines(analysis), *incomplete)
    if not items and analysis.status in ("completed", "running"):
        return ""
    title = f"{label} failures and problems" if label else "Failures and problems"
    status = Line(f"Run status: {analysis.status}")
    return block_html(Section(title, (status, *items), html_id="failures"))


def hang_section(analysis: RunAnalysis) -> str:
    """The hang first, as the terminal shows it (verdicts, ranks, main-thread stacks)."""
    section = run_hang_section(analysis)
    return "" if section is None else block_html(section)


def sizes_table(analysis: RunAnalysis) -> str:
    """The nccl-tests style table: one row per op and message size, per rank."""
    coll = analysis.collectives
    if coll is None or not coll.sizes:
        what = "no events were recorded (probe off)" if not analysis.probe else "none recorded"
        return block_html(Line(f"Collectives: {what}.", style="note"))
    return block_html(size_table(coll))


def windows_html(analysis: RunAnalysis) -> str:
    """On a run recorded as summaries, which steps' calls the per-call charts and table show."""
    coll = analysis.collectives
    note = windows_note(coll) if coll is not None else None
    return "" if note is None else block_html(note)


def findings_html(diagnosis: Diagnosis | None) -> str:
    """The findings, best first, each with its cost, evidence and remedies (all escaped)."""
    if diagnosis is None:
        return ""
    from scalescope.report.views.diagnosis import findings_section

    return block_html(findings_section(diagnosis))


def render_html(report: RunReport) -> str:
    """The dashboard of one run; the timeline covers ``report.steps`` (default: as
    chrome_trace); the stored projection, if any, goes at the end."""
    analysis, run = report.analysis, report.run
    steps, ranks = timeline_scope(analysis, run, report.steps)
    trace = chrome_trace(run, dict(report.offsets_ns), steps, ranks, full_windows(analysis))
    charts = [
        latency_chart([("", analysis)]),
        count_chart(analysis),
        phases_chart([("", analysis)]),
        *[c for c in (pipeline_chart(analysis, report.pipeline_step),) if c is not None],
        waits_chart(analysis),
        straggler_chart(analysis),
        *heatmap_charts(report.grid),
        timeline_chart(trace, shown_ranks_note(run, ranks)),
    ]
    nodes = nodes_table(analysis)
    body = [
        block_html(report_heading(analysis)),
        '<div class="cards">',
        summary_card(analysis, report.diagnosis.verdict if report.diagnosis else None),
        "</div>",
        hang_section(analysis),
        failures_section(analysis),
        findings_html(report.diagnosis),
        windows_html(analysis),
        *(chart_html(c) for c in charts[:2]),
        block_html(Heading("Collectives by message size (per rank)"), level=2),
        sizes_table(analysis),
        *(chart_html(c) for c in charts[2:-1]),
        block_html(Section("Per node", (nodes,), html_id="per-node")) if nodes else "",
        chart_html(charts[-1]),
        projection_section(report.projection),
    ]
    return page(f"scalescope {analysis.run_id}", body)


def render_compare_html(runs: ComparedRuns) -> str:
    """Two runs side by side: summary cards, the comparison's tables as the terminal prints
    them, overlaid latency curves, phase bars per run."""
    from scalescope.report.views.compare import comparison_document

    a_analysis, b_analysis = runs.a, runs.b
    labelled = [("A: ", a_analysis), ("B: ", b_analysis)]
    doc = comparison_document(runs.comparison)
    body = [
        block_html(doc.blocks[0]),
        '<div class="cards">',
        summary_card(a_analysis, None, "A"),
        summary_card(b_analysis, None, "B"),
        "</div>",
        failures_section(a_analysis, "A"),
        failures_section(b_analysis, "B"),
        *(block_html(block) for block in doc.blocks[1:]),
        chart_html(latency_chart(labelled)),
        chart_html(phases_chart(labelled)),
    ]
    return page(doc.title, body)
