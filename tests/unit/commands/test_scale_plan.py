"""Sizes and batches of `scalescope scale`, and its bad input through the real command
(in-process: every error is raised before a rank starts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalescope.cli import app
from scalescope.commands.scale import ScalePlan
from scalescope.events.study import ScalePoint, ScaleStudy, save_study

DDP_TRAIN = Path(__file__).parents[2] / "e2e" / "scripts" / "ddp_train.py"


def test_weak_keeps_the_per_rank_batch_strong_divides_the_global_one():
    weak = ScalePlan(ranks=(1, 2, 4), nodes=(1, 1, 1), batch_size=32, batch_arg="--batch-size")
    assert [weak.per_rank_batch(n) for n in (1, 2, 4)] == [32, 32, 32]
    strong = ScalePlan(ranks=(1, 2, 4), nodes=(1, 1, 2), strong=True, batch_size=64)
    assert [strong.per_rank_batch(n) for n in (1, 2, 4)] == [64, 32, 16]
    assert strong.args_for(["--batch-size", "{batch}", "--lr=1"], 4) == [
        "--batch-size", "16", "--lr=1",
    ]  # fmt: skip
    assert weak.args_for(["resnet18"], 2) == ["resnet18", "--batch-size=32"]
    script = ScalePlan(ranks=(1,), nodes=(1,))
    assert script.args_for(["--steps", "3"], 1) == ["--steps", "3"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ranks", "1,x", "--bench", "resnet18"], "--ranks takes numbers like 1,2,4"),
        (["--ranks", "0,2", "--bench", "resnet18"], "--ranks needs positive rank counts"),
        (["--ranks", "1,2", "--nodes", "1", "--bench", "resnet18"], "--nodes gives 1 sizes"),
        (["--ranks", "3", "--nodes", "2", "--bench", "resnet18"], "3 ranks do not spread"),
        (["--ranks", "1,4", "--strong", "--batch-size", "6", "--bench", "resnet18"],
         "global batch 6 does not divide by [4] ranks"),
        (["--ranks", "1,2", "--strong", "train.py"], "--strong needs --batch-size"),
        (["--ranks", "1,2"], "give a training script or --bench MODEL"),
        (["--ranks", "1,2", "--bench", "resnet18", "train.py"], "one of them"),
        (["--ranks", "1", "--bench", "nosuchnet[0]"], "nosuchnet[0]"),
        (["--ranks", "1", "missing[1].py"], "script not found: missing[1].py"),
        (["--ranks", "1", "--batch-size", "8", str(DDP_TRAIN)], "needs {batch} in the script's"),
        (["--ranks", "1", "--bench", "resnet18", "--steps", "3", "--warmup-steps", "3"],
         "--warmup-steps (3) must be less than --steps (3)"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_error(args, message, tmp_path):
    result = CliRunner().invoke(app, ["scale", *args, "--study-dir", str(tmp_path / "s")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "s").exists()


def test_an_existing_study_is_not_overwritten(tmp_path):
    study = ScaleStudy(points=[ScalePoint(ranks=1, run_dir="ranks-1", samples_per_s=5.0)])
    path = save_study(study, tmp_path / "s")
    before = path.read_bytes()
    args = ["scale", "--ranks", "1", "--bench", "resnet18", "--study-dir", str(tmp_path / "s")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "already holds a study" in result.output
    assert path.read_bytes() == before


def test_each_size_gets_its_ranks_nodes_batch_and_run_directory(tmp_path):
    from scalescope.commands.scale import point_spec
    from scalescope.launch.process.local import LaunchOptions
    from scalescope.launch.run.runner import RunSpec

    base = RunSpec(
        target="scalescope.bench.workload", is_module=True, workload="resnet18",
        launch=LaunchOptions(rdzv_endpoint="127.0.0.1:29500"),
        args=["resnet18", "--batch-size=64"], options={"batch_size": 64},
    )  # fmt: skip
    plan = ScalePlan(ranks=(1, 4), nodes=(1, 2), strong=True, batch_size=64,
                     batch_arg="--batch-size")  # fmt: skip
    spec = point_spec(base, plan, tmp_path, 1)
    assert (spec.launch.nproc_per_node, spec.launch.nnodes) == (2, 2)
    assert spec.run_dir == tmp_path / "ranks-4"
    assert spec.args[-1] == "--batch-size=16" and spec.options["batch_size"] == 16
    assert base.options["batch_size"] == 64


def test_report_of_a_study_refuses_run_only_outputs(tmp_path):
    save_study(ScaleStudy(points=[ScalePoint(ranks=1, status="failed", error="x")]), tmp_path)
    result = CliRunner().invoke(app, ["report", str(tmp_path), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 2 and "is a scale study" in " ".join(result.output.split())
    shown = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert shown.exit_code == 0 and "FAILED" in shown.output, shown.output


def test_a_node_sits_out_the_sizes_it_is_not_in_and_joins_the_others(tmp_path):
    """Node 1 of a --nodes 1,2 study: its base run has 2 nodes (scale gives it the study's
    largest count, so --node-rank 1 is valid); the 1-node size goes on without it."""
    from scalescope.commands.scale import run_study
    from scalescope.launch.process.local import LaunchOptions
    from scalescope.launch.run.runner import RunSpec

    base = RunSpec(
        target="scalescope.bench.workload", is_module=True, workload="resnet18",
        launch=LaunchOptions(nnodes=2, node_rank=1, rdzv_endpoint="127.0.0.1:29500"),
        args=["resnet18"],
    )  # fmt: skip
    started: list[RunSpec] = []
    plan = ScalePlan(ranks=(1, 2), nodes=(1, 2), batch_size=8, batch_arg="--batch-size")
    study = run_study(base, plan, tmp_path, started.append)
    assert study.points[0].error == "this node is not in this size"
    (spec,) = started
    assert (spec.launch.nnodes, spec.launch.node_rank, spec.launch.nproc_per_node) == (2, 1, 1)
    assert not (tmp_path / "scale.json").exists(), "only node 0 writes the study"
