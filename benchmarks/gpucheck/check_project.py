"""Check 6: ``project RUN_DIR --hardware h100`` from a CPU run of resnet50, against the
images/s check 2 measured on the GPU: the ratio, a number we want to know (INFO). The
target is the catalogue entry of the GPU that ran check 2 (h200 on an H200), h100 when
the catalogue does not know it."""

from __future__ import annotations

from gpucheck import compare
from gpucheck.check_cores import CPU_ONLY
from gpucheck.machine import Machine
from gpucheck.plan import Plan
from gpucheck.results import CheckResult, skip
from gpucheck.runner import Runner, read_json

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


def check_project(
    runner: Runner, plan: Plan, machine: Machine, measured: float | None
) -> list[CheckResult]:
    """Smoke: to a catalogue CPU, against the CPU bench of check 2."""
    if measured is None:
        return [skip("6.project", "check 2 measured no images/s on the GPU")]
    hardware = SMOKE_HARDWARE if plan.smoke else target_hardware(machine)
    projected = projected_samples_per_s(runner, plan, hardware)
    return [compare.projection_ratio(projected, measured, hardware)]
