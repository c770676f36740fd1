"""Check 4: ``scalescope analyze`` of a torch.profiler trace of GPU training (DDP over NCCL,
one rank, batches copied from the host): kernel, memcpy and NCCL kernel rows, and the GPU
idle share."""

from __future__ import annotations

from gpucheck import compare
from gpucheck.check_comm import profiled_run
from gpucheck.machine import Machine, no_nccl
from gpucheck.plan import Plan
from gpucheck.results import CheckResult, skip, verdict
from gpucheck.runner import Runner


def check_trace(runner: Runner, plan: Plan, machine: Machine) -> list[CheckResult]:
    if not plan.smoke and (reason := no_nccl(machine)):
        return [skip("4.trace", reason)]
    backend = "gloo" if plan.smoke else "nccl"
    records = profiled_run(runner, "trace-train", 1, [
        "--backend", backend, "--device", plan.device, "--model", plan.trace_model,
        "--batch-size", str(plan.bench_batch), "--image-size", str(plan.bench_image),
        "--iters", str(plan.trace_steps), "--sizes", "4096",
    ])  # fmt: skip
    gpu = records.trace.get("ingest", {}).get("gpu") or []
    if plan.smoke:
        steps = (records.trace.get("steps") or {}).get("ranks") or [{}]
        n = steps[0].get("num_steps", 0)
        ok = n > 0 and not gpu
        figure = f"{n} profiled steps analysed; no device rows on the CPU ({len(gpu)} GPU rows)"
        return [verdict("4.trace-cpu", ok, figure)]
    return [compare.gpu_rows(gpu, ranks=1)]
