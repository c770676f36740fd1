"""`benchmarks/gpu_check.py` on this CPU machine: every GPU check says SKIP with its reason
(never PASS), and the CPU smoke of check 3 proves its plumbing — the torch.profiler trace
of a run against the probe's record of the same run — against the files the run wrote,
read here with json and pyarrow. (Check 2's probe-against-the-workload's-clock is the same
comparison tests/e2e/test_bench_cli.py makes; its arithmetic is unit-tested.)"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import torch

from conftest import cli_env

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
SMOKE_SIZES, SMOKE_ITERS, WARMUP_BYTES = (4096, 65536), 5, 8
"""gpucheck.plan.SMOKE's all_reduce sizes and calls, and profiled.py's first call."""


def gpu_check(*args: str, out: Path, timeout: float = 420) -> subprocess.CompletedProcess:
    env = cli_env() | {"OUT": str(out)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--no-setup", *args],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def check_lines(stdout: str) -> dict[str, str]:
    lines = [ln for ln in stdout.splitlines() if ln[:1].isdigit() and "." in ln.split()[0]]
    return {ln.split()[0]: ln for ln in lines}


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present: make gpu-check runs these")
def test_without_a_gpu_every_check_skips_with_its_reason(tmp_path: Path) -> None:
    few_cores = len(os.sched_getaffinity(0)) < 16
    only = "1,2,3,4,5,6" if few_cores else "1,2,3,4,6"
    proc = gpu_check("--only", only, "--work", str(tmp_path / "work"), out=tmp_path / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = check_lines(proc.stdout)
    assert {line.split()[1] for line in lines.values()} == {"SKIP"}
    for check in ("1.env", "2.clock", "2.overhead", "2.phases", "2.memory", "3.nccl.time",
                  "3.gloo-cuda.probe", "3.nccl.cost", "4.trace"):  # fmt: skip
        assert "SKIP (no CUDA device: torch" in lines[check], lines[check]
    assert "SKIP (check 2 measured no images/s on the GPU)" in lines["6.project"]
    if few_cores:
        cores = len(os.sched_getaffinity(0))
        assert f"SKIP ({cores} usable cores, needs 16)" in lines["5.tune"]
    doc = json.loads((tmp_path / "out" / "gpu-check.json").read_text())
    assert {c["status"] for c in doc["checks"]} == {"SKIP"}
    assert sorted(c["check"] for c in doc["checks"]) == sorted(lines)
    assert doc["machine"]["cuda"] is False and doc["mode"] == "full"
    md = (tmp_path / "out" / "gpu-check.md").read_text()
    assert "| 4.trace | SKIP | no CUDA device" in md


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, Path]:
    tmp = tmp_path_factory.mktemp("gpu-check")
    proc = gpu_check("--cpu-smoke", "--only", "3", "--work", str(tmp / "work"), out=tmp / "out")
    assert "3.gloo-cpu.time" in proc.stdout, proc.stdout + proc.stderr
    doc = json.loads((tmp / "out" / "gpu-check.json").read_text())
    return check_lines(proc.stdout), {c["check"]: c for c in doc["checks"]}, tmp / "work"


def only_dir(work: Path, suffix: str) -> Path:
    (found,) = [p for p in work.iterdir() if p.name.endswith(suffix)]
    return found


def probe_all_reduce_bytes(run_dir: Path) -> dict[int, list[int]]:
    """nbytes of every all_reduce row of each rank's event stream."""
    out: dict[int, list[int]] = {}
    for path in sorted((run_dir / "events").glob("rank-*.arrows")):
        table = pa.ipc.open_stream(pa.memory_map(str(path))).read_all().to_pydict()
        rank = int(path.stem.split("-")[1])
        out[rank] = sorted(
            n for k, name, n in zip(table["kind"], table["name"], table["nbytes"], strict=True)
            if k == 1 and name == "all_reduce"
        )  # fmt: skip
    return out


def trace_all_reduce_bytes(trace_dir: Path) -> dict[int, list[int]]:
    """Bytes of every profiled all_reduce, from the traces' ``gloo:all_reduce`` annotations
    (float32: 4 bytes times the input's elements)."""
    out: dict[int, list[int]] = {}
    for path in sorted(trace_dir.glob("rank*.json")):
        events = json.loads(path.read_text())["traceEvents"]
        rank = int(path.name[4 : path.name.index(".")])
        out[rank] = sorted(
            4 * math.prod(e["args"]["Input Dims"][0]) for e in events
            if e.get("name") == "gloo:all_reduce" and e["args"]["Input type"] == ["float"]
        )  # fmt: skip
    return out


@pytest.mark.heavy
def test_smoke_counts_match_the_files_of_both_records(smoke) -> None:
    lines, checks, work = smoke
    assert lines["3.gloo-cpu.probe"].split()[1] == "PASS"
    assert lines["3.gloo-cpu.trace"].split()[1] == "PASS"
    issued = sorted(s for s in SMOKE_SIZES for _ in range(SMOKE_ITERS))
    probe = probe_all_reduce_bytes(only_dir(work, "3-gloo-cpu"))
    assert probe == {0: sorted([WARMUP_BYTES, *issued]), 1: sorted([WARMUP_BYTES, *issued])}
    assert trace_all_reduce_bytes(only_dir(work, "3-gloo-cpu-trace")) == {0: issued, 1: issued}
    time = checks["3.gloo-cpu.time"]
    assert time["status"] == "INFO" and sorted(map(int, time["data"]["sizes"])) == list(SMOKE_SIZES)


def test_a_check_without_time_left_skips_with_the_seconds_left(tmp_path: Path) -> None:
    proc = gpu_check("--cpu-smoke", "--only", "1,3", "--budget-s", "0", "--work",
                     str(tmp_path / "work"), out=tmp_path / "out")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = check_lines(proc.stdout)
    assert "SKIP (time budget: " in lines["1.env"] and "needs about 10 s" in lines["1.env"]
    assert "SKIP (time budget: " in lines["3.comm"] and "needs about 90 s" in lines["3.comm"]
