"""The HTML dashboard in a real browser: Debian's chromium, headless, offline.

Chromium loads the file with every host name unresolvable, runs its scripts
(``--virtual-time-budget``) and prints the DOM (``--dump-dom``). The page writes a JSON
status into ``<pre id="render-status">`` once every chart is drawn: plotly SVG layers per
chart, errors caught by ``window.onerror`` / unhandled rejections / ``console.error``, and
the resources it fetched. The test also fails on any console message chromium logs to
stderr (``--enable-logging=stderr`` prints every message as ``INFO:CONSOLE``).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "report"))
sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "predict"))

from analysed import analysed  # noqa: E402
from predict_inputs import inputs  # noqa: E402
from test_html import EVIL, compare_page, dashboard_page, full_page  # noqa: E402
from test_timeline import build_run  # noqa: E402

from scalescope.events import load_run  # noqa: E402
from scalescope.predict.project import ProjectOptions, project_inputs  # noqa: E402
from scalescope.predict.stored import DashboardProjection, decode_projection  # noqa: E402
from scalescope.report.media.page import STATUS_ID  # noqa: E402
from scalescope.report.renderers import render, write  # noqa: E402
from scalescope.report.views.dashboard import CHART_IDS  # noqa: E402
from scalescope.report.views.dashboard_ranks import STEP_HEATMAP_ID, WAIT_HEATMAP_ID  # noqa: E402
from scalescope.report.views.project import PROJECT_CHART_IDS, projection_json  # noqa: E402
from scalescope.report.views.project_section import (  # noqa: E402
    PROJECTION_CHART_ID,
)

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=5000",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
CONSOLE = re.compile(r":CONSOLE[:(\]].*")


def open_in_chromium(page: Path, tmp_path: Path) -> tuple[dict, str, list[str]]:
    """(render status, dumped DOM, console lines) of ``page`` loaded by headless chromium."""
    cmd = [
        CHROMIUM,
        *FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    match = re.search(rf'<pre id="{STATUS_ID}"[^>]*>(.*?)</pre>', done.stdout, flags=re.S)
    assert match, "no render status in the DOM: the render script did not run"
    assert match.group(1), "render status empty: the charts never finished drawing"
    status = json.loads(html.unescape(match.group(1)))
    console = [m.group(0) for m in CONSOLE.finditer(done.stderr)]
    return status, done.stdout, console


def check_rendered(status: dict, console: list[str], chart_ids: tuple[str, ...]) -> None:
    assert status["done"] is True
    assert status["errors"] == []
    assert console == []
    assert status["resources"] == []
    assert set(status["charts"]) == set(chart_ids)
    assert all(n >= 1 for n in status["charts"].values()), status["charts"]


def stored_projection_section(hostile: str = "") -> DashboardProjection:
    """The dashboard's section of a projection as `project` stores it in the run directory
    (through its JSON), with ``hostile`` as the hardware, a note and a dominant term."""
    projection = project_inputs(inputs(), ProjectOptions(nodes=(1, 2, 4, 128), hardware="a64fx"))
    stored = decode_projection(projection_json(projection))
    if hostile:
        stored.hardware, stored.notes, stored.points[0].dominant = hostile, [hostile], hostile
    return DashboardProjection(stored)


def test_dashboard_renders_every_chart(tmp_path):
    page_html, _ = full_page(tmp_path / "run", projection=stored_projection_section())
    page = tmp_path / "report.html"
    page.write_text(page_html, encoding="utf-8")
    status, dom, console = open_in_chromium(page, tmp_path)
    check_rendered(status, console, (*CHART_IDS, PROJECTION_CHART_ID))
    assert "Verdict:" in dom and '<table id="sizes">' in dom
    assert '<table id="projected-sizes">' in dom
    assert heatmap_drawn(dom, STEP_HEATMAP_ID) and heatmap_drawn(dom, WAIT_HEATMAP_ID)


def heatmap_drawn(dom: str, chart_id: str) -> bool:
    """The chart's div holds a plotly heatmap layer with its image."""
    start = dom.index(f'id="{chart_id}"')
    end = dom.find("data-chart", start + len(chart_id) + 10)
    return re.search(r'<g class="hm"><image[^>]*href="data:image/png', dom[start:end]) is not None


def test_many_ranks_dashboard_draws_the_heatmaps(tmp_path):
    """64 ranks x 40 steps (tests/helpers/many_ranks.py): both ranks x steps heatmaps drawn,
    the per-node table present, no error, nothing fetched."""
    from many_ranks import write_many_ranks_run

    run = load_run(write_many_ranks_run(tmp_path / "run", 64, 40, slow={13: 1.3}))
    page = tmp_path / "many.html"
    page.write_text(dashboard_page(analysed(run), run), encoding="utf-8")
    status, dom, console = open_in_chromium(page, tmp_path)
    check_rendered(status, console, CHART_IDS)
    assert heatmap_drawn(dom, STEP_HEATMAP_ID) and heatmap_drawn(dom, WAIT_HEATMAP_ID)
    assert '<table id="nodes">' in dom and "<td>node001</td>" in dom


def test_hostile_strings_stay_text(tmp_path):
    page_html, _ = full_page(
        tmp_path / "evil",
        projection=stored_projection_section(EVIL),
        run_id=EVIL,
        hostnames=(EVIL, "b"),
        script_args=("--x", EVIL),
        errors={1: f"RuntimeError: {EVIL}"},
    )
    page = tmp_path / "evil.html"
    page.write_text(page_html, encoding="utf-8")
    status, dom, console = open_in_chromium(page, tmp_path)
    check_rendered(status, console, (*CHART_IDS, PROJECTION_CHART_ID))
    assert "<img" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_compare_page_renders(tmp_path):
    run_a = build_run(tmp_path / "a", run_id="a")
    run_b = build_run(tmp_path / "b", run_id="b", num_steps=8)
    page = tmp_path / "compare.html"
    page.write_text(compare_page(run_a, run_b), encoding="utf-8")
    status, _, console = open_in_chromium(page, tmp_path)
    check_rendered(status, console, ("chart-latency", "chart-phases"))


def test_a_browser_without_decompression_stream_gets_a_note(tmp_path):
    """plotly.js is inlined gzipped: a browser that cannot inflate it says so on the page
    and keeps the plain-HTML summary and tables."""
    page_html, _ = full_page(tmp_path / "run")
    old = "<script>window.DecompressionStream = undefined;</script>"
    page = tmp_path / "old-browser.html"
    page.write_text(page_html.replace("<head>", "<head>" + old, 1), encoding="utf-8")
    status, dom, _ = open_in_chromium(page, tmp_path)
    assert status["done"] is True
    assert len(status["errors"]) == 1 and "no DecompressionStream" in status["errors"][0]
    assert '<p class="note">this browser cannot inflate the charts' in dom
    assert all(n == 0 for n in status["charts"].values())
    assert "Verdict:" in dom and '<table id="sizes">' in dom


def test_comm_and_scale_pages_render(tmp_path):
    from scalescope.analyze.comm.comm_bench import comm_results
    from scalescope.analyze.runs.scaling import scaling_table
    from scalescope.events.study import ScalePoint, ScaleStudy
    from scalescope.report.views.comm import COMM_CHART_IDS
    from scalescope.report.views.scaling import SCALE_CHART_IDS

    sizes = (8, 1024, 2**20)
    measurements = [
        {"backend": backend, "op": "all_reduce", "nbytes": s, "count": s // 4,
         "times_s": [(20e-6 + s * k * 1e-9) * (1 + i / 10) for i in range(3)]}
        for backend, k in (("gloo", 1.0), ("mpi", 0.5)) for s in sizes
    ]  # fmt: skip
    raw = {"world_size": 2, "dtype": "float32", "iters": 3, "warmup": 1}
    bench = comm_results(raw | {"measurements": measurements}, {"nccl": EVIL})
    study = ScaleStudy(workload=EVIL, points=[
        ScalePoint(ranks=1, samples_per_s=10.0, step_ms=100.0, run_dir="ranks-1"),
        ScalePoint(ranks=2, samples_per_s=18.0, step_ms=111.0, run_dir="ranks-2"),
        ScalePoint(ranks=4, status="failed", error=EVIL, run_dir="ranks-4"),
    ])  # fmt: skip
    pages = (
        (render(bench, "html"), COMM_CHART_IDS),
        (render(scaling_table(study, {}), "html"), SCALE_CHART_IDS[:1]),
    )
    for i, (text, ids) in enumerate(pages):
        page = tmp_path / f"page{i}.html"
        page.write_text(text, encoding="utf-8")
        status, dom, console = open_in_chromium(page, tmp_path)
        check_rendered(status, console, ids)
        assert "<img" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_projection_page_renders(tmp_path):
    projection = project_inputs(
        inputs(run_dir=EVIL), ProjectOptions(nodes=(1, 2, 4, 128), hardware="a64fx")
    )
    page = tmp_path / "project.html"
    write(projection, "html", page)
    status, dom, console = open_in_chromium(page, tmp_path)
    check_rendered(status, console, PROJECT_CHART_IDS)
    assert '<table id="projection">' in dom and "<img" not in dom


def test_tune_page_renders(tmp_path):
    from tune_results import tune_result

    page = write(tune_result(EVIL), "html", tmp_path / "tune.html")
    status, dom, console = open_in_chromium(page, tmp_path)
    check_rendered(status, console, ("chart-trials", "chart-knobs"))
    assert "<img" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_pipeline_chart_renders(tmp_path):
    """A two-stage pipeline's dashboard (the hand-built run of tests/unit/analyze/
    test_pipeline.py, its schedule named with markup): the pipeline chart is drawn."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "analyze"))
    from analyze_runs import make_run
    from test_pipeline import meta, stage_rows

    from scalescope.report.subjects import RunReport
    from scalescope.report.views.dashboard import render_html

    metas = {r: meta(r) for r in (0, 1)}
    for m in metas.values():
        m.pipeline.schedule = EVIL
    run = make_run(tmp_path, {r: [stage_rows(r)] for r in (0, 1)}, world_size=2,
                   rank_files=metas)  # fmt: skip
    page = tmp_path / "pipeline.html"
    page.write_text(render_html(RunReport(analysis=analysed(run), run=run)), encoding="utf-8")
    status, dom, console = open_in_chromium(page, tmp_path)
    drawn = ("chart-phases", "chart-pipeline", "chart-straggler", "chart-timeline")
    check_rendered(status, console, drawn)
    assert "<img" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_node_files_page_renders(tmp_path):
    """`report RUN --html` of a run analysed from its node files (256 ranks, a slow node whose
    host name is markup, the run directory's name too): every chart drawn, no error, nothing
    fetched, the slow node named as text."""
    from node_file_runs import make_hostile, node_file_run
    from typer.testing import CliRunner

    from scalescope.cli import app
    from scalescope.report.views.scale_page import BUSY_HEATMAP_ID, NODE_CHART_IDS

    truth = node_file_run(tmp_path / "slow")
    run = make_hostile(tmp_path / "slow", tmp_path / "<img src=x onerror=alert(3)>",
                       truth.slow_node, EVIL)  # fmt: skip
    page = tmp_path / "nodes.html"
    result = CliRunner().invoke(app, ["report", str(run), "--html", str(page)])
    assert result.exit_code == 0, result.output
    status, dom, console = open_in_chromium(page, tmp_path)
    check_rendered(status, console, NODE_CHART_IDS)
    assert heatmap_drawn(dom, BUSY_HEATMAP_ID)
    assert "<img" not in dom
    verdict = re.search(r'<p class="bold red" id="verdict">(.*?)</p>', dom).group(1)
    assert f"node {html.escape(EVIL, quote=False)} is late" in verdict
    assert "&lt;img src=x onerror=alert(3)&gt;" in dom
