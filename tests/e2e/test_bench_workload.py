"""Run the bench workload for real: two gloo ranks started by torch's elastic launcher."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from ports import free_port

STEP_LINE = re.compile(r"^\d+\timages/sec: \d+\.\d \+/- \d+\.\d \(jitter = \d+\.\d\)\t\d+\.\d{3}$")


def run_workload(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        "-m",
        "scalescope.bench.workload",
        *args,
    ]
    env = {**os.environ, "SCALESCOPE_RUN_DIR": str(run_dir), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def check_bench(run_dir: Path, stdout: str, steps: int, warmup: int, global_batch: int) -> dict:
    bench = json.loads((run_dir / "bench.json").read_text())
    times = bench["step_times_s"]
    assert (bench["steps"], bench["warmup_steps"], len(times)) == (steps, warmup, steps)
    compute = bench["compute_times_s"]
    assert len(compute) == steps and all(0 < c <= t for c, t in zip(compute, times, strict=True))
    assert bench["world_size"] == 2 and bench["batch_size"] * 2 == global_batch
    expected = global_batch * (steps - warmup) / math.fsum(times[warmup:])
    assert bench["images_per_sec"] == pytest.approx(expected, rel=1e-9)
    assert bench["images_per_sec_mean"] == pytest.approx(expected, rel=1e-9)
    assert bench["images_per_sec_ci"] >= 0 and bench["images_per_sec_jitter"] >= 0
    assert math.isfinite(bench["final_loss"])
    lines = stdout.splitlines()
    assert "Step\tImg/sec\ttotal_loss" in lines
    assert any(STEP_LINE.match(line) for line in lines), stdout
    assert f"total images/sec: {bench['images_per_sec']:.2f}" in lines
    return bench


@pytest.mark.heavy
@pytest.mark.timeout(120)
def test_synthetic_two_ranks(tmp_path: Path) -> None:
    proc = run_workload(
        tmp_path,
        *("resnet18", "--image-size", "32", "--batch-size", "4"),
        *("--steps", "6", "--warmup-steps", "2", "--display-every", "2"),
    )
    bench = check_bench(tmp_path, proc.stdout, steps=6, warmup=2, global_batch=8)
    assert (bench["model"], bench["image_size"], bench["data"]) == ("resnet18", 32, "synthetic")
    steps_shown = [
        int(line.split("\t")[0]) for line in proc.stdout.splitlines() if STEP_LINE.match(line)
    ]
    assert steps_shown == [1, 2, 4]


@pytest.mark.heavy
@pytest.mark.timeout(120)
def test_image_folder_two_ranks(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for c, name in enumerate(("cat", "dog")):
        (data / name).mkdir(parents=True)
        for i in range(8):
            color = (120 * c, 20 * i, 200 - 20 * i)
            Image.new("RGB", (48 + i, 40 + 2 * i), color).save(data / name / f"{i}.jpg")
    run_dir = tmp_path / "run"
    proc = run_workload(
        run_dir,
        *("resnet18", "--data", str(data), "--image-size", "32", "--batch-size", "4"),
        *("--epochs", "3", "--warmup-steps", "1"),
    )
    bench = check_bench(run_dir, proc.stdout, steps=6, warmup=1, global_batch=8)
    assert bench["data"] == str(data)
    assert bench["options"]["workers"] == 2


@pytest.mark.heavy
@pytest.mark.timeout(120)
def test_bf16_channels_last_two_ranks(tmp_path: Path) -> None:
    proc = run_workload(
        tmp_path,
        *("resnet18", "--image-size", "32", "--batch-size", "4", "--steps", "4"),
        *("--warmup-steps", "1", "--bf16", "--channels-last", "--bucket-cap-mb", "1"),
    )
    bench = check_bench(tmp_path, proc.stdout, steps=4, warmup=1, global_batch=8)
    assert bench["options"]["bf16"] and bench["options"]["channels_last"]
    assert bench["options"]["bucket_cap_mb"] == 1.0
