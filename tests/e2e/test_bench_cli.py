"""`scalescope bench` through the CLI: the probe's numbers against independent ones."""

from __future__ import annotations

import json

import pytest
import torchvision

from conftest import scalescope, scalescope_in_process
from scalescope.events import Kind, load_run

STEPS, WARMUP, BATCH = 8, 2, 4


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    proc = scalescope(
        "bench", "resnet18", "-n", "2", "--bind-to", "core", "--batch-size", BATCH,
        "--image-size", 32, "--steps", STEPS, "--warmup-steps", WARMUP, "--run-dir", tmp / "run",
        cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc, load_run(tmp / "run")


def test_bench_prints_throughput_and_report(bench_run):
    proc, run = bench_run
    assert "total images/sec:" in proc.stdout
    assert "Throughput and step time" in proc.stdout and "Collectives" in proc.stdout
    assert run.meta.workload == "resnet18" and run.meta.warmup_steps == WARMUP
    assert run.meta.options["batch_size"] == BATCH
    for rank in (0, 1):  # 2 cores / 2 local ranks: one core and one thread each
        meta = run.ranks[rank]
        assert meta.bound and meta.cpus == [rank] and meta.num_threads == 1
        assert meta.thread_env["OMP_NUM_THREADS"] == "1"
    assert [p["cpus"] for p in run.meta.placements] == [[0], [1]]


def test_gradient_bytes_equal_resnet18_parameters(bench_run):
    _, run = bench_run
    model = torchvision.models.resnet18(num_classes=1000)
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    ev = run.events
    grads = ev.select((ev.kind == Kind.COLLECTIVE) & ev.where("tag", "gradients"))
    for rank in (0, 1):
        mine = grads.select(grads.rank == rank)
        for step in range(STEPS):
            assert mine.nbytes[mine.step == step].sum() == trainable


def test_report_throughput_agrees_with_the_workloads_own_timing(bench_run, tmp_path):
    _, run = bench_run
    bench = json.loads((run.path / "bench.json").read_text())
    proc = scalescope("report", run.path, "--json", tmp_path / "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["steps"]["total_samples"] == BATCH * 2 * (STEPS - WARMUP)
    assert report["steps"]["samples_per_s"] == pytest.approx(bench["images_per_sec"], rel=0.1)


def test_report_with_itself_as_baseline_and_a_threshold(bench_run, tmp_path):
    """--baseline takes the FLOP/s fraction the run reached as the expected one: the same
    diagnosis as setting that fraction with --threshold; -t values land in the JSON."""
    _, run = bench_run
    calibrated, explicit = tmp_path / "calibrated.json", tmp_path / "explicit.json"
    proc = scalescope("report", run.path, "--baseline", run.path, "-t", "data_share_pct=20",
                      "--json", calibrated, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    used = json.loads(calibrated.read_text())["diagnosis"]["thresholds"]
    fraction = used["flops_expected_fraction"]
    assert 0 < fraction <= 1 and used["data_share_pct"] == 20.0
    assert used["flops_low_fraction"] == pytest.approx(min(0.25, fraction / 2))
    assert f"expected FLOP/s: {100 * fraction:.0f}% of the estimated peak" in proc.stderr
    proc = scalescope("report", run.path, "-t", f"flops_expected_fraction={fraction!r}",
                      "-t", f"flops_low_fraction={used['flops_low_fraction']!r}",
                      "-t", "data_share_pct=20", "--json", explicit, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        json.loads(explicit.read_text())["diagnosis"]
        == json.loads(calibrated.read_text())["diagnosis"]
    )


def test_report_refuses_an_unknown_threshold(bench_run, tmp_path):
    _, run = bench_run
    proc = scalescope_in_process("report", run.path, "-t", "speed=11", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "--threshold 'speed=11': expected NAME=VALUE with NAME one of" in proc.stderr


@pytest.mark.heavy
def test_no_probe_runs_the_same_workload_without_events(run_cli, tmp_path):
    proc = run_cli(
        "bench", "resnet18", "-n", "2", "--batch-size", "2", "--image-size", "32",
        "--steps", "3", "--warmup-steps", "1", "--no-probe", "--run-dir", "run",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "total images/sec:" in proc.stdout
    assert not (tmp_path / "run" / "events").exists()
    assert (tmp_path / "run" / "bench.json").exists()
    report = run_cli("report", "run")
    assert report.returncode == 0
    assert "probe off" in report.stdout


def test_unknown_model_lists_valid_ones(cli_in_process):
    proc = cli_in_process("bench", "resnet1", "-n", "2")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "unknown model 'resnet1'" in proc.stderr and "resnet50" in proc.stderr


def test_data_that_is_not_an_image_folder(cli_in_process, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    proc = cli_in_process("bench", "resnet18", "--data", str(tmp_path / "notes"))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "expected DIR/<class>/<image>" in proc.stderr
    missing = cli_in_process("bench", "resnet18", "--data", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_unknown_bench_option(cli_in_process):
    proc = cli_in_process("bench", "resnet18", "--bogus")
    assert proc.returncode == 2
    assert "unknown option --bogus" in proc.stderr
