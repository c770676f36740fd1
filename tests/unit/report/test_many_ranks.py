"""Outputs at many ranks (issue 29): the terminal prints the worst and best ranks and the
distribution instead of a row per rank, the dashboard has ranks x steps heatmaps and a summary
per node within its size bound, the JSON keeps every rank. Runs come from the synthetic
generator of tests/helpers/many_ranks.py (64 ranks x 50 steps, 8 ranks per node, rank 13 on
node001 30 % slower)."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re

import numpy as np
import pytest
from analysed import analysed  # noqa: E402
from many_ranks import write_many_ranks_run
from rich.console import Console
from test_html import dashboard_page

from scalescope.analyze import RunAnalysis
from scalescope.analyze.rank_steps import MAX_COLUMNS, MAX_ROWS, Bins, RankStepGrid
from scalescope.events import load_run
from scalescope.report.document import Block, Chart, Section, Table
from scalescope.report.media.page import chart_html, plotly_payload
from scalescope.report.media.report_json import report_json
from scalescope.report.views.dashboard import CHART_IDS
from scalescope.report.views.dashboard_ranks import (
    STEP_HEATMAP_ID,
    WAIT_HEATMAP_ID,
    _heatmap,
    rank_ranges,
)
from scalescope.report.views.rank_summary import RANK_ROWS_LIMIT, host_list
from scalescope.report.views.run import failure_blocks, run_document
from scalescope.report.views.run_terminal import render_terminal

SLOW = 13
PAGE_LIMIT = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    run = load_run(
        write_many_ranks_run(tmp_path_factory.mktemp("r") / "run", 64, 50, slow={SLOW: 1.3})
    )
    return run, analysed(run)


def tables(blocks: tuple[Block, ...]) -> list[Table]:
    out: list[Table] = []
    for b in blocks:
        if isinstance(b, Table):
            out.append(b)
        elif isinstance(b, Section):
            out += tables(b.blocks)
    return out


def terminal_text(analysis: RunAnalysis) -> str:
    console = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    render_terminal(analysis, console)
    return console.export_text()


def test_terminal_at_64_ranks_has_no_table_longer_than_the_limit(wide):
    _, analysis = wide
    doc = run_document(analysis)
    found = tables(doc.blocks)
    assert found and all(len(t.rows) <= RANK_ROWS_LIMIT for t in found)
    condensed = [t for t in found if "slowest" in t.title]
    assert [t.title for t in condensed] == [
        "Per rank: the 5 slowest and 3 fastest of 64 ranks (by busy time per step)",
        "Per rank (measured steps): the 5 slowest and 3 fastest of 64 ranks "
        "(by busy time per step)",
    ]
    for t in condensed:  # the slow rank first, with its host; a rule before the fastest
        assert t.rows[0][:2] == (str(SLOW), "node001")
        assert t.groups == (5, 3) and len(t.rows) == 8
    spreads = [t for t in found if t.title == "Distribution over all 64 ranks"]
    assert len(spreads) == 2
    assert all("56 of 64 ranks not shown above" in t.caption for t in spreads)
    assert [c.name for c in spreads[0].columns] == ["per rank", "min", "p10", "p50", "p90", "max"]


def test_terminal_text_at_64_ranks_names_the_worst_rank(wide):
    _, analysis = wide
    text = terminal_text(analysis)
    assert re.search(rf"│\s+{SLOW}\s+│ node001 ", text)
    assert "Step phases over 64 ranks" in text and "Step phases per rank" not in text
    assert re.search(rf"backward .* {SLOW} \(node001\)", text)  # its slowest phase's rank
    per_rank_lines = [line for line in text.splitlines() if re.match(r"│\s+\d+\s+│", line)]
    assert len(per_rank_lines) == 2 * 8  # two condensed tables of 8 ranks each


def test_16_ranks_keep_one_row_per_rank(tmp_path):
    analysis = analysed(load_run(write_many_ranks_run(tmp_path / "run", 16, 20)))
    found = {t.title: t for t in tables(run_document(analysis).blocks)}
    assert len(found["Per rank"].rows) == 16
    assert [r[0] for r in found["Per rank"].rows] == [str(r) for r in range(16)]
    assert len(found["Per rank (measured steps)"].rows) == 16
    assert len(found["Step phases per rank (per-step sums)"].groups) == 16
    assert not any("Distribution" in title or "slowest" in title for title in found)


def test_json_keeps_every_rank(wide):
    _, analysis = wide
    doc = report_json(analysis, None)
    assert len(doc["steps"]["ranks"]) == 64
    assert len(doc["cross_rank"]["ranks"]) == 64
    assert len(doc["ranks"]) == 64
    assert len(doc["hostnames"]) == 8


def test_failures_beyond_the_limit_end_in_one_line(wide):
    _, analysis = wide
    ranks = tuple(
        dataclasses.replace(r, status="failed", exit_code=1, error="boom", end_time=float(r.rank))
        for r in analysis.ranks
    )
    blocks = failure_blocks(analysis.replaced(ranks=ranks, status="failed"))
    assert len(blocks) == 2 * RANK_ROWS_LIMIT + 1
    assert blocks[-1].text.startswith("48 more ranks did not complete (48 failed): ranks 16, 17")


def test_host_list_is_short_beyond_16_hosts():
    hosts = [f"node{i:03d}" for i in range(128)]
    assert host_list(hosts[:3]) == "3: node000, node001, node002"
    text = host_list(hosts)
    assert text.startswith("128: node000, node001") and text.endswith("..., node126, node127")
    assert len(text) < 200


def test_rank_ranges():
    assert rank_ranges((3, 0, 1, 2, 7, 9, 10)) == "0-3, 7, 9-10"
    assert rank_ranges((5,)) == "5"


def figure(page: str, chart_id: str) -> dict:
    match = re.search(rf'<script type="application/json" id="{chart_id}-data">(.*?)</script>', page)
    assert match, chart_id
    return json.loads(match.group(1))


def test_dashboard_has_the_heatmaps_and_nodes(wide):
    run, analysis = wide
    page = dashboard_page(analysis, run)
    assert STEP_HEATMAP_ID in CHART_IDS and WAIT_HEATMAP_ID in CHART_IDS
    for chart_id in (STEP_HEATMAP_ID, WAIT_HEATMAP_ID):
        trace = figure(page, chart_id)["data"][0]
        assert trace["type"] == "heatmap"
        assert len(trace["y"]) == 64 and trace["y"][SLOW] == f"rank {SLOW}"
        assert trace["x"] == list(range(2, 50))  # measured steps, one column each
    wait = figure(page, WAIT_HEATMAP_ID)["data"][0]["z"]
    z = np.frombuffer(base64.b64decode(wait["bdata"]), dtype=wait["dtype"])
    z = z.reshape(64, 48)
    assert z[SLOW].mean() < 0.1 * np.delete(z, SLOW, axis=0).mean()  # the slow rank never waits
    assert '<table id="nodes">' in page
    nodes = re.search(r'<table id="nodes">.*?</table>', page, flags=re.S).group(0)
    rows = re.findall(r"<tr[^>]*><td>(node\d+)</td>", nodes)
    assert len(rows) == 8 and rows[0] == "node001"  # the busiest node first
    # the page's own timeline: rank 0, the 4 slowest and the 3 fastest
    assert "of 64" in re.search(r"Timeline of steps[^<]*", page).group(0)


def test_dashboard_escapes_host_names(tmp_path):
    evil = "<script>alert(1)</script>"
    run_dir = write_many_ranks_run(tmp_path / "run", 20, 10)
    for f in (run_dir / "ranks").glob("rank-*.json"):
        meta = json.loads(f.read_text())
        meta["hostname"] = evil if meta["rank"] < 8 else "b"
        f.write_text(json.dumps(meta))
    run = load_run(run_dir)
    page = dashboard_page(analysed(run), run)
    body = page.replace(plotly_payload(), "")
    assert evil not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_page_at_256_ranks_stays_small(tmp_path):
    run = load_run(write_many_ranks_run(tmp_path / "run", 256, 60, slow={200: 1.3}))
    page = dashboard_page(analysed(run), run)
    size = len(page.encode())
    assert size < 4 * 1024 * 1024, size
    assert len(figure(page, STEP_HEATMAP_ID)["data"][0]["y"]) == 256


def test_bins_at_1024_and_4096_ranks_by_1000_steps():
    for ranks, rank_bin in ((1024, 1), (4096, 4)):
        bins = Bins(np.arange(ranks), max(1, ranks // MAX_ROWS), 5, 1000, 5)
        assert bins.shape == (MAX_ROWS, MAX_COLUMNS) and bins.rank_bin == rank_bin
    bins = Bins(np.arange(4096), 4, 5, 1000, 5)
    assert bins.row_labels()[:2] == ["ranks 0-3", "ranks 4-7"]
    cells = bins.cells(np.array([0, 5, 4095, 9999]), np.array([5, 11, 1004, 5]))
    assert cells.tolist() == [0, MAX_COLUMNS + 1, MAX_ROWS * MAX_COLUMNS - 1, -1]


def test_a_full_size_heatmap_keeps_the_page_under_10_mb():
    """1,024 ranks x 1,000 steps bin to 1,024 x 200 cells: each heatmap about 1.1 MB, so
    plotly.js, both heatmaps and a generous 2 MB for the rest stay under 10 MB."""
    bins = Bins(np.arange(1024), 1, 5, 1000, 5)
    rng = np.random.default_rng(0)
    z = rng.uniform(90, 130, size=bins.shape).astype(np.float32)
    grid = RankStepGrid(bins, z, z)
    chart: Chart = _heatmap(STEP_HEATMAP_ID, "step time", grid, z, "Viridis")
    heatmap = len(chart_html(chart).encode())
    assert heatmap < 1.3 * 1024 * 1024, heatmap
    assert len(plotly_payload()) + 2 * heatmap + 2 * 1024 * 1024 < PAGE_LIMIT
