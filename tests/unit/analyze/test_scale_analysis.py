"""analyze/scale/ and its verdict (diagnose/scale_verdict.py) on generated runs with node
files and sampled rank files (benchmarks/synthetic_nodes.py): the planted node, rank or link
named first, no bottleneck where only jitter was planted, and `scalescope report` on such a
run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.analyze.scale.summary import analyse_node_files, from_node_files  # noqa: E402
from scalescope.cli import app  # noqa: E402
from scalescope.diagnose.scale_recording import ScaleRecording  # noqa: E402
from scalescope.diagnose.scale_verdict import scale_verdict  # noqa: E402
from scalescope.events.files import node_file_path  # noqa: E402
from synthetic_nodes import write_scale_run  # noqa: E402

STEPS = 120


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    cases = {"slow_node": ("ddp", "slow_node"), "slow_rank": ("ddp", "slow_rank"),
             "jitter": ("ddp", None), "slow_link": ("pipeline", "slow_link")}  # fmt: skip
    out = {}
    for name, (layout, plant) in cases.items():
        truth = write_scale_run(root / name, 256, STEPS, plant, seed=11, layout=layout,
                                sample_every=4)  # fmt: skip
        out[name] = (root / name, truth)
    return out


def test_runs_with_sampled_rank_files_are_analysed_from_node_files(runs):
    run, truth = runs["jitter"]
    assert from_node_files(run)
    a = analyse_node_files(run)
    assert a.world_size == 256 and len(a.hosts) == 32
    assert a.rank_steps.tolist() == [STEPS - 5] * 256
    assert a.rank_files == tuple(range(0, 256, 32))


def test_the_slow_node_is_named_first(runs):
    run, truth = runs["slow_node"]
    v = scale_verdict(analyse_node_files(run))
    assert v.state == "bottleneck"
    assert (v.culprit.kind, v.culprit.name) == ("node", truth.slow_node)
    assert v.culprit.ranks == truth.slow_ranks


def test_the_slow_rank_is_named_first(runs):
    run, truth = runs["slow_rank"]
    v = scale_verdict(analyse_node_files(run))
    assert (v.culprit.kind, v.culprit.ranks) == ("rank", truth.slow_ranks)


def test_the_slow_link_is_named_first(runs):
    run, truth = runs["slow_link"]
    v = scale_verdict(analyse_node_files(run))
    assert v.top.code == "SLOW_LINK"
    assert v.culprit.name == ",".join(sorted(truth.slow_link))


def test_jitter_alone_is_no_bottleneck(runs):
    run, _ = runs["jitter"]
    a = analyse_node_files(run)
    assert (a.late_nodes, a.late_ranks, a.links) == ([], [], [])
    assert scale_verdict(a).state == "no bottleneck"


def test_a_ranks_detail_comes_from_its_rank_file_alone(runs):
    run, _ = runs["slow_node"]
    rec = ScaleRecording(run)
    detail = rec.rank(32)
    assert detail.steps == STEPS and detail.collectives_per_step == 4.0
    with pytest.raises(ValueError, match="rank 33 has no rank file"):
        rec.rank(33)


def test_a_ranks_detail_counts_the_calls_of_its_summarised_steps(runs, tmp_path, monkeypatch):
    """The same run folded as at ``--record summary`` (the default): steps 0-1 and 2 in every
    10 keep their calls' rows, the others' calls are counted from their SUMMARY rows."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks" / "faultbench"))
    from levels import summarised_run

    run, _ = runs["slow_node"]
    monkeypatch.setenv("SCALESCOPE_RECORD_WINDOWS", "2:10:2")
    summarised_run(run, tmp_path / "run", warmup_steps=1)
    detail = ScaleRecording(tmp_path / "run").rank(32)
    assert detail.steps == STEPS and detail.collectives_per_step == 4.0


def test_report_says_it_was_analysed_from_node_files(runs, tmp_path):
    run, truth = runs["slow_node"]
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["report", str(run), "--json", str(out), "--rank", "0"])
    assert result.exit_code == 0, result.output
    assert "analysed from node files (32 nodes, 256 ranks" in result.output
    assert f"node {truth.slow_node} is late" in result.output
    assert "rank 0: 120 steps" in result.output
    data = json.loads(out.read_text())
    assert data["analysed_from"] == "node files"
    assert data["verdict"]["causes"][0]["culprit"]["name"] == truth.slow_node


def test_report_json_of_a_slow_link(runs, tmp_path):
    run, truth = runs["slow_link"]
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["report", str(run), "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["verdict"]["causes"][0]["code"] == "SLOW_LINK"
    assert {tuple(sorted(x["hosts"])) for x in data["slow_links"]} == {
        tuple(sorted(truth.slow_link))
    }


def test_report_of_a_run_with_a_missing_node_file_is_one_line(runs, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(runs["jitter"][0], run)
    gone = node_file_path(run, 0, 7, "steps")
    gone.unlink()
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code != 0
    assert f"{gone}: missing" in result.output
    assert "Traceback" not in result.output
