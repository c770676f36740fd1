"""`scalescope bench --global-batch N --recipe lars`: the recipe's numbers reach the ranks."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from conftest import scalescope
from scalescope.cli import app

STEPS = 4


@pytest.fixture(scope="module")
def lars_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recipe")
    proc = scalescope(
        "bench", "resnet18", "-n", "2", "--global-batch", 8, "--recipe", "lars",
        "--image-size", 32, "--steps", STEPS, "--warmup-steps", 1, "--run-dir", tmp / "run",
        "--no-report", cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads((tmp / "run" / "bench.json").read_text())


@pytest.mark.heavy
def test_global_batch_is_split_over_the_ranks(lars_run):
    _, bench = lars_run
    assert (bench["batch_size"], bench["global_batch_size"]) == (4, 8)


@pytest.mark.heavy
def test_the_lars_recipe_sets_optimizer_rate_warmup_and_smoothing(lars_run):
    proc, bench = lars_run
    options = bench["options"]
    assert options["recipe"] == "lars" and options["optimizer"] == "LARS"
    assert options["lr"] == pytest.approx(2.0 * math.sqrt(8 / 256))
    # synthetic data of STEPS batches is one epoch: 5 warmup epochs capped at half the run
    assert options["lr_warmup_steps"] == STEPS // 2
    assert options["label_smoothing"] == 0.1
    assert "Recipe: lars  Optimizer: LARS" in proc.stdout


def error_of(*args) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_bad_recipe_options_fail_before_any_rank_starts():
    assert "does not split evenly over 2 ranks" in error_of(
        "bench", "resnet18", "-n", "2", "--global-batch", "9"
    )
    assert "not both" in error_of("bench", "resnet18", "--global-batch", "8", "--batch-size", "4")
    assert "unknown recipe 'adam'; choose goyal or lars" in error_of(
        "bench", "resnet18", "--recipe", "adam"
    )
