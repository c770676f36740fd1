"""Every surface shows the run's one verdict: the terminal report, the JSON, the dashboard's
summary and ``top``'s line name the same culprit and the same cost, on recorded runs of each
layout (data parallel, stragglers, a pipeline, FSDP x TP, a slow link, shared cores). ``top``
judges its window without the bench's files and the model's FLOPs (``Recording(window=True)``),
so an estimated cost may differ there; a replayed one may not."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from recorded_runs import RUNS
from rich.console import Console

from scalescope import load
from scalescope.analyze.verdict import Verdict
from scalescope.api.reporting import print_run_report, run_report
from scalescope.diagnose.recording import Recording
from scalescope.live.run_view import verdict_words

WALKED = ("balanced", *(p.parent.name for p in sorted(RUNS.glob("straggler_*/run"))),
          "p2p_pipeline", "fsdp_tp", "slowdown_link", "oversubscribed")  # fmt: skip


def surfaces(name: str, tmp: Path) -> tuple[Verdict, str, dict, str, str]:
    """The verdict, and what the terminal, the JSON, the page and ``top`` show of it."""
    rec = load(RUNS / name / "run")
    console = Console(record=True, width=10_000, color_system=None)
    print_run_report(run_report(rec), console)
    json_path, page_path = rec.write_json(tmp / "r.json"), rec.write_dashboard(tmp / "r.html")
    doc = json.loads(json_path.read_text())["diagnosis"]["verdict"]
    top = verdict_words(Recording(rec.run, rec.alerts, window=True))
    return rec.verdict, console.export_text(), doc, page_path.read_text(), top


@pytest.mark.parametrize("name", WALKED)
def test_every_surface_names_the_same_culprit_and_cost(name: str, tmp_path: Path) -> None:
    verdict, terminal, doc, page, top = surfaces(name, tmp_path)
    assert f"verdict: {verdict.line}\n" in terminal
    assert doc["line"] == verdict.line and doc["state"] == verdict.state
    assert f'id="verdict">Verdict: {html.escape(verdict.line)}</p>' in page
    assert "Biggest loss" not in page
    for cause, written in zip(verdict.causes, doc["causes"], strict=True):
        culprit, cost = cause.culprit, cause.cost
        if culprit is not None:
            assert written["culprit"]["name"] == culprit.name
            assert f"<th>culprit</th><td>{html.escape(culprit.words)}" in page
            assert culprit.words in top
        if cost is not None:
            assert written["cost"]["ms_per_step"] == pytest.approx(cost.ms_per_step)
            assert f"<th>cost</th><td>{html.escape(cost.words)}" in page
            if cost.replayed:  # an estimate may read the bench's files, which top leaves out
                assert cost.words in top
        assert cause.bottleneck in top
    if not verdict.causes:
        assert top.startswith(verdict.line.split(":")[0])


def test_the_pipeline_names_its_bound_stage_beside_cpu_placement(tmp_path: Path) -> None:
    verdict, terminal, _doc, page, top = surfaces("p2p_pipeline", tmp_path)
    named = {c.code: c for c in verdict.causes}
    assert set(named) == {"OVERSUBSCRIBED", "PIPELINE_BUBBLE"}
    stage = named["PIPELINE_BUBBLE"].culprit
    assert (stage.kind, stage.name, stage.ranks) == ("stage", "2", (2,))
    cost = named["PIPELINE_BUBBLE"].cost
    assert cost.replayed, "the schedule replayed with stage 2 at its peers' pace"
    assert 40 <= cost.ms_per_step <= 50, "its 15 ms sleep in each of 3 forwards: ~45 ms/step"
    for shown in (terminal, page, top):
        assert "stage 2 (rank 2)" in shown and "CPU placement" in shown
    assert "straggler       rank 2 causes 100% of the waiting" in terminal
    assert "rank 0 causes" not in terminal and "rank 1 causes" not in terminal
    bars = json.loads(page.split('id="chart-straggler-data">')[1].split("</script>")[0])
    late = dict(zip(bars["data"][0]["x"], bars["data"][0]["y"], strict=True))
    assert late == {"stage 0 (rank 0)": 0.0, "stage 1 (rank 1)": 0.0, "stage 2 (rank 2)": 100.0}


def test_a_balanced_run_names_no_bottleneck(tmp_path: Path) -> None:
    verdict = load(RUNS / "balanced" / "run").verdict
    assert verdict.state == "no bottleneck" and not verdict.causes
    assert verdict.line.startswith("no clear bottleneck")


@pytest.mark.parametrize("name", ["slowdown_link", "slowdown_rank"])
def test_an_alert_of_the_verdicts_culprit_carries_its_cost(name: str) -> None:
    """The slowdown the watch named while the run trained is costed by the same replay."""
    rec = load(RUNS / name / "run")
    causes = {f"{c.culprit.kind}:{c.culprit.name}": c for c in rec.verdict.causes if c.culprit}
    costed = [s for s in rec.analysis.slowdowns if s.fix_cause in causes]
    assert costed, (rec.verdict.line, [s.fix_cause for s in rec.analysis.slowdowns])
    for slowdown in costed:
        cost = causes[slowdown.fix_cause].cost
        assert cost.replayed and slowdown.fix_gain_ms == pytest.approx(cost.ms_per_step)
