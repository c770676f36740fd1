"""Check 6: ``project RUN_DIR --hardware h100`` from a CPU run of resnet50, against the
images/s check 2 measured on the GPU: the ratio, a number we want to know (INFO). The
target is the catalogue entry of the GPU that ran check 2 (h200 on an H200), h100 when
the catalogue does not know it.

``6.model``: calibrated on check 2's GPU run of resnet50, ``project --model resnet18``
against resnet18 measured on the same GPU (same batch and images): within ±25 %."""

from __future__ import annotations

from gpucheck import compare
from gpucheck.check_bench import BenchRun
from gpucheck.check_cores import CPU_ONLY
from gpucheck.machine import Machine
from gpucheck.plan import Plan
from gpucheck.results import CheckResult, skip
from gpucheck.runner import Runner, attempt, read_json

CHECKS = ("6.project", "6.model")

DEFAULT_HARDWARE = "h100"
SMOKE_HARDWARE = "epyc-7763"
"""The smoke's target: a catalogue CPU (a 1-rank run has no transfers of its own to fit),
so its ratio proves the plumbing, not the model."""


def target_hardware(machine: Machine) -> str:
    from scalescope.predict.catalogue import match_gpu

    known = match_gpu(machine.gpu or "")
    return known.key if known is not None else DEFAULT_HARDWARE


def projected_samples_per_s(runner: Runner, plan: Plan, hardware: str) -> float:
    run_dir = runner.dir("project-cpu-run")
    runner.cli("project-cpu-run", [
        "bench", plan.bench_model, "-n", "1", f"--batch-size={plan.bench_batch}",
        f"--image-size={plan.bench_image}", f"--steps={plan.project_steps}",
        "--warmup-steps=2", "--run-dir", str(run_dir), "--no-report",
    ], env=CPU_ONLY)  # fmt: skip
    out = run_dir / "p.json"
    runner.cli("project", [
        "project", str(run_dir), "--hardware", hardware, "--nodes", "1", "--ranks-per-node", "1",
        "--json", str(out),
    ])  # fmt: skip
    return float(read_json(out)["points"][0]["samples_per_s"])


def other_model(runner: Runner, plan: Plan, calibrated: BenchRun) -> CheckResult:
    """``6.model``: the other model measured on the GPU, and projected from check 2's run."""
    run_dir = runner.dir("model-run")
    runner.cli("model-run", [
        "bench", plan.other_model, "-n", "1", f"--batch-size={plan.bench_batch}",
        f"--image-size={plan.bench_image}", f"--steps={plan.bench_steps}",
        f"--warmup-steps={plan.bench_warmup}", "--run-dir", str(run_dir), "--no-report",
    ])  # fmt: skip
    out = run_dir / "p.json"
    runner.cli("project-model", [
        "project", str(calibrated.run_dir), "--model", plan.other_model, "--nodes", "1",
        "--json", str(out),
    ])  # fmt: skip
    projected = float(read_json(out)["points"][0]["samples_per_s"])
    measured = float(read_json(run_dir / "bench.json")["images_per_sec"])
    return compare.model_projection(projected, measured, plan.bench_model, plan.other_model)


def check_project(
    runner: Runner, plan: Plan, machine: Machine, calibrated: BenchRun | None
) -> list[CheckResult]:
    """Smoke: to a catalogue CPU, against the CPU bench of check 2; no 6.model (it
    calibrates on a GPU run)."""
    if calibrated is None:
        return [skip(c, "check 2 measured no images/s on the GPU") for c in CHECKS]
    hardware = SMOKE_HARDWARE if plan.smoke else target_hardware(machine)
    projected = projected_samples_per_s(runner, plan, hardware)
    results = [compare.projection_ratio(projected, calibrated.bench["images_per_sec"], hardware)]
    if plan.smoke:
        return [*results, skip("6.model", "--cpu-smoke: the calibration is a GPU run's")]
    return results + attempt("6.model", lambda: [other_model(runner, plan, calibrated)])
