"""Check 2's copies: a DataLoader's batches copied to the GPU from pageable memory
(profiled.py ``--loader``, one NCCL rank), recorded by the probe's ``to_device`` phase and by
torch.profiler in the same run. Its bytes per step are exactly the batch's and the trace's
host-to-device copies'; its time per step is within 10 % of those copies' from when the host
asked for each (and its stream was free) to its end. The memcpy rows' own durations (the DMA)
are given beside: from pageable memory they leave out the driver's staging, which the host
and the stream wait for all the same (docs/gpu.md, 2026-11-28)."""

from __future__ import annotations

import json
from dataclasses import dataclass
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


GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class TraceCopies:
    """The traces' host-to-device copies per profiled step."""

    dma_ms: float
    """The memcpy rows' own durations: the DMA alone."""
    asked_ms: float
    """Each copy from when the host asked for it (its ``cudaMemcpyAsync``) and its stream was
    free, to its end: for pageable memory the driver's staging through a pinned buffer is
    in it, which the memcpy row leaves out (3 ms of 8.9 for 38.5 MB on an H200)."""
    nbytes: float


def _copies_of(events: list[dict]) -> tuple[float, float, float]:
    """DMA ms, asked-to-done ms and bytes of one trace's host-to-device copies."""
    calls = {(e.get("args") or {}).get("correlation"): e for e in events
             if e.get("cat") == "cuda_runtime"}  # fmt: skip
    gpu = sorted((e for e in events if e.get("cat") in GPU_CATS), key=lambda e: e["ts"])
    free_at: dict[object, float] = {}
    dma = asked = nbytes = 0.0
    for e in gpu:
        args = e.get("args") or {}
        stream, end = args.get("stream"), float(e["ts"]) + float(e.get("dur", 0.0))
        if e["cat"] == "gpu_memcpy" and "HtoD" in str(e.get("name", "")):
            call = calls.get(args.get("correlation"))
            begin = max(float(call["ts"]) if call else float(e["ts"]), free_at.get(stream, 0.0))
            dma += float(e.get("dur", 0.0)) / 1e3
            asked += (end - min(begin, float(e["ts"]))) / 1e3
            nbytes += float(args.get("bytes", 0))
        free_at[stream] = max(free_at.get(stream, 0.0), end)
    return dma, asked, nbytes


def trace_copies(trace_dir: Path, steps: int) -> TraceCopies:
    """Per profiled step, over every trace file of the run (module docstring)."""
    totals = [0.0, 0.0, 0.0]
    for path in sorted(trace_dir.glob("*.json")):
        parts = _copies_of(json.loads(path.read_text()).get("traceEvents", []))
        totals = [a + b for a, b in zip(totals, parts, strict=True)]
    dma, asked, nbytes = (t / steps for t in totals)
    return TraceCopies(dma, asked, nbytes)


def judge(report: dict, trace: TraceCopies, batch: int) -> list[CheckResult]:
    mine = (report.get("copies") or [{}])[0]
    return [
        compare.copy_bytes(mine.get("nbytes_per_step", 0), batch, trace.nbytes),
        compare.copy_time(mine.get("ms_per_step", 0.0), trace.asked_ms, trace.dma_ms),
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
