"""The scaling table from a study: speedup and efficiency against the smallest good size,
failures and oversubscription marked, rendered."""

from __future__ import annotations

import pytest
from rich.console import Console

from scalescope.analyze.runs.scaling import scaling_efficiency, scaling_table
from scalescope.events.study import ScalePoint, ScaleStudy
from scalescope.report.media.terminal import render_document
from scalescope.report.renderers import render


def study(*points: ScalePoint, mode: str = "weak") -> ScaleStudy:
    return ScaleStudy(mode=mode, workload="train[1].py", points=list(points))


def test_speedup_and_efficiency_against_the_smallest_good_size():
    s = study(
        ScalePoint(ranks=1, status="failed", error="boom [x]", run_dir="ranks-1"),
        ScalePoint(ranks=2, samples_per_s=100.0, step_ms=80.0, run_dir="ranks-2"),
        ScalePoint(ranks=4, samples_per_s=150.0, step_ms=107.0, run_dir="ranks-4",
                   oversubscribed=True, threads_per_rank=2),
    )  # fmt: skip
    t = scaling_table(s, {})
    assert t.base_ranks == 2
    failed, two, four = t.rows
    assert failed.speedup is None and failed.status == "failed"
    assert two.speedup == pytest.approx(1.0) and two.efficiency_pct == pytest.approx(100.0)
    assert four.speedup == pytest.approx(1.5) and four.efficiency_pct == pytest.approx(75.0)
    console = Console(record=True, width=200)
    render_document(render(t, "terminal"), console)
    text = console.export_text()
    assert "1 ranks failed: boom [x]" in text
    assert "4 ranks oversubscribed: 4 ranks × 2 threads exceed the node's cores" in text
    assert "75" in text and "1.50" in text and "against 2 ranks" in text
    page = render(t, "html")
    assert "boom [x]" in page and "train[1].py" in page


def test_no_good_size_gives_no_speedup():
    t = scaling_table(study(ScalePoint(ranks=2, status="failed", error="x")), {})
    assert t.base_ranks is None and t.rows[0].efficiency_pct is None
    console = Console(record=True, width=200)
    render_document(render(t, "terminal"), console)
    assert "no size succeeded" in console.export_text()


def test_efficiency_linear_and_sublinear():
    assert scaling_efficiency(2, 200.0, 1, 100.0) == pytest.approx(1.0)
    assert scaling_efficiency(4, 300.0, 1, 100.0) == pytest.approx(0.75)
    assert scaling_efficiency(8, 600.0, 2, 200.0) == pytest.approx(0.75)


def test_efficiency_without_a_base_is_none():
    assert scaling_efficiency(2, 100.0, 1, 0.0) is None


def test_a_failed_size_that_measured_steps_draws_without_a_perfect_line():
    """The only size crashed after some steps: its rate is drawn, with no base to scale."""
    crashed = ScalePoint(ranks=2, status="failed", error="rank 1 raised", samples_per_s=50.0,
                         step_ms=40.0, run_dir="ranks-2")  # fmt: skip
    t = scaling_table(study(crashed), {})
    assert t.base_ranks is None
    page = render(t, "html")
    assert "rank 1 raised" in page and '"name":"measured"' in page
    assert '"name":"perfect"' not in page
