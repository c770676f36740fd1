"""The projection in a run's dashboard: `project` stores it in the run directory, `report
--html` reads it back and draws it (throughput against nodes, the band, the dominant term)."""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

import pytest
from test_html import EVIL, figure, without_plotly
from test_timeline import build_run

sys.path.insert(0, str(Path(__file__).parents[1] / "predict"))

from predict_inputs import inputs  # noqa: E402

from scalescope.api.reporting import ReportFiles, report_run  # noqa: E402
from scalescope.commands.project import store_projection  # noqa: E402
from scalescope.events.files import PROJECTION_FILE  # noqa: E402
from scalescope.predict.project import Projection, ProjectOptions, project_inputs  # noqa: E402
from scalescope.predict.stored import decode_projection, stored_projection  # noqa: E402
from scalescope.report.media.terminal import render_document  # noqa: E402
from scalescope.report.renderers import render  # noqa: E402
from scalescope.report.views.project import PROJECT_CHART_IDS, projection_json  # noqa: E402
from scalescope.report.views.project_section import (  # noqa: E402
    PROJECTION_CHART_ID,
    projection_chart,
)


def projection(nodes: tuple[int, ...] = (1, 2, 4), **changes: object) -> Projection:
    return project_inputs(inputs(**changes), ProjectOptions(nodes=nodes))


def dashboard(run_dir: Path, tmp_path: Path) -> str:
    page = tmp_path / "report.html"
    report_run(run_dir, ReportFiles(html=page), terminal=False)
    return page.read_text(encoding="utf-8")


def test_a_stored_projection_is_drawn_in_the_dashboard(tmp_path):
    run = build_run(tmp_path / "run")
    p = projection()
    assert store_projection(run.path, p) == run.path / PROJECTION_FILE
    page = dashboard(run.path, tmp_path)
    assert f'id="{PROJECTION_CHART_ID}" data-chart' in page
    assert '<table id="projected-sizes">' in page
    traces = {t.get("name"): t for t in figure(page, PROJECTION_CHART_ID)["data"]}
    points = p.points
    projected = traces["projected"]
    assert projected["x"] == [q.nodes for q in points] == [1, 2, 4]
    # samples/s = ranks × batch / step, from the model's own terms
    rates = [q.ranks * q.per_rank_batch / (q.terms.step_ms / 1e3) for q in points]
    assert projected["y"] == pytest.approx(rates)
    assert projected["text"] == [q.terms.dominant for q in points]
    lower = traces["± one standard deviation"]
    assert lower["fill"] == "tonexty"
    slow = [q.global_batch / ((q.terms.step_ms + q.band_ms) / 1e3) for q in points]
    assert lower["y"] == pytest.approx(slow)
    upper = figure(page, PROJECTION_CHART_ID)["data"][0]
    fast = [q.global_batch / ((q.terms.step_ms - q.band_ms) / 1e3) for q in points]
    assert upper["y"] == pytest.approx(fast)
    assert all(lo < r < hi for lo, r, hi in zip(slow, rates, fast, strict=True))
    assert traces["linear"]["y"] == pytest.approx([rates[0] * q.ranks / 2 for q in points])


def test_no_stored_projection_no_section(tmp_path):
    run = build_run(tmp_path / "run")
    page = dashboard(run.path, tmp_path)
    assert PROJECTION_CHART_ID not in page and 'id="projection"' not in page


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "could not be read"),
        (b'{"schema": "scalescope.project/1", "points": 3}', "could not be read"),
        (json.dumps({"schema": "x", "mode": "weak", "hardware": "h", "ranks_per_node": 1,
                     "algorithm": "ring", "points": []}).encode(), "holds no projected size"),
    ],
)  # fmt: skip
def test_a_broken_projection_file_is_a_note_not_a_failure(tmp_path, content, problem):
    run = build_run(tmp_path / "run")
    (run.path / PROJECTION_FILE).write_bytes(content)
    page = dashboard(run.path, tmp_path)
    assert f'id="{PROJECTION_CHART_ID}"' not in page
    assert '<p class="note" id="projection-note">' in page and problem in page
    assert 'id="chart-phases" data-chart' in page


def test_user_strings_in_the_stored_projection_are_escaped(tmp_path):
    run = build_run(tmp_path / "run")
    doc = json.loads(store_projection(run.path, projection()).read_bytes())
    doc["hardware"] = EVIL
    doc["notes"] = [EVIL]
    doc["points"][0]["dominant"] = EVIL
    (run.path / PROJECTION_FILE).write_text(json.dumps(doc))
    page = dashboard(run.path, tmp_path)
    assert EVIL not in without_plotly(page) and "<img" not in without_plotly(page)
    assert html.escape(EVIL) in page
    projected = next(t for t in figure(page, PROJECTION_CHART_ID)["data"]
                     if t.get("name") == "projected")  # fmt: skip
    assert projected["text"][0] == html.escape(EVIL, quote=False)


def test_the_projection_page_draws_the_same_chart():
    p = projection(nodes=(1, 8, 128))
    page = render(p, "html")
    fig = figure(page, PROJECT_CHART_IDS[0])
    projected = next(t for t in fig["data"] if t.get("name") == "projected")
    assert projected["y"] == pytest.approx([q.samples_per_s for q in p.points])
    assert fig["layout"]["xaxis"]["type"] == "log"


def test_a_band_wider_than_the_step_leaves_a_gap():
    stored = decode_projection(projection_json(projection()))
    stored.points[0].band_ms = 2 * stored.points[0].step_ms
    upper = projection_chart(stored).figure.data[0]
    assert upper.y[0] is None and all(y > 0 for y in upper.y[1:])


def test_an_unreadable_location_is_no_projection(tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text("{}")
    assert stored_projection(trace) is None
    assert stored_projection(tmp_path / "missing") is None


def test_the_table_carries_the_band_to_throughput_and_epoch_time():
    from rich.console import Console

    p = projection(nodes=(1,))
    console = Console(width=200, record=True, markup=False)
    render_document(render(p, "terminal"), console)
    text = console.export_text()
    (q,) = p.points
    relative = q.band_ms / q.terms.step_ms
    for value in (q.terms.step_ms, q.samples_per_s, q.epoch_s):
        assert f"{value:,.1f} ± {value * relative:,.1f}" in text
    assert q.samples_per_s_range[0] < q.samples_per_s < q.samples_per_s_range[1]
