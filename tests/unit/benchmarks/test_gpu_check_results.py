"""gpu_check's lines and files: SKIP carries its reason and is never PASS; the JSON and the
Markdown hold every check with its figure."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from gpucheck.machine import Machine, few_cores, no_cuda, no_nccl  # noqa: E402
from gpucheck.results import (  # noqa: E402
    FAIL,
    INFO,
    PASS,
    SKIP,
    CheckResult,
    failed_to_run,
    skip,
    summary,
    write_outputs,
)

CPU_BOX = Machine(cuda=False, gpu=None, gpus=0, cores=2, torch="2.14.1", nccl=True)
GPU_BOX = Machine(cuda=True, gpu="NVIDIA H100 80GB HBM3", gpus=1, cores=16, torch="2.14.1",
                  nccl=True)  # fmt: skip


def test_skip_reasons_of_this_kind_of_machine():
    assert "no CUDA device" in no_cuda(CPU_BOX) and no_cuda(GPU_BOX) is None
    assert no_nccl(CPU_BOX) == no_cuda(CPU_BOX)
    assert "no NCCL" in no_nccl(Machine(**{**GPU_BOX.as_dict(), "nccl": False}))
    assert few_cores(CPU_BOX) == "2 usable cores, needs 16"
    assert few_cores(GPU_BOX) is None


def test_lines():
    assert skip("4.trace", "no CUDA device").line() == "4.trace            SKIP (no CUDA device)"
    passed = CheckResult("2.clock", PASS, "probe 10 vs workload 10 images/s")
    assert passed.line().split() == ["2.clock", "PASS", "probe", "10", "vs", "workload", "10",
                                     "images/s"]  # fmt: skip
    broken = failed_to_run("3.nccl", "run: exit 1 (boom; log x)")
    assert broken.status == FAIL and broken.line().endswith(
        "FAIL  did not run: run: exit 1 (boom; log x)"
    )


@pytest.fixture
def results() -> list[CheckResult]:
    return [
        CheckResult("1.env", PASS, "gpu NVIDIA H100, driver 570.86.15", data={"driver": "570"}),
        skip("5.scale", "2 usable cores, needs 16"),
        CheckResult("6.project", INFO, "projected 1 / measured 2 = 0.5 | x", data={"ratio": 0.5}),
        failed_to_run("3.nccl.time", "exit 1"),
    ]


def test_summary_counts(results):
    assert summary(results) == {PASS: 1, FAIL: 1, SKIP: 1, INFO: 1}


def test_json_and_markdown(tmp_path, results):
    paths = write_outputs(tmp_path, results, GPU_BOX.as_dict(), "full", "2026-11-25 09:00 UTC")
    assert [p.name for p in paths] == ["gpu-check.json", "gpu-check.md"]
    doc = json.loads(paths[0].read_text())
    assert doc["schema"] == "scalescope.gpu-check/1" and doc["mode"] == "full"
    assert doc["summary"] == {"PASS": 1, "FAIL": 1, "SKIP": 1, "INFO": 1}
    assert [c["check"] for c in doc["checks"]] == ["1.env", "5.scale", "6.project", "3.nccl.time"]
    assert doc["checks"][1] == {"check": "5.scale", "status": "SKIP", "figure": "",
                                "reason": "2 usable cores, needs 16", "data": {}}  # fmt: skip
    assert doc["checks"][2]["data"] == {"ratio": 0.5}
    assert doc["machine"]["gpu"] == "NVIDIA H100 80GB HBM3"
    md = paths[1].read_text()
    assert "# gpu-check (full), 2026-11-25 09:00 UTC" in md
    assert "Machine: NVIDIA H100 80GB HBM3; 16 cores; torch 2.14.1" in md
    assert "| 5.scale | SKIP | 2 usable cores, needs 16 |" in md
    assert "| 6.project | INFO | projected 1 / measured 2 = 0.5 \\| x |" in md
    assert "1 PASS, 1 FAIL, 1 SKIP, 1 INFO" in md
