"""`scalescope report RUN --html` of a run analysed from its node files
(report/views/scale_page.py), on generated runs (tests/helpers/node_file_runs.py): the slow
node named in the verdict, the tables and the heatmaps; the heatmaps bounded in nodes; markup
in a host name, the command line or the run directory kept as text; the options it refuses,
in one line."""

from __future__ import annotations

import html
import json
import re

import pytest
from node_file_runs import RANKS, STEPS, make_hostile, node_file_run
from typer.testing import CliRunner

from scalescope.analyze.scale.node_grid import node_grid
from scalescope.cli import app
from scalescope.diagnose.scale_recording import ScaleRecording
from scalescope.report.document import Chart, Section, Table
from scalescope.report.subjects import ScaleReport
from scalescope.report.views.scale_page import BUSY_HEATMAP_ID, NODE_CHART_IDS, scale_document

EVIL = "<script>alert(1)</script></script><img src=x onerror=alert(2)>&amp;\"'"
NODES = RANKS // 8


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale-page")
    slow = node_file_run(root / "slow")
    node_file_run(root / "jitter", None)
    return root, slow


@pytest.fixture(scope="module")
def link_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale-page-link")
    return root / "link", node_file_run(root / "link", "slow_link", "pipeline")


def report_of(run, slowest: int = 32, fastest: int = 8) -> ScaleReport:
    rec = ScaleRecording(run)
    grid = node_grid(rec.analysis, slowest, fastest)
    return ScaleReport(analysis=rec.analysis, verdict=rec.verdict, grid=grid)


def blocks(doc, kind):
    out = []
    for b in doc.blocks:
        inner = b.blocks if isinstance(b, Section) else (b,)
        out += [x for x in inner if isinstance(x, kind)]
    return out


def write_html(run, out) -> str:
    result = CliRunner().invoke(app, ["report", str(run), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output.replace("\n", "")
    return out.read_text(encoding="utf-8")


def test_html_names_the_slow_node_in_the_verdict_tables_and_heatmap(runs, tmp_path):
    root, truth = runs
    page = write_html(root / "slow", tmp_path / "slow.html")
    verdict = re.search(r'<p class="bold red" id="verdict">(.*?)</p>', page).group(1)
    assert f"node {truth.slow_node} is late" in verdict
    late = re.search(r'<table id="late-nodes">.*?</table>', page).group(0)
    assert f"<td>{truth.slow_node}</td>" in late and "128-135" in late
    assert f"<td>{truth.slow_node}</td>" in re.search(r'<table id="node-whatif">.*?</table>',
                                                      page).group(0)  # fmt: skip
    for chart_id in NODE_CHART_IDS:
        assert f'id="{chart_id}" data-chart' in page
    doc = scale_document(report_of(root / "slow"))
    busy = next(c for c in blocks(doc, Chart) if c.chart_id == BUSY_HEATMAP_ID).figure
    assert busy.data[0].y[0] == f"{truth.slow_node} (late node)"
    assert busy.data[0].z.shape == (NODES, STEPS - 5)


def test_html_tables_hold_the_analysis_figures(runs):
    root, _ = runs
    report = report_of(root / "slow")
    a = report.analysis
    tables = {t.html_id: t for t in blocks(scale_document(report), Table)}
    spread = tables["spread"].rows
    assert spread[0][3] == f"{a.rank_step_spread['p50']:,.2f}"
    assert spread[1][5] == f"{a.node_busy_spread['max']:,.2f}"
    gain = a.gains[a.late_nodes[0].node]
    assert tables["node-whatif"].rows == (
        (a.late_nodes[0].host, f"{gain.gain_ms:,.2f}",
         f"{gain.low_ms:,.2f}-{gain.high_ms:,.2f}", f"{STEPS - 5:,}"),
    )  # fmt: skip


def test_a_run_with_nothing_late_says_so(runs, tmp_path):
    root, _ = runs
    page = write_html(root / "jitter", tmp_path / "jitter.html")
    assert "No node, rank or link slower than its peers" in page
    assert 'id="late-nodes"' not in page and 'id="node-whatif"' not in page
    assert "the verdict counts it in the link" not in page
    assert "no clear bottleneck" in page


def test_a_slow_link_is_a_finding_and_a_table_of_its_groups(link_run, tmp_path):
    run, truth = link_run
    page = write_html(run, tmp_path / "link.html")
    ends = " - ".join(sorted(truth.slow_link))
    assert f"the link {ends} is slow" in re.search(r'id="verdict">(.*?)</p>', page).group(1)
    links = re.search(r'<table id="slow-links">.*?</table>', page).group(0)
    rows = re.findall(r"<tr><td>([^<]*)</td>", links)
    assert rows and {tuple(sorted(r.split(" - "))) for r in rows} == {
        tuple(sorted(truth.slow_link))
    }
    assert len(rows) == len(ScaleRecording(run).analysis.links)
    assert "the verdict counts it in the link" in page


def test_heatmaps_show_the_busiest_late_and_least_busy_nodes_only(runs):
    root, truth = runs
    report = report_of(root / "slow", slowest=3, fastest=2)
    a, grid = report.analysis, report.grid
    order = sorted(range(NODES), key=lambda n: -a.node_busy_ms[n])
    assert grid.nodes == tuple(order[:3] + order[-2:])
    assert a.hosts[grid.nodes[0]] == truth.slow_node
    assert grid.busy_ms.shape == (5, STEPS - 5)
    assert grid.busy_ms[0].tolist() == a.node_busy_steps_ms[grid.nodes[0]].tolist()
    assert sum(grid.node_busy.counts) == NODES and sum(grid.rank_step.counts) == RANKS
    chart = next(c for c in blocks(scale_document(report), Chart) if c.chart_id == BUSY_HEATMAP_ID)
    assert len(chart.figure.data[0].y) == 5
    assert "5 of 32 nodes: the 3 busiest, the late ones, the 2 least busy" in chart.title


def test_markup_in_a_host_the_command_and_the_run_dir_stays_text(runs, tmp_path):
    root, truth = runs
    run = make_hostile(root / "slow", tmp_path / "<img src=x onerror=alert(3)>",
                       truth.slow_node, EVIL)  # fmt: skip
    page = write_html(run, tmp_path / "evil.html")
    body = page[page.index("</head>") :]
    assert "<img" not in body and "<script>alert" not in body
    assert html.escape(EVIL) in body  # the host in the tables and the command line
    assert html.escape("<img src=x onerror=alert(3)>") in body
    data = re.search(rf'id="{BUSY_HEATMAP_ID}-data">(.*?)</script>', page).group(1)
    label = json.loads(data)["data"][0]["y"][0]
    assert label == html.escape(EVIL, quote=False) + " (late node)"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--timeline", "{out}"], "no --timeline: a timeline draws each rank's calls"),
        (["--threshold", "data_share_pct=20"], "sets no diagnosis threshold (--threshold)"),
        (["--baseline", "."], "nor a FLOP/s expectation (--baseline)"),
    ],
)
def test_options_a_node_file_run_cannot_take_are_one_line(runs, tmp_path, args, words):
    root, _ = runs
    out = tmp_path / "t.json"
    args = [a.format(out=out) for a in args]
    result = CliRunner().invoke(app, ["report", str(root / "jitter"), *args],
                                env={"COLUMNS": "300"})  # fmt: skip
    assert result.exit_code != 0
    assert "is analysed from node files" in result.output and words in result.output
    assert "Traceback" not in result.output
    assert not out.exists()
