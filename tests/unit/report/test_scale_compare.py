"""`scalescope compare A B` where either run is analysed from its node files
(diagnose/scale_compare.py, report/views/scale_compare.py), on generated runs
(tests/helpers/node_file_runs.py): a run with a slow node against the same run regenerated
without it, every figure checked against each run's own ScaleAnalysis; the slow node resolved
one way and new the other; a run against itself within the spread; a node-file run against a
rank-file run of another size; a missing or cut node file in one line."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from node_file_runs import node_file_run
from typer.testing import CliRunner

from scalescope.analyze.scale.summary import analyse_node_files, from_node_files
from scalescope.api.comparing import compare_scale
from scalescope.api.recording import load
from scalescope.cli import app
from scalescope.diagnose.scale_verdict import scale_verdict
from scalescope.events.files import node_file_path
from synthetic_nodes import write_scale_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale-compare")
    truth = node_file_run(root / "slow")
    node_file_run(root / "fixed", None)
    return root, truth


@pytest.fixture(scope="module")
def rank_run(tmp_path_factory):
    """64 ranks with every rank file: analysed from its rank files."""
    path = tmp_path_factory.mktemp("scale-compare-ranks") / "ranks"
    write_scale_run(path, 64, 40, None, seed=11, sample_every=0)
    assert not from_node_files(path)
    return path


def invoke(*args: str):
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def flat(text: str) -> str:
    return " ".join(text.split())


def job_steps(a) -> tuple[float, float, int]:
    """The job's step per sampled step (mean over nodes): its mean, sd and count."""
    per_step = [float(np.mean(col[np.isfinite(col)])) for col in a.node_step_ms.T.astype(float)]
    return float(np.mean(per_step)), float(np.std(per_step, ddof=1)), len(per_step)


def test_compare_figures_are_each_runs_own_analysis(runs, tmp_path):
    root, truth = runs
    out = tmp_path / "c.json"
    result = invoke(root / "slow", root / "fixed", "--json", out)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    a, b = analyse_node_files(root / "slow"), analyse_node_files(root / "fixed")
    assert data["schema"] == "scale_compare/1"
    assert (data["a"]["step_ms"], data["b"]["step_ms"]) == (a.step_ms, b.step_ms)
    assert data["a"]["rank_step_ms"] == a.rank_step_spread
    assert data["b"]["node_busy_ms"] == b.node_busy_spread
    step = data["step"]
    assert step["median_ms"]["change_pct"] == 100 * (b.step_ms - a.step_ms) / a.step_ms
    (ma, sa, na), (mb, sb, nb) = job_steps(a), job_steps(b)
    assert step["mean_ms"]["a"] == pytest.approx(ma, rel=1e-12)
    assert step["noise_ms"] == pytest.approx(2 * math.sqrt(sa**2 / na + sb**2 / nb), rel=1e-9)
    assert step["beyond_spread"] is True and abs(mb - ma) > step["noise_ms"]
    for key in ("min", "p50", "max"):
        x = data["node_busy_ms"][key]
        assert (x["a"], x["b"]) == (a.node_busy_spread[key], b.node_busy_spread[key])
    cost = scale_verdict(a).causes[0].cost.ms_per_step
    assert data["causes"] == [{
        "status": "resolved", "code": "NODE_STRAGGLER", "bottleneck": "straggler node",
        "culprit": f"node {truth.slow_node}", "cost_ms": {"a": cost, "b": None,
                                                         "change_pct": None},
        "summary": scale_verdict(a).causes[0].summary}]  # fmt: skip
    late = a.late_nodes[0]
    assert data["late_nodes"] == [{"status": "went away", "name": truth.slow_node,
                                   "figure": {"a": late.excess_ms, "b": None,
                                              "change_pct": None}}]  # fmt: skip
    assert data["late_ranks"] == data["slow_links"] == []
    gain = a.gains[late.node].gain_ms
    assert data["node_whatif"] == [
        {"host": truth.slow_node, "gain_ms": {"a": gain, "b": None, "change_pct": None}}
    ]
    text = flat(result.output)
    assert (
        f"step (median over ranks of their mean): A {a.step_ms:,.2f} ms, B {b.step_ms:,.2f}"
        f" ms ({step['median_ms']['change_pct']:+.1f} %), beyond the steps' spread"
    ) in text
    assert f"resolved: straggler node (node {truth.slow_node}), cost per step A {cost:,.2f} ms, " \
           "none in B" in text  # fmt: skip
    assert f"late node went away: {truth.slow_node}, A {late.excess_ms:,.2f}" in text


def test_the_slow_node_is_new_when_the_runs_are_swapped(runs):
    root, truth = runs
    c = compare_scale(root / "fixed", root / "slow")
    assert [(x.status, x.culprit) for x in c.causes] == [("new", f"node {truth.slow_node}")]
    assert [(x.status, x.name) for x in c.late_nodes] == [("appeared", truth.slow_node)]
    assert c.step.beyond_spread and c.step.median_ms.change_pct > 0
    assert c.notes == ()


def test_a_run_against_itself_is_within_the_spread(runs):
    root, truth = runs
    c = compare_scale(root / "slow", root / "slow")
    assert c.step.median_ms.change_pct == 0.0 and not c.step.beyond_spread
    assert [(x.status, x.culprit) for x in c.causes] == [("remains", f"node {truth.slow_node}")]
    assert [(x.status, x.figure.change_pct) for x in c.late_nodes] == [("in both", 0.0)]


def test_html_shows_the_comparison_on_the_shared_page(runs, tmp_path):
    root, truth = runs
    out = tmp_path / "c.html"
    result = invoke(root / "slow", root / "fixed", "--html", out)
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    for html_id in ("step-change", "steps", "causes", "late-nodes", "node-whatif"):
        assert f'id="{html_id}"' in page
    late = page[page.index('id="late-nodes"') :]
    assert f"<td>{truth.slow_node}</td>" in late[: late.index("</table>")]


def test_a_node_file_run_against_a_rank_file_run_of_another_size(runs, rank_run, tmp_path):
    root, _ = runs
    out = tmp_path / "c.json"
    result = invoke(root / "fixed", rank_run, "--json", out)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    rec = load(rank_run)
    means = [r.mean_step_ms for r in rec.analysis.steps.ranks]
    assert data["b"]["analysed_from"] == "rank files" and data["b"]["world_size"] == 64
    assert data["b"]["step_ms"] == pytest.approx(float(np.median(means)), rel=1e-9)
    assert data["b"]["verdict"] == rec.verdict.line
    assert data["late_nodes"] is data["node_whatif"] is data["node_busy_ms"] is None
    text = flat(result.output)
    assert "the runs differ in size (A 256 ranks on 32 nodes, B 64 on 8)" in text
    assert "B analysed from rank files: compared on the step times and the verdict" in text


def test_a_missing_node_file_is_one_line(runs, tmp_path):
    root, _ = runs
    run = tmp_path / "run"
    shutil.copytree(root / "fixed", run)
    gone = node_file_path(run, 0, 3, "colls")
    gone.unlink()
    result = invoke(root / "slow", run)
    assert result.exit_code != 0
    assert flat(result.output) == f"error: {gone}: missing (the manifest lists node and window)"


def test_a_cut_node_file_is_one_line_and_left_as_it_was(runs, tmp_path):
    root, _ = runs
    run = tmp_path / "run"
    shutil.copytree(root / "slow", run)
    cut = node_file_path(run, 0, 5, "steps")
    data = cut.read_bytes()[:300]
    cut.write_bytes(data)
    result = invoke(run, root / "fixed")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"{cut}: not a complete node file" in flat(result.output)
    assert cut.read_bytes() == data


def test_a_slow_link_that_went_away(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale-compare-link")
    truth = node_file_run(root / "link", "slow_link", "pipeline")
    node_file_run(root / "fixed", None, "pipeline")
    a = analyse_node_files(root / "link")
    c = compare_scale(root / "link", root / "fixed")
    hosts = ",".join(sorted(truth.slow_link))
    assert [(x.status, x.code, x.culprit) for x in c.causes] == [
        ("resolved", "SLOW_LINK", f"link {hosts}")
    ]
    worst = {}
    for link in a.links:
        name = f"{' - '.join(sorted(link.hosts))} ({link.op})"
        worst[name] = max(worst.get(name, 0.0), link.transfer_ms)
    assert {x.name: (x.status, x.figure.a, x.figure.b) for x in c.slow_links} == {
        name: ("went away", ms, None) for name, ms in worst.items()
    }
    assert worst and all(sorted(truth.slow_link) == n.split(" (")[0].split(" - ") for n in worst)


def test_the_api_compare_of_node_file_runs_points_to_compare_scale(runs):
    import scalescope

    root, truth = runs
    with pytest.raises(scalescope.RunDirError, match="compare_scale"):
        scalescope.compare(root / "slow", root / "fixed")
    c = scalescope.compare_scale(root / "slow", root / "fixed")
    assert isinstance(c, scalescope.ScaleComparison)
    assert [(x.status, x.culprit) for x in c.causes] == [("resolved", f"node {truth.slow_node}")]
