"""Check 2: ``bench -n 1`` on CUDA. Images/s of the probe against the workload's own clock,
probe on/off (interleaved), phases summing to the step, peak device memory against
torch.cuda.max_memory_allocated of the run without the probe."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucheck import compare
from gpucheck.machine import Machine, no_cuda
from gpucheck.plan import Plan
from gpucheck.results import CheckResult, skip
from gpucheck.runner import Runner, read_json

CHECKS = ("2.clock", "2.overhead", "2.phases", "2.memory")


@dataclass
class BenchRun:
    run_dir: Path
    bench: dict[str, Any]
    """bench.json: the workload's own clock."""
    report: dict[str, Any] | None
    """report --json (None for a run without the probe)."""


def bench_args(plan: Plan, run_dir: Path, probe: bool) -> list[str]:
    args = [
        "bench", plan.bench_model, "-n", "1", f"--batch-size={plan.bench_batch}",
        f"--image-size={plan.bench_image}", f"--steps={plan.bench_steps}",
        f"--warmup-steps={plan.bench_warmup}", "--run-dir", str(run_dir), "--no-report",
    ]  # fmt: skip
    return args if probe else [*args, "--no-probe"]


def bench_once(runner: Runner, plan: Plan, probe: bool, name: str) -> BenchRun:
    run_dir = runner.dir(name)
    runner.cli(name, bench_args(plan, run_dir, probe))
    report = None
    if probe:
        runner.cli(f"{name}-report", ["report", str(run_dir), "--json", str(run_dir / "r.json")])
        report = read_json(run_dir / "r.json")
    return BenchRun(run_dir, read_json(run_dir / "bench.json"), report)


def interleaved(runner: Runner, plan: Plan) -> tuple[list[BenchRun], list[BenchRun]]:
    """A B, B A, A B, ... (A with the probe), so drift hits both alike."""
    on: list[BenchRun] = []
    off: list[BenchRun] = []
    for i in range(plan.overhead_pairs):
        for probe in (True, False) if i % 2 == 0 else (False, True):
            run = bench_once(runner, plan, probe, f"bench-{i}-{'probe' if probe else 'noprobe'}")
            (on if probe else off).append(run)
    return on, off


def rank0(report: dict[str, Any]) -> dict[str, Any]:
    return report["steps"]["ranks"][0]


def phase_means(report: dict[str, Any]) -> tuple[dict[str, float], float]:
    phases = {p["phase"]: p["mean_ms"] for p in rank0(report)["phases"]}
    step = phases.pop("step")
    phases.pop("other", None)
    return phases, step


def probe_peak(report: dict[str, Any]) -> int | None:
    peaks = [m["peak_bytes"] for m in rank0(report)["memory"] if m["name"] == "cuda_max_allocated"]
    return max(peaks) if peaks else None


def judge(plan: Plan, on: list[BenchRun], off: list[BenchRun]) -> list[CheckResult]:
    first = on[0]
    assert first.report is not None
    results = [
        compare.clock_agreement(
            first.report["steps"]["samples_per_s"], first.bench["images_per_sec"]
        ),
        compare.overhead_ratio(
            [r.bench["images_per_sec"] for r in on], [r.bench["images_per_sec"] for r in off]
        ),
        compare.phase_sum(*phase_means(first.report)),
    ]
    peak, torch_peak = probe_peak(first.report), off[0].bench.get("cuda_max_memory_allocated")
    if plan.device != "cuda":
        results.append(skip("2.memory", "CPU smoke: no device memory to compare"))
    elif peak is None or torch_peak is None:
        results.append(skip("2.memory", "no cuda_max_allocated row or no workload figure"))
    else:
        results.append(compare.memory_agreement(peak, torch_peak))
    return results


def check_bench(
    runner: Runner, plan: Plan, machine: Machine
) -> tuple[list[CheckResult], BenchRun | None]:
    """The results, and the first run with the probe (check 6 compares with its images/s
    and calibrates on it)."""
    if not plan.smoke and (reason := no_cuda(machine)):
        return [skip(c, reason) for c in CHECKS], None
    on, off = interleaved(runner, plan)
    return judge(plan, on, off), on[0]
