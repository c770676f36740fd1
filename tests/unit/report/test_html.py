"""HTML dashboard: structure, charts or notes, escaping of user strings, no URL, size.

``full_page`` (also used by the browser test) renders a 2-rank run with a straggler and a
hung collective, analysed for real (cross-rank included), so every chart is present.
``fake_cross_rank`` is a hand-built cross-rank analysis for cases the run cannot produce.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import html
import json
import re
from pathlib import Path

import pytest
from analysed import analysed  # noqa: E402
from plotly.offline import get_plotlyjs
from recorded_runs import RUNS
from test_timeline import BUCKETS, build_run

from scalescope.analyze import RunAnalysis
from scalescope.analyze.cross_rank import (
    ClockAlignment,
    CrossRankAnalysis,
    Overlap,
    RankWaits,
    Straggler,
    WaitStats,
)
from scalescope.analyze.runs.compare import compare_runs
from scalescope.analyze.verdict import Verdict
from scalescope.api.reporting import ReportFiles, run_report
from scalescope.diagnose.recording import Recording  # noqa: E402
from scalescope.events import Run, load_run
from scalescope.predict.stored import DashboardProjection
from scalescope.report.media.charts import RANK_COLOR, STRAGGLER_COLOR
from scalescope.report.media.page import STATUS_ID, plotly_payload
from scalescope.report.subjects import ComparedRuns
from scalescope.report.views.dashboard import (
    CHART_IDS,
    render_compare_html,
    render_html,
    timeline_scope,
)

EVIL = "<script>alert(1)</script></script><img src=x onerror=alert(2)>&amp;\"'"
SIZE_LIMIT = 5_000_000


def fake_cross_rank(op: str = "all_reduce", tag: str = "gradients") -> CrossRankAnalysis:
    """Numbers in the shape analyze_cross_rank returns, with rank 1 as the straggler."""
    waits = tuple(
        WaitStats(op, tag, nbytes, 13, 900.0, 1500.0, 450.0 + i, 3000.0, 13.0)
        for i, nbytes in enumerate(sorted(BUCKETS.values()))
    )
    return CrossRankAnalysis(
        clocks=(
            ClockAlignment(0, 0, 0, 0, "reference"),
            ClockAlignment(1, 7_000_000, 1000, 50, "ping-pong"),
        ),
        waits=waits,
        ranks=(
            RankWaits(
                rank=0,
                last_count=0,
                last_share_pct=0.0,
                lateness_avg_us=0.0,
                wait_ms_per_step=60.0,
                busy_ms_per_step=60.0,
            ),
            RankWaits(
                rank=1,
                last_count=39,
                last_share_pct=100.0,
                lateness_avg_us=10.0,
                wait_ms_per_step=0.0,
                busy_ms_per_step=70.0,
            ),
        ),
        matched_instances=39,
        unmatched_instances=1,
        load_imbalance_pct=7.7,
        straggler=Straggler(1, 100.0, 10.0, "forward", 10.0, 97.0, 9.5),
        overlap=Overlap(20.0, 10.0, 10.0, 50.0),
    )


def dashboard_page(
    analysis: RunAnalysis, run: Run, projection: DashboardProjection | None = None
) -> str:
    """The dashboard as `report --html` draws it (the rank-step grid and clock offsets
    gathered by api/reporting.py), with ``projection`` as the stored projection."""
    rec = Recording.of(run)
    rec.analysis = analysis
    report = run_report(rec, files=ReportFiles(html=Path("page.html")))
    return render_html(dataclasses.replace(report, projection=projection))


def compare_page(run_a: Run, run_b: Run) -> str:
    a, b = analysed(run_a), analysed(run_b)
    return render_compare_html(ComparedRuns(comparison=compare_runs(a, b), a=a, b=b))


def full_page(
    run_dir: Path, projection: DashboardProjection | None = None, **kwargs
) -> tuple[str, RunAnalysis]:
    """The dashboard of a ``build_run`` run (straggler, hung collective) with its real
    cross-rank analysis, and ``projection`` at its end."""
    run = build_run(run_dir, **({"num_steps": 8, "hang": True} | kwargs))
    analysis = analysed(run)
    assert analysis.cross_rank is not None and analysis.cross_rank.straggler is not None
    return dashboard_page(analysis, run, projection), analysis


def figure(page: str, chart_id: str) -> dict:
    match = re.search(rf'<script type="application/json" id="{chart_id}-data">(.*?)</script>', page)
    assert match, f"no figure for {chart_id}"
    return json.loads(match.group(1))


def without_plotly(page: str) -> str:
    packed = plotly_payload()
    assert page.count(packed) == 1
    return page.replace(packed, "")


def test_every_chart_and_section_is_present(tmp_path):
    run_dir = tmp_path / "run"
    page, analysis = full_page(run_dir)
    assert page.startswith("<!DOCTYPE html>")
    for chart_id in CHART_IDS:
        assert f'id="{chart_id}" data-chart' in page
        assert figure(page, chart_id)["data"], chart_id
    assert f'<pre id="{STATUS_ID}" hidden></pre>' in page
    assert '<table id="sizes">' in page and "Failures and problems" in page
    assert "rank 0: 1 all_reduce (gradients) never completed, from step 8" in page
    assert "Biggest loss" not in page, "the page makes no headline of its own"
    assert f'id="verdict">Verdict: {html.escape(verdict_of(run_dir).line)}</p>' in page


def verdict_of(run_dir: Path) -> Verdict:
    return Recording.of(load_run(run_dir)).verdict


def test_the_card_gives_the_verdicts_culprit_and_cost(tmp_path):
    run_dir = RUNS / "straggler_data_2" / "run"
    page = dashboard_page(analysed(load_run(run_dir)), load_run(run_dir))
    top = verdict_of(run_dir).top
    assert top.code == "STRAGGLER" and top.culprit.words == "rank 1" and top.cost.replayed
    assert f"<th>culprit</th><td>rank 1 ({top.bottleneck})</td>" in page
    assert f"<th>cost</th><td>{html.escape(top.cost.words)}" in page


def test_a_pipelines_straggler_chart_shows_its_stages():
    """The recorded 3-stage pipeline: the bars name each rank's stage, the heavy stage 2 is
    the one the others waited for, rank 0 (the lightest) kept nobody waiting."""
    run = load_run(RUNS / "p2p_pipeline" / "run")
    late, waits = figure(dashboard_page(analysed(run), run), "chart-straggler")["data"]
    names = ["stage 0 (rank 0)", "stage 1 (rank 1)", "stage 2 (rank 2)"]
    assert late["x"] == waits["x"] == names
    assert late["marker"]["color"] == [RANK_COLOR, RANK_COLOR, STRAGGLER_COLOR]
    assert late["y"] == [0.0, 0.0, 100.0]


def test_summary_and_table_are_plain_html(tmp_path):
    page, analysis = full_page(tmp_path / "run")
    text = without_plotly(page)
    no_scripts = re.sub(r"<script.*?</script>", "", text, flags=re.S)
    assert "run-1" in no_scripts and "node-a, node-b" in no_scripts
    assert "scalescope run train.py --epochs 1" in no_scripts
    rows = re.findall(r"<tr><td>(.*?)</td>", no_scripts)
    assert rows == [s.op for s in analysis.collectives.sizes]
    assert "4.00 MiB" in no_scripts and "8.00 MiB" in no_scripts


def test_charts_hold_the_analysis_numbers(tmp_path):
    page, analysis = full_page(tmp_path / "run")
    latency = figure(page, "chart-latency")
    assert latency["layout"]["xaxis"]["type"] == latency["layout"]["yaxis"]["type"] == "log"
    [all_reduce] = [t for t in latency["data"] if t["name"] == "all_reduce"]
    sizes = [s for s in analysis.collectives.sizes if s.op == "all_reduce"]
    assert all_reduce["x"] == [s.nbytes for s in sizes]
    assert all_reduce["y"] == pytest.approx([s.time_avg_us for s in sizes])
    phases = figure(page, "chart-phases")
    assert [t["name"] for t in phases["data"]][:5] == [
        "data",
        "forward",
        "backward",
        "comm_wait",
        "optimizer",
    ]
    assert phases["layout"]["barmode"] == "stack"
    timeline = figure(page, "chart-timeline")
    names = {t["name"] for t in timeline["data"]}
    assert {"step", "data", "all_reduce", "never completed"} <= names


def test_missing_data_gives_notes_not_charts(tmp_path):
    run = build_run(tmp_path / "off", probe=False)
    page = dashboard_page(analysed(run), run)
    assert "data-chart" not in without_plotly(page).replace("[data-chart]", "")
    for chart_id in CHART_IDS:
        assert f'id="{chart_id}-note"' in page
    assert "without the probe" in page


def test_no_cross_rank_gives_notes_for_its_charts(tmp_path):
    run = build_run(tmp_path / "run")
    page = dashboard_page(analysed(run).replaced(cross_rank=None), run)
    for chart_id in ("chart-waits", "chart-straggler"):
        assert f'id="{chart_id}-note"' in page
    for chart_id in ("chart-latency", "chart-count", "chart-phases", "chart-timeline"):
        assert f'id="{chart_id}" data-chart' in page
    assert 'id="verdict">Verdict: ' in page
    assert "Failures and problems" not in page


def test_user_strings_are_escaped(tmp_path):
    page, _ = full_page(
        tmp_path / "evil",
        run_id=EVIL,
        hostnames=(EVIL, "b"),
        script_args=("--x", EVIL),
        errors={1: f"RuntimeError: {EVIL}"},
    )
    text = without_plotly(page)
    assert "<script>alert" not in text and "<img" not in text
    assert html.escape(EVIL) in text
    assert text.count("</script>") == text.count("<script")
    blocks = re.findall(r'<script type="application/json" id="[a-z-]+">(.*?)</script>', text)
    assert blocks and all("<" not in b and ">" not in b and "&" not in b for b in blocks)
    assert "Failures and problems" in text and "RuntimeError: &lt;script&gt;" in text


def test_escaped_strings_survive_in_figures(tmp_path):
    run = build_run(tmp_path / "evil", hostnames=(EVIL, "b"))
    analysis = analysed(run).replaced(cross_rank=fake_cross_rank(op=EVIL, tag=EVIL))
    page = dashboard_page(analysis, run)
    waits = figure(page, "chart-waits")
    assert all(x.startswith("&lt;script&gt;") for x in waits["data"][0]["x"])


def test_no_url_outside_plotly(tmp_path):
    page, _ = full_page(tmp_path / "run")
    text = without_plotly(page)
    assert "http://" not in text and "https://" not in text
    assert not re.search(r"\b(src|href)\s*=", text, flags=re.I)
    assert not re.search(r"@import|url\(", text)


def test_plotly_fetches_nothing_by_itself():
    """plotly.js mentions URLs (licence comments, map tiles, attribution links): none loads
    a resource as a page element; maps are never drawn here."""
    js = get_plotlyjs()
    assert "</script" not in js.lower()
    assert not re.search(r"""<(script|link|img)[^>]*(src|href)=["']?https?:""", js)


def test_plotly_is_inlined_gzipped_and_whole():
    packed = base64.b64decode(plotly_payload(), validate=True)
    assert gzip.decompress(packed).decode("utf-8") == get_plotlyjs()
    assert len(plotly_payload()) < 0.5 * len(get_plotlyjs())
    assert plotly_payload() == plotly_payload.__wrapped__(), "no timestamp in the gzip header"


def test_size_is_bounded(tmp_path):
    page, _ = full_page(tmp_path / "run")
    data = len(without_plotly(page).encode())
    assert len(page.encode()) < SIZE_LIMIT
    assert data < 150_000


def test_compare_page(tmp_path):
    run_a = build_run(tmp_path / "a", run_id="run-a")
    run_b = build_run(tmp_path / "b", run_id=EVIL)
    page = compare_page(run_a, run_b)
    assert page.count(plotly_payload()) == 1
    latency = figure(page, "chart-latency")
    assert {t["name"] for t in latency["data"]} >= {"A: all_reduce", "B: all_reduce"}
    phases = figure(page, "chart-phases")
    assert "A: rank 0" in phases["data"][0]["x"] and "B: rank 1" in phases["data"][0]["x"]
    assert "<script>alert" not in without_plotly(page)
    assert page.count('class="card"') == 2


def test_timeline_is_bounded_to_eight_ranks_and_forty_rank_steps(tmp_path):
    run = build_run(tmp_path / "ten", world_size=10, num_steps=12)
    analysis = analysed(run)
    assert timeline_scope(analysis, run, None) == (range(1, 6), list(range(8)))
    timeline = figure(dashboard_page(analysis, run), "chart-timeline")
    rows = timeline["layout"]["yaxis"]["categoryarray"]
    assert {r.split(":")[0] for r in rows} == {f"rank {r}" for r in range(8)}
    assert {
        h.split("step ")[1].split(",")[0] for t in timeline["data"] for h in t["hovertext"]
    } == {str(s) for s in range(1, 6)}
    late = dataclasses.replace(analysis.cross_rank.straggler, rank=9)
    slow = analysis.replaced(cross_rank=dataclasses.replace(analysis.cross_rank, straggler=late))
    assert timeline_scope(slow, run, range(3, 4)) == (range(3, 4), [0, 1, 2, 3, 4, 5, 6, 9])
    assert "ranks 0, 1, 2, 3, 4, 5, 6, 9 of 10" in dashboard_page(slow, run)


def test_small_runs_show_every_rank_and_ten_steps(tmp_path):
    run = build_run(tmp_path / "run", num_steps=14)
    assert timeline_scope(analysed(run), run, None) == (range(1, 11), None)


def test_the_card_says_what_the_report_header_says(tmp_path):
    """Every fact of the terminal report's header, in its words, on the card."""
    from scalescope.report.views.run import header_rows

    run = build_run(tmp_path / "run")
    analysis = analysed(run)
    card = without_plotly(dashboard_page(analysis, run)).split('<section class="card">')[1]
    card = card.split("</section>")[0]
    for key, value in header_rows(analysis):
        assert f"<tr><th>{html.escape(key)}</th><td>{html.escape(value)}</td></tr>" in card


def test_the_compare_page_holds_the_terminal_tables(tmp_path):
    from scalescope.analyze.runs.compare import compare_runs
    from scalescope.report.document import Section, Table
    from scalescope.report.views.compare import comparison_document

    run_a, run_b = build_run(tmp_path / "a", run_id="a"), build_run(tmp_path / "b", run_id="b")
    a, b = analysed(run_a), analysed(run_b)
    page = compare_page(run_a, run_b)
    doc = comparison_document(compare_runs(a, b))
    tables = [t for s in doc.blocks if isinstance(s, Section) for t in s.blocks]
    for table in (t for t in tables if isinstance(t, Table)):
        assert all(html.escape(cell) in page for row in table.rows for cell in row)
    assert "scalescope compare: A = a, B = b (ratios B/A)" in page


def test_each_phase_bar_says_its_share_on_a_cpu():
    """Rank 1 sleeps 70 ms a step in forward (recorded with CPU rows): its forward bar says it
    was almost never on a CPU there; the table's figure and the bar's hover are one."""
    run = load_run(RUNS / "straggler_forward_2" / "run")
    analysis = analysed(run)
    forward = next(t for t in figure(dashboard_page(analysis, run), "chart-phases")["data"]
                   if t["name"] == "forward")  # fmt: skip
    shares = {r.rank: next(p.on_cpu_pct for p in r.phases if p.phase == "forward")
              for r in analysis.steps.ranks}  # fmt: skip
    assert shares[1] < 10 < shares[0]
    assert forward["hovertext"] == [f"{shares[r]:.0f}% on a CPU (the rest waiting)" for r in (0, 1)]
