"""Check 2's copies: a DataLoader's batches copied to the GPU from pageable memory
(profiled.py ``--loader``, one NCCL rank), recorded by the probe's ``to_device`` phase and by
torch.profiler in the same run. Its bytes per step are exactly the batch's and the trace's
host-to-device copies'; its time per step is within 10 % of those copies'."""

from __future__ import annotations

import json
from pathlib import Path

from gpucheck import compare
from gpucheck.check_comm import profiled_run
from gpucheck.machine import Machine, no_nccl
from gpucheck.plan import Plan
from gpucheck.results import CheckResult, skip
from gpucheck.runner import Runner, attempt

CHECKS = ("2.copy.bytes", "2.copy.time")
SKIPPED = 3
"""Iterations before the trace: the probe's warm-up steps too."""
LABEL_BYTES = 8
"""int64 class labels."""


def batch_bytes(plan: Plan) -> int:
    images = plan.bench_batch * 3 * plan.bench_image * plan.bench_image * 4
    return images + plan.bench_batch * LABEL_BYTES


def trace_copies(trace_dir: Path, steps: int) -> tuple[float, float]:
    """ms and bytes per profiled step of the traces' host-to-device memory copies."""
    ms = nbytes = 0.0
    for path in sorted(trace_dir.glob("*.json")):
        for e in json.loads(path.read_text()).get("traceEvents", []):
            if e.get("cat") == "gpu_memcpy" and "HtoD" in str(e.get("name", "")):
                ms += float(e.get("dur", 0.0)) / 1e3
                nbytes += float((e.get("args") or {}).get("bytes", 0))
    return ms / steps, nbytes / steps


def judge(report: dict, trace: tuple[float, float], batch: int) -> list[CheckResult]:
    copies = report.get("copies") or []
    if not copies:
        return [compare.copy_bytes(0, batch, trace[1]), compare.copy_time(0.0, trace[0])]
    mine = copies[0]
    return [
        compare.copy_bytes(mine["nbytes_per_step"], batch, trace[1]),
        compare.copy_time(mine["ms_per_step"], trace[0]),
    ]


def run_and_judge(runner: Runner, plan: Plan) -> list[CheckResult]:
    records = profiled_run(runner, "copies", 1, [
        "--backend", "nccl", "--device", "cuda", "--model", plan.bench_model,
        "--batch-size", str(plan.bench_batch), "--image-size", str(plan.bench_image),
        "--iters", str(plan.copy_iters), "--skip", str(SKIPPED), "--sizes", "", "--loader",
    ], run_args=("--warmup-steps", str(SKIPPED)))  # fmt: skip
    assert records.trace_dir is not None
    trace = trace_copies(records.trace_dir, plan.copy_iters)
    return judge(records.probe, trace, batch_bytes(plan))


def check_copies(runner: Runner, plan: Plan, machine: Machine) -> list[CheckResult]:
    if plan.smoke:
        return [skip(c, "CPU smoke: batches are not copied to a device") for c in CHECKS]
    if reason := no_nccl(machine):
        return [skip(c, reason) for c in CHECKS]
    return attempt("2.copy", lambda: run_and_judge(runner, plan))
